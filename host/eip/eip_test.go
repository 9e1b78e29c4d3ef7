package eip

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/equinix/equinix-sdk-go/services/metalv1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/record"
	cloudapi "k8s.io/cloud-provider/api"

	"github.com/metal-ccm/cloud-provider-equinix-metal/host/location"
	"github.com/metal-ccm/cloud-provider-equinix-metal/host/metal"
)

func TestServiceTag(t *testing.T) {
	// base64(sha256("default/nginx")), computed outside Go.
	if got, want := ServiceTag("default", "nginx"), "service=l7RnKS8k48oG3Qv3Pxx8FzEMj3X3E5c8JPOIzyLWWdY="; got != want {
		t.Fatalf("got %s, want %s", got, want)
	}
}

// fakeAPI is an in-memory Equinix: reservations with tags.
type fakeAPI struct {
	mu       sync.Mutex
	res      []metalv1.IPReservation
	requests []location.Location
	next     int
	pending  bool // new reservations start pending
	calls    int
	// noIPv6 refuses IPv6 requests as the API does where it has none.
	noIPv6 bool
	v6     []bool // per request: IPv6
}

// refused is the fake's error of a request the API refuses (a 422).
type refused struct{}

func (refused) Error() string { return "422 Unprocessable Entity: no public IPv6 available in metro" }
func (refused) Refused() bool { return true }

func (f *fakeAPI) ReservationsWithTags(_ context.Context, tags ...string) ([]metalv1.IPReservation, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []metalv1.IPReservation
	for _, r := range f.res {
		if hasAll(r.Tags, tags) {
			out = append(out, r)
		}
	}
	return out, nil
}

func hasAll(have, want []string) bool {
	set := map[string]bool{}
	for _, h := range have {
		set[h] = true
	}
	for _, w := range want {
		if !set[w] {
			return false
		}
	}
	return true
}

func (f *fakeAPI) RequestReservation(_ context.Context, req metal.ReservationRequest) (*metalv1.IPReservation, error) {
	loc, tags, details := req.Location, req.Tags, req.Details
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	if req.IPv6 && f.noIPv6 {
		return nil, refused{}
	}
	f.requests = append(f.requests, loc)
	f.v6 = append(f.v6, req.IPv6)
	f.next++
	state := "created"
	addr, fam := fmt.Sprintf("147.75.0.%d", f.next), int32(4)
	if req.IPv6 {
		addr, fam = fmt.Sprintf("2604:1380:4641:c500::%x", f.next), 6
	}
	if f.pending {
		state, addr = "pending", ""
	}
	r := metalv1.IPReservation{Id: ptr(fmt.Sprintf("r%d", f.next)), Address: ptr(addr), AddressFamily: &fam, State: &state, Tags: tags, Details: &details, CreatedAt: ptr(time.Unix(int64(f.next), 0))}
	f.res = append(f.res, r)
	return &r, nil
}

func (f *fakeAPI) Reservation(_ context.Context, id string) (*metalv1.IPReservation, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	for _, r := range f.res {
		if r.GetId() == id {
			return &r, nil
		}
	}
	return nil, errors.New("404")
}

func (f *fakeAPI) approve() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for i := range f.res {
		if f.res[i].GetState() == "pending" {
			f.res[i].State = ptr("created")
			f.res[i].Address = ptr("147.75.9." + strings.TrimPrefix(f.res[i].GetId(), "r"))
		}
	}
}

func (f *fakeAPI) DeleteIP(_ context.Context, id string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	for i, r := range f.res {
		if r.GetId() == id {
			f.res = append(f.res[:i], f.res[i+1:]...)
			return nil
		}
	}
	return nil
}

func ptr[T any](v T) *T { return &v }

func svc(name string, annotations map[string]string, lbIP string) *v1.Service {
	return &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, Annotations: annotations},
		Spec:       v1.ServiceSpec{Type: v1.ServiceTypeLoadBalancer, LoadBalancerIP: lbIP},
	}
}

