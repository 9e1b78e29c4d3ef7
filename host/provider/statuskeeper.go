package provider

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	servicehelper "k8s.io/cloud-provider/service/helpers"
	"k8s.io/klog/v2"

	"github.com/metal-ccm/cloud-provider-equinix-metal/host/fieldmanager"
	"github.com/metal-ccm/cloud-provider-equinix-metal/host/lbsnapshot"
)

// Event reasons of the status keeper.
const (
	reasonStatusRestored    = "LoadBalancerStatusRestored"
	reasonStatusOverwritten = "LoadBalancerStatusOverwritten"
)

// statusRecheckDelay is how long a changed status may stay wrong before
// the keeper writes it back. MetalLB's controller empties the status of a
// Service whose address is in none of its pools, which is also the case
// for the moment between a new Service's address and the module's pool
// for it; it writes the address itself once the pool is there. A
// change that lasts past the delay is not that.
const statusRecheckDelay = 10 * time.Second

// statusFightWindow is how long after restoring a Service's status the
// keeper leaves it alone if it is changed again: a controller that keeps
// clearing it (MetalLB's, for an address in none of its pools) would
// otherwise fight the CCM write for write. The user is told who.
const statusFightWindow = 5 * time.Minute

// statusKeeper puts back the load-balancer status of a Service this CCM
// serves when another writer changes it. The service controller writes the
// status only after EnsureLoadBalancer and never looks at it again until
// the Service's spec changes: when MetalLB's controller, still installed
// during a switch to kube-vip, empties the status of a Service whose
// address left every pool, the user saw <pending> for a Service that was
// serving, until it next changed.
type statusKeeper struct {
	kube     kubernetes.Interface
	services coreinformers.ServiceInformer
	recorder record.EventRecorder
	// current is what the Service's status must say (eip.Manager.Current
	// through the load balancer); nil while the CCM is still starting.
	current func(context.Context, *v1.Service) ([]string, bool, error)
	queue   workqueue.TypedRateLimitingInterface[string]

	mu       sync.Mutex
	restored map[string]time.Time // Service key → when the keeper last restored it
	now      func() time.Time
}

func newStatusKeeper(kube kubernetes.Interface, services coreinformers.ServiceInformer, recorder record.EventRecorder,
	current func(context.Context, *v1.Service) ([]string, bool, error)) *statusKeeper {
	k := &statusKeeper{kube: kube, services: services, recorder: recorder, current: current,
		queue:    workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](), workqueue.TypedRateLimitingQueueConfig[string]{Name: "lb-status"}),
		restored: map[string]time.Time{}, now: time.Now}
	_, _ = services.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		UpdateFunc: func(old, cur any) {
			o, ok1 := old.(*v1.Service)
			n, ok2 := cur.(*v1.Service)
			if ok1 && ok2 && statusTakenAway(o, n) {
				if key, err := cache.MetaNamespaceKeyFunc(n); err == nil {
					k.queue.AddAfter(key, statusRecheckDelay)
				}
			}
		},
	})
	return k
}

// statusTakenAway: a Service this CCM serves, past its first sync (the
// service controller's finalizer, an address in its status), whose
// load-balancer status just changed. Whether the change was the CCM's own
// the worker finds out by comparing with what the status must say; a
// Service without an address yet is left to the service controller.
func statusTakenAway(old, cur *v1.Service) bool {
	return cur.DeletionTimestamp == nil && lbsnapshot.WantsLoadBalancer(cur) &&
		!lbsnapshot.IsControlPlaneService(cur.Namespace, cur.Name) &&
		servicehelper.HasLBFinalizer(cur) && len(old.Status.LoadBalancer.Ingress) > 0 &&
		!sameIngress(old.Status.LoadBalancer.Ingress, cur.Status.LoadBalancer.Ingress)
}

// sameIngress compares addresses and their ipMode (unset is VIP, what the
// API server defaults it to).
func sameIngress(a, b []v1.LoadBalancerIngress) bool {
	return slices.EqualFunc(a, b, func(x, y v1.LoadBalancerIngress) bool {
		return x.IP == y.IP && x.Hostname == y.Hostname && ipMode(x) == ipMode(y)
	})
}

func ipMode(in v1.LoadBalancerIngress) v1.LoadBalancerIPMode {
	if in.IPMode == nil {
		return v1.LoadBalancerIPModeVIP
	}
	return *in.IPMode
}

