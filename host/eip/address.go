package eip

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	cloudapi "k8s.io/cloud-provider/api"
	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"

	"github.com/metal-ccm/cloud-provider-equinix-metal/host/fieldmanager"
)

// spec.loadBalancerIP plays two roles. Set by the user, it brings the
// user's own address: the CCM reserves nothing, and serves it if it is an
// Elastic IP of the project (ownAddress). Set by the CCM (fieldmanager.CCM,
// right after reserving), it publishes the Service's own Elastic IP for load
// balancers written for upstream. The two are told apart by who last wrote
// the field (managedFields), never by whether a reservation exists: a
// reservation deleted outside the CCM must not turn the CCM's own address
// into a "bring your own" one that nobody owns.

// Event reasons of the two address problems.
const (
	// ReasonInvalidIP: spec.loadBalancerIP is no address the CCM can serve.
	ReasonInvalidIP = "InvalidLoadBalancerIP"
	// ReasonLost: the Service's own reservation no longer exists.
	ReasonLost = "ElasticIPLost"
)

// invalidIPRetry is how long the service controller waits before trying a
// Service with an unusable spec.loadBalancerIP again. Retrying cannot fix
// it; editing the Service can, and an edit is synced at once whatever this
// says. Long, so that a broken Service costs no API calls and no Event storm.
var invalidIPRetry = time.Hour

// checkRequestedIP returns nil when ip (spec.loadBalancerIP set by the user)
// is an address the CCM can serve, and otherwise an error that names the
// field and the fix, and that tells the service controller to retry only
// after invalidIPRetry. Whether its family is one of the Service's is
// checkLoadBalancerIPFamily's.
func checkRequestedIP(ip string) error {
	a, err := netip.ParseAddr(ip)
	switch {
	case err != nil:
		return cloudapi.NewRetryError(fmt.Sprintf("spec.loadBalancerIP %q is not an IP address; set it to an Elastic IP address reserved in the project (bring your own IP), or remove the field and the CCM reserves one", ip), invalidIPRetry)
	case a.Unmap().IsUnspecified() || a.Unmap().IsLoopback() || a.Unmap().IsMulticast():
		return cloudapi.NewRetryError(fmt.Sprintf("spec.loadBalancerIP %s cannot be a Service address; set an Elastic IP address reserved in the project, or remove the field and the CCM reserves one", ip), invalidIPRetry)
	}
	return nil
}

// writtenByCCM reports whether spec.loadBalancerIP was last written by the
// CCM, that is whether it is the address of a reservation the CCM made for
// this Service.
func writtenByCCM(svc *v1.Service) bool {
	return fieldmanager.WroteLoadBalancerIP(svc.ManagedFields)
}

// ccmAddress is the address of m's family the CCM last wrote for the
// Service: spec.loadBalancerIP where the CCM wrote it (forFamily has
// emptied it for the other family), else the Service's address of the
// family in AnnotationLoadBalancerIPs where the CCM wrote that (a Service
// with IPv6). "" when the CCM wrote none, or the user wrote the field.
func (m *Manager) ccmAddress(svc *v1.Service) string {
	if ip := svc.Spec.LoadBalancerIP; ip != "" {
		if writtenByCCM(svc) {
			return ip
		}
		return ""
	}
	if !fieldmanager.WroteAnnotation(svc.ManagedFields, AnnotationLoadBalancerIPs) {
		return ""
	}
	fam := m.family
	if fam == "" {
		fam = v1.IPv4Protocol
	}
	for _, ip := range strings.Split(svc.Annotations[AnnotationLoadBalancerIPs], ",") {
		if ip = strings.TrimSpace(ip); familyOf(ip) == fam {
			return ip
		}
	}
	return ""
}

// previous are the addresses the Service has: its status, and
// spec.loadBalancerIP where the CCM wrote it.
func previous(svc *v1.Service) []string {
	var out []string
	for _, in := range svc.Status.LoadBalancer.Ingress {
		if in.IP != "" && !slices.Contains(out, in.IP) {
			out = append(out, in.IP)
		}
	}
	if ip := svc.Spec.LoadBalancerIP; ip != "" && writtenByCCM(svc) && !slices.Contains(out, ip) {
		out = append(out, ip)
	}
	return out
}

var (
	lostTotal = metrics.NewCounter(&metrics.CounterOpts{
		Name:           "equinix_metal_eip_lost_total",
		Help:           "Service Elastic IP reservations found deleted outside the CCM (the Service then got a new Elastic IP).",
		StabilityLevel: metrics.ALPHA,
	})
	invalidIPTotal = metrics.NewCounter(&metrics.CounterOpts{
		Name:           "equinix_metal_eip_invalid_load_balancer_ip_total",
		Help:           "Syncs of a Service whose spec.loadBalancerIP is not an address the CCM can serve.",
		StabilityLevel: metrics.ALPHA,
	})
	registerOnce sync.Once
)

func registerMetrics() {
	registerOnce.Do(func() { legacyregistry.MustRegister(lostTotal, invalidIPTotal) })
}
