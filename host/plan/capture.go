package plan

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"

	"github.com/equinix/equinix-sdk-go/services/metalv1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"

	"github.com/metal-ccm/cloud-provider-equinix-metal/host/config"
	"github.com/metal-ccm/cloud-provider-equinix-metal/host/metal"
)

// The capturing layers: the CCM's own code runs over them, and each write
// it makes is recorded here instead of sent. Reads go to the real (and
// read-only: see metal.Options.ReadOnly and ReadOnlyKube) clients, so a write
// that slipped past a capture is refused, and the plan fails, rather than
// performed.

// metalCapture is the Equinix Metal API for the CCM's code during a plan: the
// read-only client for reads, with the writes the Elastic IP and BGP code
// make captured. Methods not overridden here are the client's own, and
// the client refuses writes.
type metalCapture struct {
	*metal.Client

	mu      sync.Mutex
	writes  metalWrites
	planned map[string]*metalv1.IPReservation
}

// newMetal wraps a read-only client.
func newMetal(c *metal.Client) *metalCapture {
	return &metalCapture{Client: c, planned: map[string]*metalv1.IPReservation{}}
}

// plannedPrefix marks the IDs of reservations that exist only in the plan.
const plannedPrefix = "planned-"

// RequestReservation records the request and answers with a pending
// reservation that exists only in the plan, so the Elastic IP code stops
// there as it would while Equinix approves one.
func (m *metalCapture) RequestReservation(ctx context.Context, r metal.ReservationRequest) (*metalv1.IPReservation, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	// The code asks RequestReservation to be idempotent by tags and
	// family; so is this.
	for id, p := range m.planned {
		if sameTags(p.Tags, r.Tags) && p.GetAddressFamily() == r.Family() {
			cp := *m.planned[id]
			return &cp, nil
		}
	}
	m.writes.Requests = append(m.writes.Requests, r)
	id := fmt.Sprintf("%s%d", plannedPrefix, len(m.planned)+1)
	res := &metalv1.IPReservation{Id: metalv1.PtrString(id), State: metalv1.PtrString("pending"), Tags: r.Tags, AddressFamily: metalv1.PtrInt32(r.Family())}
	m.planned[id] = res
	cp := *res
	return &cp, nil
}

// Reservation answers a planned reservation from the plan, any other from
// the API.
func (m *metalCapture) Reservation(ctx context.Context, id string) (*metalv1.IPReservation, error) {
	m.mu.Lock()
	p, ok := m.planned[id]
	m.mu.Unlock()
	if ok {
		cp := *p
		return &cp, nil
	}
	return m.Client.Reservation(ctx, id)
}

// DeleteIP records the release.
func (m *metalCapture) DeleteIP(_ context.Context, id string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.writes.Deletes = append(m.writes.Deletes, id)
	return nil
}

// EnsureDeviceBGPSession records the session if the device has none.
func (m *metalCapture) EnsureDeviceBGPSession(ctx context.Context, deviceID string) error {
	return m.captureSession(ctx, deviceID, metalv1.BGPSESSIONADDRESSFAMILY_IPV4, &m.writes.Sessions)
}

// EnsureDeviceBGPSessionIPv6 records the IPv6 session if the device has
// none.
func (m *metalCapture) EnsureDeviceBGPSessionIPv6(ctx context.Context, deviceID string) error {
	return m.captureSession(ctx, deviceID, metalv1.BGPSESSIONADDRESSFAMILY_IPV6, &m.writes.Sessions6)
}

