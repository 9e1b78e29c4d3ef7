package bgp

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/equinix/equinix-sdk-go/services/metalv1"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"

	"github.com/metal-ccm/cloud-provider-equinix-metal/host/config"
	"github.com/metal-ccm/cloud-provider-equinix-metal/host/fieldmanager"
	"github.com/metal-ccm/cloud-provider-equinix-metal/host/instances"
	"github.com/metal-ccm/cloud-provider-equinix-metal/host/lbsnapshot"
)

// nodeAPI is what the per-node work needs from Equinix Metal.
type nodeAPI interface {
	Device(ctx context.Context, id string) (*metalv1.Device, error)
	EnsureDeviceBGPSession(ctx context.Context, deviceID string) error
	EnsureDeviceBGPSessionIPv6(ctx context.Context, deviceID string) error
	DeviceBGPNeighbors(ctx context.Context, deviceID string) ([]metalv1.BgpNeighborData, error)
}

// Selector decides which nodes get BGP, in one evaluation over all nodes.
type Selector interface {
	SelectNodes(ctx context.Context, nodes []*v1.Node) (map[string]bool, error)
}

// Options configure the controller.
type Options struct {
	Templates lbsnapshot.Templates
	// Refresh is how old a node's neighbour data may get before it is
	// read again (each node at its own time, within twice that).
	Refresh time.Duration
	// OnChange is called when the set of BGP nodes or their peer data
	// changes, so the load-balancer config is regenerated.
	OnChange func()
}

type nodeState struct {
	node lbsnapshot.Node
	// due is when the neighbour data is read again: a time drawn in
	// [Refresh, 2×Refresh) after the read. A sync before it (a node
	// joining queues every selected node) uses what was read; with only
	// "older than Refresh", one node joining at 1,000 re-read the half
	// of them already past Refresh but not yet due, 268 GETs at once.
	due     time.Time
	session bool // the device's BGP session is known to exist
	// session6: its IPv6 session is known to exist (asked for once IPv6
	// is on, EnableIPv6).
	session6 bool
}

// selectionKey is the queue item that re-evaluates selection for all nodes.
const selectionKey = "\x00selection"

// Controller keeps BGP sessions, neighbour data and node annotations for the
// selected nodes.
type Controller struct {
	api      nodeAPI
	kube     kubernetes.Interface
	lister   corelisters.NodeLister
	synced   cache.InformerSynced
	selector Selector
	opts     Options
	recorder record.EventRecorder
	queue    workqueue.TypedRateLimitingInterface[string]
	now      func() time.Time
	jitter   func(time.Duration) time.Duration // the wait until a re-read; tests fix it

	mu       sync.RWMutex
	selected map[string]bool
	state    map[string]*nodeState
	// initial is true once the first selection ran; attempted are the
	// nodes synced at least once since (with success or not). Together
	// they say when Nodes is complete enough to write from (Synced).
	initial   bool
	attempted map[string]bool
	// ipv6 is set once a Service has an IPv6 Elastic IP (EnableIPv6):
	// from then on every BGP node gets an IPv6 session too.
	ipv6 atomic.Bool
}

// EnableIPv6 gives every BGP node an IPv6 session too, from now on: a
// Service has an IPv6 Elastic IP to announce. Until it is called, the
// controller makes the calls it made before IPv6. It is never undone: an
// idle session costs nothing, and taking it down would drop the routes of
// the next IPv6 Service.
func (c *Controller) EnableIPv6() {
	if c.ipv6.Swap(true) {
		return
	}
	klog.InfoS("A Service has an IPv6 Elastic IP: BGP nodes get IPv6 sessions")
	c.mu.RLock()
	names := make([]string, 0, len(c.state))
	for name := range c.state {
		names = append(names, name)
	}
	c.mu.RUnlock()
	for _, name := range names {
		c.queue.Add(name)
	}
}

