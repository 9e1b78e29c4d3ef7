package eip

import (
	"slices"
	"testing"

	"github.com/equinix/equinix-sdk-go/services/metalv1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/metal-ccm/cloud-provider-equinix-metal/host/lbsnapshot"
)

func TestFindOrphans(t *testing.T) {
	const cluster = "uid-1"
	res := func(id string, tags ...string) metalv1.IPReservation {
		return metalv1.IPReservation{Id: metalv1.PtrString(id), Address: metalv1.PtrString("198.51.100." + id), Tags: tags}
	}
	svc := func(ns, name string, typ v1.ServiceType) *v1.Service {
		return &v1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: v1.ServiceSpec{Type: typ}}
	}
	all := []metalv1.IPReservation{
		res("1", Tags(cluster, "default", "alive")...),
		res("2", Tags(cluster, "default", "gone")...),
		res("3", Tags("uid-other", "default", "gone")...),            // another cluster's
		res("4", "control-plane-eip"),                                // the control-plane EIP
		res("5", UsageTag, ClusterTag(cluster)),                      // ours, but for no Service: left alone
		res("6", Tags(cluster, "default", "now-clusterip")...),       // its Service is no longer a load balancer
		res("7", ServiceTag("default", "gone"), ClusterTag(cluster)), // no usage tag: not made by a CCM
	}
	all = append(all,
		res("8", SharedTags(cluster, "dns")...),  // a sharing key with a live Service
		res("9", SharedTags(cluster, "gone")...), // a sharing key nobody carries any more
	)
	// A Service's IPv6 Elastic IP carries the same tags as its IPv4 one.
	v6 := func(id string, tags ...string) metalv1.IPReservation {
		r := res(id, tags...)
		r.Address, r.AddressFamily = metalv1.PtrString("2604:1380:4641:c500::"+id), metalv1.PtrInt32(6)
		return r
	}
	all = append(all, v6("10", Tags(cluster, "default", "alive")...), v6("11", Tags(cluster, "default", "gone")...))
	keyed := svc("other", "dns-udp", v1.ServiceTypeLoadBalancer)
	keyed.Annotations = map[string]string{lbsnapshot.SharingAnnotation: "dns"}
	services := []*v1.Service{
		svc("default", "alive", v1.ServiceTypeLoadBalancer),
		svc("default", "now-clusterip", v1.ServiceTypeClusterIP),
		keyed,
	}
	got := FindOrphans(all, cluster, services)
	var ids []string
	for _, o := range got {
		ids = append(ids, o.ID)
	}
	if !slices.Equal(ids, []string{"2", "6", "9", "11"}) {
		t.Errorf("orphans %v, want [2 6 9 11] (11: a gone Service's IPv6 Elastic IP)", ids)
	}
	if got[0].Owner != ServiceTag("default", "gone") || got[0].Address != "198.51.100.2" {
		t.Errorf("orphan %+v lacks its owner tag or address", got[0])
	}
	if o := FindOrphans(all, "", nil); len(o) != 0 {
		t.Errorf("an empty cluster UID found orphans %v", o)
	}
}