// captureSession adds deviceID to *into (under mu) unless the device has a
// session of family fam.
func (m *metalCapture) captureSession(ctx context.Context, deviceID string, fam metalv1.BgpSessionAddressFamily, into *[]string) error {
	sessions, err := m.Client.DeviceBGPSessions(ctx, deviceID)
	if err != nil {
		return err
	}
	for _, s := range sessions {
		if s.AddressFamily == fam {
			return nil
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	*into = append(*into, deviceID)
	return nil
}

// EnableProjectBGP records the request.
func (m *metalCapture) EnableProjectBGP(_ context.Context, asn int64, _ config.Secret) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.writes.ProjectASN = &asn
	return nil
}

// metalWrites are the Equinix Metal writes Metal captured.
type metalWrites struct {
	// Requests are the reservations requested (RequestReservation).
	Requests []metal.ReservationRequest
	// Deletes are the IDs of the reservations released (DeleteIP).
	Deletes []string
	// Sessions are the devices that get their IPv4 BGP session
	// (EnsureDeviceBGPSession).
	Sessions []string
	// Sessions6 are the devices that get their IPv6 BGP session
	// (EnsureDeviceBGPSessionIPv6).
	Sessions6 []string
	// ProjectASN is the ASN BGP is enabled with on the project
	// (EnableProjectBGP); nil if it is not.
	ProjectASN *int64
}

// Take returns and forgets what was captured since the last Take.
func (m *metalCapture) Take() metalWrites {
	m.mu.Lock()
	defer m.mu.Unlock()
	w := m.writes
	m.writes = metalWrites{}
	return w
}

func sameTags(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for _, t := range a {
		found := false
		for _, u := range b {
			found = found || t == u
		}
		if !found {
			return false
		}
	}
	return true
}

// kubeWrite is one write to the API server the CCM's code made.
type kubeWrite struct {
	Method string
	Path   string
	Body   string
}

// kubeCapture captures the API server writes of the code given its rest.Config:
// a write is recorded and answered with the object as it is (a GET of the
// same path), which is what the code reads back from a write that changed
// nothing.
type kubeCapture struct {
	mu     sync.Mutex
	writes []kubeWrite
}

// Config returns a copy of cfg whose writes are captured by k.
func (k *kubeCapture) Config(cfg *rest.Config) *rest.Config {
	out := rest.CopyConfig(cfg)
	prev := out.WrapTransport
	out.WrapTransport = func(rt http.RoundTripper) http.RoundTripper {
		if prev != nil {
			rt = prev(rt)
		}
		return &captureTransport{k: k, next: rt}
	}
	return out
}

// Take returns and forgets the writes captured since the last Take.
func (k *kubeCapture) Take() []kubeWrite {
	k.mu.Lock()
	defer k.mu.Unlock()
	w := k.writes
	k.writes = nil
	return w
}

type captureTransport struct {
	k    *kubeCapture
	next http.RoundTripper
}

func (t *captureTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if isRead(req.Method) {
		return t.next.RoundTrip(req)
	}
	var body []byte
	if req.Body != nil {
		body, _ = io.ReadAll(req.Body)
		_ = req.Body.Close()
	}
	t.k.mu.Lock()
	t.k.writes = append(t.k.writes, kubeWrite{Method: req.Method, Path: req.URL.Path, Body: string(body)})
	t.k.mu.Unlock()
	get, err := http.NewRequestWithContext(req.Context(), http.MethodGet, req.URL.String(), nil)
	if err != nil {
		return nil, err
	}
	get.Header = req.Header.Clone()
	get.Header.Del("Content-Type")
	get.URL.RawQuery = ""
	return t.next.RoundTrip(get)
}

// ReadOnlyKube returns a copy of cfg that refuses, unsent, every request
// but GET and HEAD (lists and watches are GETs), with userAgent.
func ReadOnlyKube(cfg *rest.Config, userAgent string) *rest.Config {
	out := rest.CopyConfig(cfg)
	out.UserAgent = userAgent
	prev := out.WrapTransport
	out.WrapTransport = func(rt http.RoundTripper) http.RoundTripper {
		if prev != nil {
			rt = prev(rt)
		}
		return readOnlyTransport{rt}
	}
	return out
}

type readOnlyTransport struct{ next http.RoundTripper }

func (t readOnlyTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if !isRead(req.Method) {
		if req.Body != nil {
			_ = req.Body.Close()
		}
		return nil, fmt.Errorf("refused: the plan's Kubernetes client is read-only (%s %s)", req.Method, req.URL.Path)
	}
	return t.next.RoundTrip(req)
}

func isRead(method string) bool { return method == http.MethodGet || method == http.MethodHead }

// Recorder captures the Events the CCM's code records, as the reasons of
// its decisions.
type Recorder struct {
	mu     sync.Mutex
	events map[string][]string
}

// Event implements record.EventRecorder.
func (r *Recorder) Event(obj runtime.Object, eventtype, reason, message string) {
	key := objectName(obj)
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.events == nil {
		r.events = map[string][]string{}
	}
	r.events[key] = append(r.events[key], reason+": "+message)
}

// Eventf implements record.EventRecorder.
func (r *Recorder) Eventf(obj runtime.Object, eventtype, reason, format string, args ...any) {
	r.Event(obj, eventtype, reason, fmt.Sprintf(format, args...))
}

// AnnotatedEventf implements record.EventRecorder.
func (r *Recorder) AnnotatedEventf(obj runtime.Object, _ map[string]string, eventtype, reason, format string, args ...any) {
	r.Eventf(obj, eventtype, reason, format, args...)
}

// Take returns and forgets the Events of one object ("namespace/name").
func (r *Recorder) Take(name string) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	e := r.events[name]
	delete(r.events, name)
	return e
}

func objectName(obj runtime.Object) string {
	if a, err := meta.Accessor(obj); err == nil {
		return a.GetNamespace() + "/" + a.GetName()
	}
	return ""
}

// reasons joins captured Events into one reason.
func reasons(events []string) string { return strings.Join(events, "; ") }