// NewController watches nodes through the informer.
func NewController(api nodeAPI, kube kubernetes.Interface, informer coreinformers.NodeInformer, selector Selector, recorder record.EventRecorder, opts Options) *Controller {
	if opts.OnChange == nil {
		opts.OnChange = func() {}
	}
	c := &Controller{
		api: api, kube: kube, lister: informer.Lister(), synced: informer.Informer().HasSynced,
		selector: selector, opts: opts, recorder: recorder, now: time.Now,
		jitter: func(d time.Duration) time.Duration { return wait.Jitter(d, 1) },
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "bgp-nodes"}),
		selected:  map[string]bool{},
		state:     map[string]*nodeState{},
		attempted: map[string]bool{},
	}
	_, _ = informer.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) { c.queue.Add(selectionKey) },
		UpdateFunc: func(oldObj, newObj any) {
			o, n := oldObj.(*v1.Node), newObj.(*v1.Node)
			if !reflect.DeepEqual(o.Labels, n.Labels) || o.Spec.ProviderID != n.Spec.ProviderID {
				c.queue.Add(selectionKey)
			}
			if !c.annotationsMatch(n) {
				c.queue.Add(n.Name) // someone edited our annotations: put them back
			}
		},
		DeleteFunc: func(obj any) { c.queue.Add(selectionKey) },
	})
	return c
}

// Reselect re-evaluates BGP selection for all nodes, for a change the node
// informer cannot see: a reloaded selection policy. Nodes that leave the
// selection lose their annotations and peers, nodes that join get a session.
func (c *Controller) Reselect() { c.queue.Add(selectionKey) }

// Run processes nodes until ctx ends.
func (c *Controller) Run(ctx context.Context, workers int) {
	defer utilruntime.HandleCrash()
	defer c.queue.ShutDown()
	if !cache.WaitForCacheSync(ctx.Done(), c.synced) {
		return
	}
	c.queue.Add(selectionKey)
	for i := 0; i < workers; i++ {
		go wait.UntilWithContext(ctx, c.worker, time.Second)
	}
	<-ctx.Done()
}

func (c *Controller) worker(ctx context.Context) {
	for {
		key, quit := c.queue.Get()
		if quit {
			return
		}
		err := c.sync(ctx, key)
		c.queue.Done(key)
		if err != nil {
			klog.ErrorS(err, "BGP sync failed; retrying", "node", key)
			c.queue.AddRateLimited(key)
			continue
		}
		c.queue.Forget(key)
	}
}

func (c *Controller) sync(ctx context.Context, key string) error {
	if key == selectionKey {
		err := c.syncSelection(ctx)
		if err == nil {
			c.mu.Lock()
			c.initial = true
			c.mu.Unlock()
		}
		return err
	}
	err := c.syncNode(ctx, key)
	c.mu.Lock()
	c.attempted[key] = true
	c.mu.Unlock()
	return err
}

// Synced reports whether the first selection ran and every selected node
// was synced once. Until then Nodes misses nodes that have BGP, and
// whoever writes peers from it would take sessions away (a restart, or a
// take-over from another CCM, must not).
func (c *Controller) Synced() bool {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if !c.initial {
		return false
	}
	for name, sel := range c.selected {
		if sel && !c.attempted[name] {
			return false
		}
	}
	return true
}

// syncSelection evaluates selection once for all nodes and queues those
// whose selection changed or whose data is missing.
func (c *Controller) syncSelection(ctx context.Context) error {
	nodes, err := c.lister.List(labels.Everything())
	if err != nil {
		return err
	}
	sel, err := c.selector.SelectNodes(ctx, nodes)
	if err != nil {
		return fmt.Errorf("BGP node selection: %w", err)
	}
	c.mu.Lock()
	prev, first := c.selected, !c.initial
	c.selected = sel
	// Set here, under the lock that publishes the selection, not after
	// return: a worker may take a node queued below before this returns.
	c.initial = true
	var changed bool
	for name := range c.state {
		if !sel[name] {
			delete(c.state, name)
			changed = true
		}
	}
	c.mu.Unlock()
	for _, n := range nodes {
		// The first selection queues every node: nodes taken before it
		// were left alone (see syncNode), including those it leaves out.
		if first || sel[n.Name] != prev[n.Name] || sel[n.Name] {
			c.queue.Add(n.Name)
		}
	}
	if changed {
		c.opts.OnChange()
	}
	return nil
}

