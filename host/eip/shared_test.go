package eip

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/equinix/equinix-sdk-go/services/metalv1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/record"

	"github.com/metal-ccm/cloud-provider-equinix-metal/host/fieldmanager"
	"github.com/metal-ccm/cloud-provider-equinix-metal/host/lbsnapshot"
)

// keyed is a Service of sharing key k in metro da with one port, created
// after the ones made before it.
func keyed(name string, port int32) *v1.Service {
	s := svc(name, map[string]string{lbsnapshot.SharingAnnotation: "k", "metal.equinix.com/eip-metro": "da"}, "")
	s.UID = types.UID("uid-" + name)
	created = created.Add(time.Second)
	s.CreationTimestamp = metav1.NewTime(created)
	s.Spec.Ports = []v1.ServicePort{{Protocol: v1.ProtocolTCP, Port: port}}
	return s
}

var created = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// ccmWrote marks spec.loadBalancerIP as written by the CCM.
func ccmWrote(s *v1.Service, ip string) *v1.Service {
	s.Spec.LoadBalancerIP = ip
	s.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: fieldmanager.CCM, Operation: metav1.ManagedFieldsOperationUpdate,
		FieldsType: "FieldsV1", FieldsV1: metav1.NewFieldsV1(`{"f:spec":{"f:loadBalancerIP":{}}}`)}}
	s.Status.LoadBalancer.Ingress = []v1.LoadBalancerIngress{{IP: ip}}
	return s
}

func sharedSetup(services ...*v1.Service) (*Manager, *fakeAPI, *record.FakeRecorder, *fake.Clientset) {
	objs := make([]runtime.Object, 0, len(services))
	for _, s := range services {
		objs = append(objs, s)
	}
	kube := fake.NewClientset(objs...)
	rec := record.NewFakeRecorder(100)
	api := &fakeAPI{}
	return NewManager(api, kube, placer, rec, "cluster-uid"), api, rec, kube
}

