//go:build cluster && linux

package cluster

import (
	"context"
	"fmt"
	"net"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
)

// The stages of a Service's way from creation to its first answered
// request, in order. Each is seen by polling every 100 ms (the
// reservation's time is the emulator's own record).
var stageNames = []string{
	"picked up by the service controller",
	"Elastic IP reserved (Equinix)",
	"address in the Service's status (CCM)",
	"IPAddressPool written (CCM's module)",
	"allocated by MetalLB's controller",
	"route at router-1",
	"route at router-2",
	"first HTTP answer at the client",
}

var ipAddressPools = schema.GroupVersionResource{Group: "metallb.io", Version: "v1beta1", Resource: "ipaddresspools"}

// serviceStages is one Service's way: when it was created, and when each
// stage was first seen (zero: never).
type serviceStages struct {
	name    string
	created time.Time
	ip      string
	at      []time.Time // by stageNames
}

// stageTable creates n Cluster-policy Services for the web pods at once,
// follows each through the stages, prints per stage the p50, p99 and
// max of the time since creation, and deletes them. Figures printed,
// never asserted; a Service that never answers fails the test.
func stageTable(t *testing.T, c *Cluster, n int) {
	t.Helper()
	ctx := context.Background()
	dyn, err := dynamic.NewForConfig(c.Env.Config)
	if err != nil {
		t.Fatal(err)
	}
	svcs := make([]*serviceStages, n)
	var wg sync.WaitGroup
	for i := range n {
		svcs[i] = &serviceStages{name: fmt.Sprintf("stage-%02d", i), at: make([]time.Time, len(stageNames))}
		wg.Add(1)
		go func() {
			defer wg.Done()
			s := svcs[i]
			s.created = time.Now()
			if _, err := c.Client.CoreV1().Services(metav1.NamespaceDefault).Create(ctx, LoadBalancerService(s.name, "web", corev1.ServiceExternalTrafficPolicyCluster), metav1.CreateOptions{}); err != nil {
				t.Errorf("%s: %v", s.name, err)
			}
		}()
	}
	wg.Wait()
	defer deleteAndSettle(t, c, svcs)

	var mu sync.Mutex // guards svcs' ip and at
	seen := func(s *serviceStages, stage int, at time.Time) {
		if s.at[stage].IsZero() {
			s.at[stage] = at
		}
	}
	answering := map[string]bool{}
	deadline := time.Now().Add(3 * time.Minute)
	for time.Now().Before(deadline) {
		now := time.Now()
		list, err := c.Client.CoreV1().Services(metav1.NamespaceDefault).List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		pools, _ := dyn.Resource(ipAddressPools).Namespace(metallbNamespace).List(ctx, metav1.ListOptions{})
		routes := routedAtRouters(c)
		reserved := map[string]time.Time{}
		for _, r := range c.Emu.Reservations(c.Emu.Projects()[0].ID) {
			reserved[r.Prefix.Addr().String()] = r.CreatedAt
		}
		mu.Lock()
		done := 0
		for _, s := range svcs {
			i := slices.IndexFunc(list.Items, func(x corev1.Service) bool { return x.Name == s.name })
			if i < 0 {
				continue
			}
			svc := list.Items[i]
			if slices.Contains(svc.Finalizers, "service.kubernetes.io/load-balancer-cleanup") {
				seen(s, 0, now)
			}
			if s.ip == "" && len(svc.Status.LoadBalancer.Ingress) > 0 {
				s.ip = svc.Status.LoadBalancer.Ingress[0].IP
				seen(s, 2, now)
			}
			if s.ip == "" {
				continue
			}
			if at, ok := reserved[s.ip]; ok {
				seen(s, 1, at)
			}
			if pools != nil && poolHas(pools.Items, s.ip) {
				seen(s, 3, now)
			}
			for k := range svc.Annotations {
				if strings.HasSuffix(k, "/ip-allocated-from-pool") {
					seen(s, 4, now)
				}
			}
			for r := range routes {
				if routes[r][s.ip] {
					seen(s, 5+r, now)
				}
			}
			if !s.at[7].IsZero() {
				done++
			} else if (routes[0][s.ip] || routes[1][s.ip]) && !answering[s.name] {
				answering[s.name] = true
				go func() {
					url := "http://" + net.JoinHostPort(s.ip, "80") + "/hostname"
					for time.Now().Before(deadline) {
						sent := time.Now()
						if _, err := get(c, "", url); err == nil {
							mu.Lock()
							seen(s, 7, sent)
							mu.Unlock()
							return
						}
						time.Sleep(100 * time.Millisecond)
					}
				}()
			}
		}
		mu.Unlock()
		if done == n {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	mu.Lock()
	defer mu.Unlock()
	var b strings.Builder
	fmt.Fprintf(&b, "%d Services created at once, time since creation per stage:\n", n)
	fmt.Fprintf(&b, "  %-40s %8s %8s %8s %s\n", "stage", "p50", "p99", "max", "seen")
	for stage, name := range stageNames {
		var ds []time.Duration
		for _, s := range svcs {
			if !s.at[stage].IsZero() {
				ds = append(ds, s.at[stage].Sub(s.created))
			}
		}
		if len(ds) == 0 {
			fmt.Fprintf(&b, "  %-40s %8s %8s %8s 0/%d\n", name, "-", "-", "-", n)
			continue
		}
		slices.Sort(ds)
		q := func(f float64) string {
			return fmt.Sprintf("%.2fs", ds[int(f*float64(len(ds)-1))].Seconds())
		}
		fmt.Fprintf(&b, "  %-40s %8s %8s %8s %d/%d\n", name, q(0.5), q(0.99), q(1), len(ds), n)
	}
	t.Log(b.String())
	for _, s := range svcs {
		if s.at[7].IsZero() {
			t.Errorf("%s (%s) never answered at the client; stages seen: %v", s.name, s.ip, s.at)
		}
	}
}

// routedAtRouters is routedAt of each router, in c.Routers' order.
func routedAtRouters(c *Cluster) []map[string]bool {
	out := make([]map[string]bool, len(c.Routers))
	for i, r := range c.Routers {
		out[i] = routedAt(r)
	}
	return out
}

// routedAt is the set of addresses the router's kernel has a BGP route
// for (IPv4 host routes BIRD installed).
func routedAt(r *Router) map[string]bool {
	out, _ := exec.Command("ip", "-n", r.Name, "-4", "route", "show", "proto", "bird").Output()
	got := map[string]bool{}
	for _, line := range strings.Split(string(out), "\n") {
		if f := strings.Fields(line); len(f) > 0 {
			got[strings.TrimSuffix(f[0], "/32")] = true
		}
	}
	return got
}

// poolHas reports whether one of MetalLB's IPAddressPools holds ip.
func poolHas(pools []unstructured.Unstructured, ip string) bool {
	for _, p := range pools {
		addrs, _, _ := unstructured.NestedStringSlice(p.Object, "spec", "addresses")
		for _, a := range addrs {
			if a == ip+"/32" || a == ip+"-"+ip || a == ip {
				return true
			}
		}
	}
	return false
}

// deleteAndSettle deletes the Services and waits until they are gone and
// no router routes their addresses any more, so that what follows is not
// measured while the cluster is still busy with them.
func deleteAndSettle(t *testing.T, c *Cluster, svcs []*serviceStages) {
	t.Helper()
	ctx := context.Background()
	for _, s := range svcs {
		_ = c.Client.CoreV1().Services(metav1.NamespaceDefault).Delete(ctx, s.name, metav1.DeleteOptions{})
	}
	var left []string
	for end := time.Now().Add(3 * time.Minute); time.Now().Before(end); time.Sleep(time.Second) {
		left = left[:0]
		routes := routedAtRouters(c)
		for _, s := range svcs {
			_, err := c.Client.CoreV1().Services(metav1.NamespaceDefault).Get(ctx, s.name, metav1.GetOptions{})
			if err == nil || routes[0][s.ip] || routes[1][s.ip] {
				left = append(left, s.name)
			}
		}
		if len(left) == 0 {
			return
		}
	}
	t.Errorf("3 minutes after they were deleted, %d Services (or their routes) are still there: %v", len(left), left)
}