func (c *Controller) syncNode(ctx context.Context, name string) error {
	node, err := c.lister.Get(name)
	if errors.IsNotFound(err) {
		c.forget(name)
		return nil
	}
	if err != nil {
		return err
	}
	c.mu.RLock()
	initial, selected := c.initial, c.selected[name]
	st := c.state[name]
	c.mu.RUnlock()

	if !initial {
		// No selection yet is not "selected for nothing": taking the
		// annotations off now would strip, at every start, what this CCM
		// or upstream wrote before (seen in the take-over test). The
		// first selection queues every node again.
		return nil
	}
	if !selected {
		// Not (or no longer) a BGP node: take our annotations off.
		return c.writeAnnotations(ctx, node, map[string]string{})
	}
	if node.Spec.ProviderID == "" {
		return nil // the node controller sets it; that update brings us back
	}
	deviceID, err := instances.DeviceID(node.Spec.ProviderID)
	if err != nil {
		return nil // not an Equinix Metal node; nothing to do
	}

	if st == nil || st.node.DeviceID != deviceID || !c.now().Before(st.due) || c.ipv6.Load() && !st.session6 {
		next, err := c.fetch(ctx, node, deviceID, st)
		if err != nil {
			c.recorder.Eventf(node, v1.EventTypeWarning, "BGPSetupFailed", "BGP setup of the node's device failed: %v", err)
			return err
		}
		// Spread over [Refresh, 2×Refresh): nodes read together at
		// start would otherwise all be read again together, a burst of
		// one GET per node (1,000 at once in the scale bench) every
		// period instead of a steady trickle.
		after := c.jitter(c.opts.Refresh)
		next.due = c.now().Add(after)
		c.mu.Lock()
		changed := st == nil || !reflect.DeepEqual(st.node, next.node)
		if c.selected[name] {
			c.state[name] = next
		}
		c.mu.Unlock()
		if changed {
			c.opts.OnChange()
		}
		st = next
		c.queue.AddAfter(name, after)
		if c.ipv6.Load() && !next.session6 {
			// EnableIPv6 ran during the fetch, after it looked at the
			// state this fetch had not stored yet.
			c.queue.Add(name)
		}
	}
	return c.writeAnnotations(ctx, node, Annotations(c.opts.Templates, st.node))
}

// fetch makes sure the device has a BGP session and reads its neighbours:
// at most three API calls for a new node, one on a refresh.
func (c *Controller) fetch(ctx context.Context, node *v1.Node, deviceID string, prev *nodeState) (*nodeState, error) {
	same := prev != nil && prev.node.DeviceID == deviceID
	if !same || !prev.session {
		if err := c.api.EnsureDeviceBGPSession(ctx, deviceID); err != nil {
			return nil, fmt.Errorf("creating the BGP session of device %s: %w", deviceID, err)
		}
	}
	ipv6 := c.ipv6.Load()
	if ipv6 && (!same || !prev.session6) {
		if err := c.api.EnsureDeviceBGPSessionIPv6(ctx, deviceID); err != nil {
			return nil, fmt.Errorf("creating the IPv6 BGP session of device %s: %w", deviceID, err)
		}
	}
	neighbours, err := c.api.DeviceBGPNeighbors(ctx, deviceID)
	if err != nil {
		return nil, fmt.Errorf("reading the BGP neighbours of device %s: %w", deviceID, err)
	}
	device, err := c.api.Device(ctx, deviceID)
	if err != nil {
		return nil, fmt.Errorf("reading device %s: %w", deviceID, err)
	}
	n := NodeFrom(node, deviceID, device, neighbours)
	return &nodeState{node: n, session: true, session6: ipv6}, nil
}