func events(r *record.FakeRecorder) []string {
	var out []string
	for {
		select {
		case e := <-r.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

var placer = defaultPlacer{MetroAnnotation: "metal.equinix.com/eip-metro", FacilityAnnotation: "metal.equinix.com/eip-facility"}

func setup(t *testing.T, s *v1.Service, api *fakeAPI) (*Manager, *record.FakeRecorder, *fake.Clientset) {
	t.Helper()
	kube := fake.NewClientset(s)
	rec := record.NewFakeRecorder(100)
	return NewManager(api, kube, placer, rec, "cluster-uid"), rec, kube
}

func TestEnsureReservesAndAssigns(t *testing.T) {
	api := &fakeAPI{}
	s := svc("web", map[string]string{"metal.equinix.com/eip-metro": "da"}, "")
	m, rec, kube := setup(t, s, api)
	ip, err := ensure1(m, context.Background(), s)
	if err != nil {
		t.Fatal(err)
	}
	if ip != "147.75.0.1" || len(api.requests) != 1 || api.requests[0] != (location.Location{Metro: "da"}) {
		t.Fatalf("ip %s, requests %v", ip, api.requests)
	}
	if got := api.res[0].Tags; !hasAll(got, []string{UsageTag, ServiceTag("default", "web"), "cluster=cluster-uid"}) || len(got) != 3 {
		t.Fatalf("tags %v", got)
	}
	updated, _ := kube.CoreV1().Services("default").Get(context.Background(), "web", metav1.GetOptions{})
	if updated.Spec.LoadBalancerIP != ip {
		t.Fatalf("spec.loadBalancerIP = %q", updated.Spec.LoadBalancerIP)
	}
	ev := strings.Join(events(rec), "\n")
	for _, r := range []string{ReasonRequested, ReasonReserved, ReasonAssigned} {
		if !strings.Contains(ev, r) {
			t.Errorf("no %s event in:\n%s", r, ev)
		}
	}

	// Again, as after a restart or a resync: adopts, requests nothing.
	before := api.calls
	s.Spec.LoadBalancerIP = ip
	if again, err := ensure1(m, context.Background(), s); err != nil || again != ip {
		t.Fatalf("second ensure: %s %v", again, err)
	}
	if api.calls != before {
		t.Fatalf("an ensure with nothing to change made %d calls", api.calls-before)
	}
}

func TestEnsureAdoptsAfterCrash(t *testing.T) {
	// A reservation exists (reserved before a crash) but the Service never got it.
	api := &fakeAPI{res: []metalv1.IPReservation{{Id: ptr("old"), Address: ptr("147.75.5.5"), State: ptr("created"), Tags: Tags("cluster-uid", "default", "web")}}}
	s := svc("web", map[string]string{"metal.equinix.com/eip-metro": "da"}, "")
	m, _, _ := setup(t, s, api)
	ip, err := ensure1(m, context.Background(), s)
	if err != nil || ip != "147.75.5.5" || len(api.requests) != 0 {
		t.Fatalf("ip %s err %v requests %v", ip, err, api.requests)
	}
}

func TestOtherClusterIsIgnored(t *testing.T) {
	api := &fakeAPI{res: []metalv1.IPReservation{{Id: ptr("theirs"), Address: ptr("147.75.5.5"), State: ptr("created"), Tags: Tags("other-cluster", "default", "web")}}}
	s := svc("web", map[string]string{"metal.equinix.com/eip-metro": "da"}, "")
	m, _, _ := setup(t, s, api)
	ip, err := ensure1(m, context.Background(), s)
	if err != nil || ip == "147.75.5.5" || len(api.requests) != 1 {
		t.Fatalf("ip %s err %v requests %v", ip, err, api.requests)
	}
	if err := m.Release(context.Background(), s); err != nil {
		t.Fatal(err)
	}
	if len(api.res) != 1 || api.res[0].GetId() != "theirs" {
		t.Fatalf("release touched another cluster's reservation: %v", api.res)
	}
}

func TestBringYourOwnIP(t *testing.T) {
	api := &fakeAPI{res: []metalv1.IPReservation{userReservation("mine", "145.60.80.60", "da")}}
	s := svc("byo", nil, "145.60.80.60")
	m, _, _ := setup(t, s, api)
	ip, err := ensure1(m, context.Background(), s)
	if err != nil || ip != "145.60.80.60" || api.calls != 0 {
		t.Fatalf("ip %s err %v calls %d", ip, err, api.calls)
	}
}

func TestPlacementOrder(t *testing.T) {
	ann := map[string]string{"metal.equinix.com/eip-metro": "sv", "metal.equinix.com/eip-facility": "sv15"}
	cases := []struct {
		name string
		p    defaultPlacer
		ann  map[string]string
		want location.Location
		err  string
	}{
		{name: "global facility first", p: defaultPlacer{Facility: "da11", Metro: "da"}, ann: ann, want: location.Location{Facility: "da11"}},
		{name: "global metro over annotations", p: defaultPlacer{Metro: "da"}, ann: ann, want: location.Location{Metro: "da"}},
		{name: "facility annotation over metro annotation", ann: ann, want: location.Location{Facility: "sv15"}},
		{name: "metro annotation", ann: map[string]string{"metal.equinix.com/eip-metro": "sv"}, want: location.Location{Metro: "sv"}},
		{name: "nothing", err: "annotate the Service with metal.equinix.com/eip-metro"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := tc.p
			p.MetroAnnotation, p.FacilityAnnotation = placer.MetroAnnotation, placer.FacilityAnnotation
			got, err := p.Place(context.Background(), svc("x", tc.ann, ""), v1.IPv4Protocol)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err %v", err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("got %v %v", got, err)
			}
		})
	}
}

func TestNoLocationIsAnEvent(t *testing.T) {
	api := &fakeAPI{}
	s := svc("nowhere", nil, "")
	m, rec, _ := setup(t, s, api)
	if _, err := ensure1(m, context.Background(), s); err == nil {
		t.Fatal("want an error")
	}
	if ev := strings.Join(events(rec), "\n"); !strings.Contains(ev, "Warning "+ReasonFailed) || !strings.Contains(ev, "eip-metro") {
		t.Fatalf("events:\n%s", ev)
	}
	if api.calls != 0 {
		t.Fatal("requested without a location")
	}
}

func TestPendingIsARetryNotAnError(t *testing.T) {
	api := &fakeAPI{pending: true}
	s := svc("slow", map[string]string{"metal.equinix.com/eip-metro": "da"}, "")
	m, rec, _ := setup(t, s, api)
	_, err := ensure1(m, context.Background(), s)
	var retry *cloudapi.RetryError
	if !errors.As(err, &retry) {
		t.Fatalf("want a RetryError, got %T %v", err, err)
	}
	if !strings.Contains(strings.Join(events(rec), "\n"), reasonPending) {
		t.Fatal("no pending event")
	}
	api.approve()
	ip, err := ensure1(m, context.Background(), s)
	if err != nil || ip == "" || len(api.requests) != 1 {
		t.Fatalf("after approval: %s %v, %d requests", ip, err, len(api.requests))
	}
}

func TestDuplicatesPickOldestAndWarn(t *testing.T) {
	tags := Tags("cluster-uid", "default", "web")
	api := &fakeAPI{res: []metalv1.IPReservation{
		{Id: ptr("b"), Address: ptr("147.75.5.6"), State: ptr("created"), Tags: tags, CreatedAt: ptr(time.Unix(200, 0))},
		{Id: ptr("a"), Address: ptr("147.75.5.5"), State: ptr("created"), Tags: tags, CreatedAt: ptr(time.Unix(100, 0))},
	}}
	s := svc("web", nil, "")
	m, rec, _ := setup(t, s, api)
	ip, err := ensure1(m, context.Background(), s)
	if err != nil || ip != "147.75.5.5" {
		t.Fatalf("%s %v", ip, err)
	}
	if !strings.Contains(strings.Join(events(rec), "\n"), reasonDuplicate) {
		t.Fatal("no duplicate warning")
	}
}

func TestRelease(t *testing.T) {
	api := &fakeAPI{}
	s := svc("web", map[string]string{"metal.equinix.com/eip-metro": "da"}, "")
	m, rec, _ := setup(t, s, api)
	if _, err := ensure1(m, context.Background(), s); err != nil {
		t.Fatal(err)
	}
	if err := m.Release(context.Background(), s); err != nil {
		t.Fatal(err)
	}
	if len(api.res) != 0 {
		t.Fatalf("left %v", api.res)
	}
	if !strings.Contains(strings.Join(events(rec), "\n"), reasonReleased) {
		t.Fatal("no released event")
	}
}

// TestServiceGoneWhileReserving: the Service is deleted (and gone) while
// its address is reserved; nothing would ever release that reservation, so
// Ensure releases it itself. make soak found the leak.
func TestServiceGoneWhileReserving(t *testing.T) {
	api := &fakeAPI{}
	s := svc("web", map[string]string{"metal.equinix.com/eip-metro": "da"}, "")
	m, _, kube := setup(t, s, api)
	if err := kube.CoreV1().Services("default").Delete(context.Background(), "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := ensure1(m, context.Background(), s); err == nil || !strings.Contains(err.Error(), "not found") {
		t.Fatalf("err %v, want the Service not found", err)
	}
	if len(api.requests) != 1 || len(api.res) != 0 {
		t.Fatalf("%d requests, %d reservations left; want the one reserved released", len(api.requests), len(api.res))
	}
}

// ensure1 is Ensure for a Service of one family: its one address (the
// addresses joined by commas, should there be more).
func ensure1(m *Manager, ctx context.Context, svc *v1.Service) (string, error) {
	ips, err := m.Ensure(ctx, svc)
	return strings.Join(ips, ","), err
}

// current1 is Current with the addresses joined by commas.
func current1(m *Manager, ctx context.Context, svc *v1.Service) (string, bool, error) {
	ips, ok, err := m.Current(ctx, svc)
	return strings.Join(ips, ","), ok, err
}