func (k *statusKeeper) run(ctx context.Context) {
	defer k.queue.ShutDown()
	go wait.UntilWithContext(ctx, func(ctx context.Context) {
		for k.next(ctx) {
		}
	}, time.Second)
	<-ctx.Done()
}

func (k *statusKeeper) next(ctx context.Context) bool {
	key, quit := k.queue.Get()
	if quit {
		return false
	}
	defer k.queue.Done(key)
	if err := k.keep(ctx, key); err != nil {
		klog.ErrorS(err, "Restoring a Service's load-balancer status; retrying", "service", key)
		k.queue.AddRateLimited(key)
		return true
	}
	k.queue.Forget(key)
	return true
}

// keep restores the Service's status if it is not what the CCM serves.
func (k *statusKeeper) keep(ctx context.Context, key string) error {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil
	}
	svc, err := k.services.Lister().Services(ns).Get(name)
	if err != nil || svc.DeletionTimestamp != nil || !lbsnapshot.WantsLoadBalancer(svc) {
		return nil // gone, or no longer this CCM's: nothing to keep
	}
	ips, ok, err := k.current(ctx, svc)
	if err != nil || !ok || len(ips) == 0 {
		return err // no address to put back (released, pending): the service controller decides
	}
	want := status(ips)
	if sameIngress(svc.Status.LoadBalancer.Ingress, want.Ingress) {
		return nil // the CCM's own write, or already put back
	}
	// Who changed it: the informer's copy has no managedFields (informertrim).
	fresh, err := k.kube.CoreV1().Services(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	if sameIngress(fresh.Status.LoadBalancer.Ingress, want.Ingress) {
		return nil
	}
	by := statusWriters(fresh)
	k.mu.Lock()
	last, fought := k.restored[key]
	fought = fought && k.now().Sub(last) < statusFightWindow
	k.mu.Unlock()
	if fought {
		k.recorder.Eventf(fresh, v1.EventTypeWarning, reasonStatusOverwritten,
			"The load-balancer status was changed again (by %s) after the CCM restored it; left as it is for now. The Service is served at %s: uninstall the other controller, or stop it from handling this Service (for MetalLB, remove its address pools)",
			by, strings.Join(ips, ", "))
		return nil
	}
	patch, err := json.Marshal(map[string]any{"status": map[string]any{"loadBalancer": want}})
	if err != nil {
		return err
	}
	if _, err := k.kube.CoreV1().Services(ns).Patch(ctx, name, types.MergePatchType, patch,
		metav1.PatchOptions{FieldManager: fieldmanager.CCM}, "status"); err != nil {
		return err
	}
	k.mu.Lock()
	k.restored[key] = k.now()
	k.mu.Unlock()
	k.recorder.Eventf(fresh, v1.EventTypeNormal, reasonStatusRestored,
		"Restored the load-balancer status (%s), which %s had changed to %s", strings.Join(ips, ", "), by, describeIngress(fresh.Status.LoadBalancer.Ingress))
	return nil
}

// ownManager is the field manager the API server names the service
// controller's writes after: they set none, so it takes the user agent's
// first part, this program's name.
var ownManager, _, _ = strings.Cut(rest.DefaultKubernetesUserAgent(), "/")

// statusWriters names the field managers of the Service's
// status.loadBalancer other than the CCM and the service controller, or
// "another controller".
func statusWriters(svc *v1.Service) string {
	var out []string
	for _, mf := range svc.ManagedFields {
		if mf.Subresource != "status" || mf.FieldsV1 == nil || mf.Manager == fieldmanager.CCM || mf.Manager == ownManager ||
			!strings.Contains(mf.FieldsV1.GetRawString(), `"f:loadBalancer"`) {
			continue
		}
		if !slices.Contains(out, mf.Manager) {
			out = append(out, mf.Manager)
		}
	}
	if len(out) == 0 {
		return "another controller"
	}
	return strings.Join(out, ", ")
}

func describeIngress(in []v1.LoadBalancerIngress) string {
	if len(in) == 0 {
		return "nothing"
	}
	var ips []string
	for _, i := range in {
		ips = append(ips, fmt.Sprintf("%s%s", i.IP, i.Hostname))
	}
	return strings.Join(ips, ", ")
}
