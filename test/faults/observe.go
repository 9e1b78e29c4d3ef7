//go:build linux

package faults

import (
	"context"
	"fmt"
	"sync"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/metal-ccm/cloud-provider-equinix-metal/host/eip"
	"github.com/metal-ccm/cloud-provider-equinix-metal/sdk"
	"github.com/metal-ccm/cloud-provider-equinix-metal/test/emulator"
	"github.com/metal-ccm/cloud-provider-equinix-metal/test/testenv"
)

var (
	poolGVR = schema.GroupVersionResource{Group: "metallb.io", Version: "v1beta1", Resource: "ipaddresspools"}
	advGVR  = schema.GroupVersionResource{Group: "metallb.io", Version: "v1beta1", Resource: "bgpadvertisements"}
)

// observer reads the World: the Services from the kube-apiserver, the
// reservations from the emulator, the MetalLB objects the CCM wrote.
type observer struct {
	kube      kubernetes.Interface
	dyn       dynamic.Interface
	emu       *emulator.Emulator
	clusterID string

	mu    sync.Mutex
	names map[string]string // service tag → namespace/name, of every Service the run created
	// maxPerService is the most reservations ever seen at once for one
	// Service (sampled), so a duplicate that is later cleaned up still
	// counts.
	maxPerService int
}

func (o *observer) created(ns, name string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.names[eip.ServiceTag(ns, name)] = ns + "/" + name
}

// reservations are the cluster's Service reservations, named by Service.
func (o *observer) reservations() []Reservation {
	o.mu.Lock()
	defer o.mu.Unlock()
	var out []Reservation
	count := map[string]int{}
	for _, r := range o.emu.Reservations(emulator.DefaultProjectID, eip.UsageTag, eip.ClusterTag(o.clusterID)) {
		svc := "(unknown Service)"
		for _, t := range r.Tags {
			if n, ok := o.names[t]; ok {
				svc = n
			}
		}
		count[svc]++
		o.maxPerService = max(o.maxPerService, count[svc])
		out = append(out, Reservation{ID: r.ID, Address: r.Prefix.Addr().String(), Service: svc})
	}
	return out
}

// world reads everything the invariants need.
func (o *observer) world(ctx context.Context) (World, error) {
	w := World{Services: map[string]Service{}, Pools: map[string][]string{}}
	svcs, err := o.kube.CoreV1().Services(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	if err != nil {
		return w, err
	}
	for _, s := range svcs.Items {
		if s.Spec.Type != v1.ServiceTypeLoadBalancer {
			continue
		}
		view := Service{Terminating: s.DeletionTimestamp != nil}
		for _, in := range s.Status.LoadBalancer.Ingress {
			view.Ingress = append(view.Ingress, in.IP)
		}
		w.Services[s.Namespace+"/"+s.Name] = view
	}
	w.Reservations = o.reservations()
	pools, err := o.dyn.Resource(poolGVR).Namespace(testenv.MetalLBNamespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return w, fmt.Errorf("listing IPAddressPools: %w", err)
	}
	for _, p := range pools.Items {
		addrs, _, _ := unstructured.NestedStringSlice(p.Object, "spec", "addresses")
		w.Pools[p.GetName()] = addrs
	}
	advs, err := o.dyn.Resource(advGVR).Namespace(testenv.MetalLBNamespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return w, fmt.Errorf("listing BGPAdvertisements: %w", err)
	}
	for _, a := range advs.Items {
		if a.GetLabels()[sdk.OwnedLabel] == "" {
			continue // not the CCM's
		}
		names, _, _ := unstructured.NestedStringSlice(a.Object, "spec", "ipAddressPools")
		w.Advertised = append(w.Advertised, names...)
	}
	return w, nil
}

// duplicatesSeen is the most reservations seen at once for one Service.
func (o *observer) duplicatesSeen() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.maxPerService
}