// NodeFrom combines a node, its device and the device's neighbours: the
// IPv4 ones always, the IPv6 ones (its IPv6 session's) when there are.
func NodeFrom(node *v1.Node, deviceID string, device *metalv1.Device, neighbours []metalv1.BgpNeighborData) lbsnapshot.Node {
	n := lbsnapshot.Node{Name: node.Name, Labels: copyMap(node.Labels), DeviceID: deviceID}
	n.PrivateNetwork, _ = instances.PrivateIPv4Network(device)
	n.SourceIP, _ = instances.PrivateIPv4(device)
	seen4, seen6 := false, false
	for _, nb := range neighbours {
		peers := func() []lbsnapshot.Peer {
			var out []lbsnapshot.Peer
			for _, ip := range nb.PeerIps {
				out = append(out, lbsnapshot.Peer{ASN: uint32(nb.GetPeerAs()), IP: ip, Password: config.Secret(nb.GetMd5Password()), Multihop: nb.GetMultihop()})
			}
			sort.Slice(out, func(i, j int) bool { return out[i].IP < out[j].IP })
			return out
		}
		switch {
		case nb.GetAddressFamily() == 4 && !seen4:
			seen4 = true
			n.LocalASN = uint32(nb.GetCustomerAs())
			if ip := nb.GetCustomerIp(); ip != "" {
				n.SourceIP = ip
			}
			n.Peers = peers()
		case nb.GetAddressFamily() == 6 && !seen6:
			seen6 = true
			n.SourceIPv6 = nb.GetCustomerIp()
			n.PeersV6 = peers()
			if n.LocalASN == 0 {
				n.LocalASN = uint32(nb.GetCustomerAs())
			}
		}
	}
	return n
}

func (c *Controller) annotationsMatch(node *v1.Node) bool {
	c.mu.RLock()
	initial, st, selected := c.initial, c.state[node.Name], c.selected[node.Name]
	c.mu.RUnlock()
	if !initial {
		return true // no selection yet: nothing to say about our annotations
	}
	want := map[string]string{}
	if selected && st != nil {
		want = Annotations(c.opts.Templates, st.node)
	} else if selected {
		return true // not fetched yet
	}
	return len(AnnotationPatch(c.opts.Templates, node.Annotations, want)) == 0
}

// writeAnnotations patches only what differs; a resync with nothing new
// writes nothing.
func (c *Controller) writeAnnotations(ctx context.Context, node *v1.Node, want map[string]string) error {
	patch := AnnotationPatch(c.opts.Templates, node.Annotations, want)
	if len(patch) == 0 {
		return nil
	}
	body, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": patch}})
	if err != nil {
		return err
	}
	if _, err := c.kube.CoreV1().Nodes().Patch(ctx, node.Name, types.MergePatchType, body, metav1PatchOptions); err != nil {
		return fmt.Errorf("annotating node %s: %w", node.Name, err)
	}
	return nil
}

func (c *Controller) forget(name string) {
	c.mu.Lock()
	_, had := c.state[name]
	delete(c.state, name)
	c.mu.Unlock()
	if had {
		c.opts.OnChange()
	}
}

// Nodes returns the selected nodes whose peer data is known, sorted by name.
func (c *Controller) Nodes() []lbsnapshot.Node {
	c.mu.RLock()
	defer c.mu.RUnlock()
	out := make([]lbsnapshot.Node, 0, len(c.state))
	for _, st := range c.state {
		out = append(out, st.node)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

func copyMap(m map[string]string) map[string]string {
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

var metav1PatchOptions = metav1.PatchOptions{FieldManager: fieldmanager.CCM}
