package metal

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/equinix/equinix-sdk-go/services/metalv1"

	"github.com/metal-ccm/cloud-provider-equinix-metal/host/config"
	"github.com/metal-ccm/cloud-provider-equinix-metal/host/redact"
)

// ProjectBGPConfig returns the project's BGP configuration. A project without
// one, or with a disabled one, gives an error wrapping ErrBGPNotEnabled (the
// API answers 404 or 200 with an empty object in that case). The md5 field
// is the project's BGP password: never log the result whole.
func (c *Client) ProjectBGPConfig(ctx context.Context) (*metalv1.BgpConfig, error) {
	ctx, cancel := c.call(ctx, opGetBGPConfig)
	defer cancel()
	cfg, resp, err := c.api.BGPApi.FindBgpConfigByProject(ctx, c.opts.ProjectID).Execute()
	if err != nil {
		err = c.red.apiError(opGetBGPConfig, resp, err)
		if IsNotFound(err) {
			return nil, fmt.Errorf("%s: %w", opGetBGPConfig.desc, ErrBGPNotEnabled)
		}
		return nil, err
	}
	// The project's password enters the process here: from now on no log
	// line shows it, whatever the verbosity.
	redact.Default.Add(cfg.GetMd5())
	if cfg.GetId() == "" || cfg.GetStatus() == metalv1.BGPCONFIGSTATUS_DISABLED {
		return nil, fmt.Errorf("%s: %w", opGetBGPConfig.desc, ErrBGPNotEnabled)
	}
	return cfg, nil
}

// EnableProjectBGP asks for local BGP on the project with the given ASN and
// optional MD5 password. It is a POST and is not retried; the caller checks
// ProjectBGPConfig first and calls again on its next sync if this fails.
// The password appears in no error or log line.
func (c *Client) EnableProjectBGP(ctx context.Context, asn int64, md5 config.Secret) error {
	ctx, cancel := c.call(ctx, opEnableBGP)
	defer cancel()
	in := metalv1.BgpConfigRequestInput{
		Asn:            asn,
		DeploymentType: metalv1.BGPCONFIGREQUESTINPUTDEPLOYMENTTYPE_LOCAL,
		UseCase:        metalv1.PtrString("kubernetes-load-balancer"),
	}
	if md5 != "" {
		in.Md5 = metalv1.PtrString(md5.Reveal())
	}
	resp, err := c.api.BGPApi.RequestBgpConfig(ctx, c.opts.ProjectID).BgpConfigRequestInput(in).Execute()
	return c.red.with(md5).apiError(opEnableBGP, resp, err)
}

// EnsureDeviceBGPSession makes sure the device has an IPv4 BGP session.
//
// A device already known to have one costs no call. Otherwise the session is
// created: a new node costs one POST. The API refuses a second session with
// 422; "already has session" counts as success, and any other 422 is checked
// by listing the device's sessions (an IPv4 session there is success too), so
// the answer does not hang on the exact wording. This order, rather than
// listing first, saves one call per joining node; the POST is safe to repeat
// because the API never creates a second session for the same family.
func (c *Client) EnsureDeviceBGPSession(ctx context.Context, deviceID string) error {
	return c.ensureSession(ctx, deviceID, metalv1.BGPSESSIONINPUTADDRESSFAMILY_IPV4)
}

// EnsureDeviceBGPSessionIPv6 is EnsureDeviceBGPSession for the device's IPv6
// session, which the CCM asks for only once a Service has an IPv6 Elastic
// IP: a cluster without one makes the calls it made before IPv6.
func (c *Client) EnsureDeviceBGPSessionIPv6(ctx context.Context, deviceID string) error {
	return c.ensureSession(ctx, deviceID, metalv1.BGPSESSIONINPUTADDRESSFAMILY_IPV6)
}

// ensureSession makes sure the device has a session of family fam.
func (c *Client) ensureSession(ctx context.Context, deviceID string, fam metalv1.BGPSessionInputAddressFamily) error {
	if deviceID == "" {
		return errors.New("create device BGP session: empty device ID")
	}
	key := sessionKey(deviceID, fam)
	c.bgpMu.Lock()
	known := c.bgpSessions[key]
	c.bgpMu.Unlock()
	if known {
		return nil
	}
	cctx, cancel := c.call(ctx, opCreateBGPSession)
	defer cancel()
	in := metalv1.BGPSessionInput{AddressFamily: fam.Ptr()}
	_, resp, err := c.api.DevicesApi.CreateBgpSession(cctx, deviceID).BGPSessionInput(in).Execute()
	err = c.red.apiError(opCreateBGPSession, resp, err)
	var apiErr *callError
	if errors.As(err, &apiErr) && apiErr.StatusCode == http.StatusUnprocessableEntity {
		if strings.Contains(strings.ToLower(apiErr.Message), "already has session") {
			err = nil
		} else if has, lerr := c.hasSession(ctx, deviceID, metalv1.BgpSessionAddressFamily(fam)); lerr == nil && has {
			err = nil
		}
	}
	if err != nil {
		return err
	}
	c.bgpMu.Lock()
	c.bgpSessions[key] = true
	c.bgpMu.Unlock()
	return nil
}

// sessionKey is the memo key of a device's session of family fam: the
// device ID alone for IPv4, as before IPv6.
func sessionKey(deviceID string, fam metalv1.BGPSessionInputAddressFamily) string {
	if fam == metalv1.BGPSESSIONINPUTADDRESSFAMILY_IPV4 {
		return deviceID
	}
	return deviceID + "/" + string(fam)
}

// DeviceBGPSessions lists a device's BGP sessions (one GET, retried).
func (c *Client) DeviceBGPSessions(ctx context.Context, deviceID string) ([]metalv1.BgpSession, error) {
	ctx, cancel := c.call(ctx, opListBGPSessions)
	defer cancel()
	list, resp, err := c.api.DevicesApi.FindBgpSessions(ctx, deviceID).Execute()
	if err != nil {
		return nil, c.red.apiError(opListBGPSessions, resp, err)
	}
	return list.BgpSessions, nil
}

func (c *Client) hasSession(ctx context.Context, deviceID string, fam metalv1.BgpSessionAddressFamily) (bool, error) {
	sessions, err := c.DeviceBGPSessions(ctx, deviceID)
	if err != nil {
		return false, err
	}
	for _, s := range sessions {
		if s.AddressFamily == fam {
			return true, nil
		}
	}
	return false, nil
}

// DeviceBGPNeighbors returns the device's BGP neighbor data (peer ASN and
// IPs, the device's ASN and source IP, the MD5 password). One GET, retried;
// not cached here: the caller keeps it per node. Never log it whole: it
// holds the BGP password. RoutesIn and RoutesOut are always empty: they
// are dropped before decoding (see trim.go).
func (c *Client) DeviceBGPNeighbors(ctx context.Context, deviceID string) ([]metalv1.BgpNeighborData, error) {
	if deviceID == "" {
		return nil, errors.New("get device BGP neighbors: empty device ID")
	}
	ctx, cancel := c.call(ctx, opGetBGPNeighbors)
	defer cancel()
	ctx = withTrim(ctx, dropNeighbourRoutes)
	n, resp, err := c.api.DevicesApi.GetBgpNeighborData(ctx, deviceID).Execute()
	if err != nil {
		return nil, c.red.apiError(opGetBGPNeighbors, resp, err)
	}
	for _, nb := range n.BgpNeighbors {
		redact.Default.Add(nb.GetMd5Password())
	}
	return n.BgpNeighbors, nil
}