// TestSharedManager: the second Service of a key adopts the first's
// reservation; a user's spec.loadBalancerIP wins over the key; releasing
// keeps the address while another Service of the key exists (even one
// bringing its own address) and releases it with the last.
func TestSharedManager(t *testing.T) {
	ctx := context.Background()
	a, b := keyed("a", 80), keyed("b", 443)
	byo := keyed("byo", 8080)
	byo.Spec.LoadBalancerIP = "145.40.1.1" // the user's
	m, api, rec, kube := sharedSetup(a, b, byo)
	api.res = []metalv1.IPReservation{userReservation("mine", "145.40.1.1", "da")} // the user reserved it

	ipA, err := ensure1(m, ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	ipB, err := ensure1(m, ctx, b)
	if err != nil || ipB != ipA || len(api.requests) != 1 {
		t.Fatalf("b: %s %v, a has %s; %d requests", ipB, err, ipA, len(api.requests))
	}
	if got := api.res[1].Tags; !hasAll(got, SharedTags("cluster-uid", "k")) || len(got) != 3 {
		t.Fatalf("tags %v", got)
	}
	if ip, err := ensure1(m, ctx, byo); err != nil || ip != "145.40.1.1" || len(api.requests) != 1 {
		t.Fatalf("bring your own with a key: %s %v, %d requests", ip, err, len(api.requests))
	}

	// a goes; b and byo keep the key's reservation.
	a = ccmWrote(a, ipA)
	if err := kube.CoreV1().Services("default").Delete(ctx, "a", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := m.Release(ctx, a); err != nil || len(api.res) != 2 {
		t.Fatalf("release a: %v, %d reservations", err, len(api.res))
	}
	if ev := strings.Join(events(rec), "\n"); !strings.Contains(ev, ReasonShareKept) {
		t.Fatalf("no %s event in:\n%s", ReasonShareKept, ev)
	}
	// b goes: byo still has the key.
	b = ccmWrote(b, ipB)
	_ = kube.CoreV1().Services("default").Delete(ctx, "b", metav1.DeleteOptions{})
	if err := m.Release(ctx, b); err != nil || len(api.res) != 2 {
		t.Fatalf("release b: %v, %d reservations", err, len(api.res))
	}
	// The last one goes; the user's own reservation stays.
	_ = kube.CoreV1().Services("default").Delete(ctx, "byo", metav1.DeleteOptions{})
	if err := m.Release(ctx, byo); err != nil || len(api.res) != 1 || api.res[0].GetId() != "mine" {
		t.Fatalf("release byo: %v, %d reservations", err, len(api.res))
	}
}

// TestSharedRefusals: a port clash and another metro are refused with an
// Event naming the Service that has the address; nothing more is reserved.
func TestSharedRefusals(t *testing.T) {
	ctx := context.Background()
	first := keyed("first", 80)
	clash := keyed("clash", 80)
	west := keyed("west", 443)
	west.Annotations["metal.equinix.com/eip-metro"] = "sv"
	m, api, rec, _ := sharedSetup(first, clash, west)
	ip, err := ensure1(m, ctx, first)
	if err != nil {
		t.Fatal(err)
	}
	api.res[0].Metro = &metalv1.IPReservationMetro{Code: ptr("da")}
	first = ccmWrote(first, ip)
	// The informer's view: first has its address.
	m.SetServices(Services{List: func() ([]*v1.Service, error) { return []*v1.Service{first, clash, west}, nil }})
	events(rec)
	for s, want := range map[*v1.Service]string{
		clash: "Service default/clash cannot share its Elastic IP with default/first (same sharing key): both use port TCP/80",
		west:  `placement puts Service default/west in metro sv, but the Elastic IP 147.75.0.1 of sharing key "k" (used by default/first) is in metro da`,
	} {
		if _, err := ensure1(m, ctx, s); err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("%s: err %v, want %q", s.Name, err, want)
		}
		if ev := strings.Join(events(rec), "\n"); !strings.Contains(ev, ReasonShareRefused) || !strings.Contains(ev, want) {
			t.Fatalf("%s: events %s", s.Name, ev)
		}
	}
	if len(api.requests) != 1 {
		t.Fatalf("%d requests", len(api.requests))
	}
}

// TestSharedLostIsReported: the key's reservation was released outside the
// CCM; the Service gets a new one and an ElasticIPLost Event naming both.
func TestSharedLostIsReported(t *testing.T) {
	s := ccmWrote(keyed("a", 80), "147.75.9.9")
	m, api, rec, _ := sharedSetup(s)
	ip, err := ensure1(m, context.Background(), s)
	if err != nil || ip == "147.75.9.9" || len(api.requests) != 1 {
		t.Fatalf("%s %v", ip, err)
	}
	if ev := strings.Join(events(rec), "\n"); !strings.Contains(ev, ReasonLost) || !strings.Contains(ev, "147.75.9.9") {
		t.Fatalf("events %s", ev)
	}
}

// TestSharedTakeOverKeepsOwnAddress: a Service that upstream gave its own
// Elastic IP (spec.loadBalancerIP written by upstream, a reservation with
// the Service's tags) and that has a sharing key keeps its address after a
// take-over: nothing is reserved, released or moved. Its own reservation
// goes with it.
func TestSharedTakeOverKeepsOwnAddress(t *testing.T) {
	ctx := context.Background()
	s := keyed("legacy", 80)
	s.Spec.LoadBalancerIP = "147.75.7.7"
	m, api, _, _ := sharedSetup(s)
	api.res = []metalv1.IPReservation{{Id: ptr("up"), Address: ptr("147.75.7.7"), State: ptr("created"), Tags: Tags("cluster-uid", "default", "legacy")}}
	if ip, err := ensure1(m, ctx, s); err != nil || ip != "147.75.7.7" || len(api.requests) != 0 || len(api.res) != 1 {
		t.Fatalf("%s %v; %d requests, %d reservations", ip, err, len(api.requests), len(api.res))
	}
	if ip, ok, err := current1(m, ctx, s); err != nil || !ok || ip != "147.75.7.7" {
		t.Fatalf("Current: %s %v %v", ip, ok, err)
	}
	if err := m.Release(ctx, s); err != nil || len(api.res) != 0 {
		t.Fatalf("release: %v, %d reservations left", err, len(api.res))
	}
}
