package provider

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/equinix/equinix-sdk-go/services/metalv1"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/metal-ccm/cloud-provider-equinix-metal/host/bgp"
	"github.com/metal-ccm/cloud-provider-equinix-metal/host/config"
	"github.com/metal-ccm/cloud-provider-equinix-metal/host/eip"
	"github.com/metal-ccm/cloud-provider-equinix-metal/host/lbmodule"
	"github.com/metal-ccm/cloud-provider-equinix-metal/host/lbsnapshot"
	"github.com/metal-ccm/cloud-provider-equinix-metal/host/metal"
	"github.com/metal-ccm/cloud-provider-equinix-metal/host/ocimodule"
	"github.com/metal-ccm/cloud-provider-equinix-metal/sdk"
	"github.com/metal-ccm/cloud-provider-equinix-metal/sdk/wasmhost"
)

// setupModule reads the module named by the loadbalancer setting, so a bad
// path, a failed sha256 pin or a file that is not WebAssembly stops the CCM
// at start, and starts compiling it in the background: compiling a built-in
// takes seconds on a cold cache, and instances, node initialisation, Elastic
// IPs and BGP need no module (ModuleLoaded reports a module that fails to
// compile; the binary stops on it). The loop that keeps the cluster at the
// module's output starts once it is loaded. A file module that changes
// later is reloaded by moduleWatch, which keeps the module in use when the
// new file fails to load. For plan (wait), the module is loaded before New
// returns.
func (c *Cloud) setupModule(cfg *config.Config, wait bool) error {
	if choice := config.ModeChoice(cfg.LoadBalancer); choice != "" {
		klog.InfoS("MetalLB mode chosen: "+choice, "loadbalancer", cfg.LB.String())
	}
	lb, err := pullModule(context.Background(), cfg)
	if err != nil {
		return err
	}
	src, err := lbmodule.Read(lb)
	if err != nil {
		return err
	}
	if cfg.ModuleCacheDir != "" {
		// A release image carries the built-ins compiled for its platform.
		if n, err := lbmodule.SeedCache(lbmodule.ImageCacheDir, cfg.ModuleCacheDir); err != nil {
			klog.InfoS("The image's compiled modules are not used; the module compiles", "reason", err)
		} else if n > 0 {
			klog.V(2).InfoS("Module cache seeded from the image", "entries", n, "cache", cfg.ModuleCacheDir)
		}
	}
	c.module = loadModule(src, lbmodule.OptionsFromConfig(cfg))
	if wait {
		if _, err := c.module.wait(context.Background()); err != nil {
			return err
		}
	}
	if watchable(lb) {
		sum := sha256.Sum256(src.Wasm)
		c.moduleWatch = &moduleWatch{lb: lb, opts: lbmodule.OptionsFromConfig(cfg), digest: hex.EncodeToString(sum[:])}
	}
	c.hooks = append(c.hooks, func(ctx context.Context, env *runEnv) {
		// Registered before the factory starts, so it starts with it; the
		// loop's handlers are added once the module is loaded.
		_ = env.informers.Core().V1().Services().Informer()
		go func() {
			if mod, err := c.module.wait(ctx); err == nil {
				c.runModuleLoop(ctx, env, cfg, mod)
			}
		}()
	})
	return nil
}

// pendingModule is a module being compiled in the background.
type pendingModule struct {
	done  chan struct{} // closed when mod or err is set
	mod   *wasmhost.Module
	err   error
	began time.Time
}

// loadSource compiles a module; a test holds it to show what does not wait.
var loadSource = lbmodule.Source.Load

func loadModule(src lbmodule.Source, opts wasmhost.Options) *pendingModule {
	p := &pendingModule{done: make(chan struct{}), began: time.Now()}
	go func() {
		defer close(p.done)
		p.mod, p.err = loadSource(src, context.Background(), opts)
		if p.err == nil {
			klog.InfoS("Load-balancer module loaded", "module", src.Name, "sha256", p.mod.SHA256(), "took", time.Since(p.began).Round(time.Millisecond))
		}
	}()
	return p
}

// wait returns the module once it is loaded, or why it did not load; an
// error also when ctx ends first.
func (p *pendingModule) wait(ctx context.Context) (*wasmhost.Module, error) {
	select {
	case <-p.done:
		return p.mod, p.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// state is the module now: loaded, failed (err), or neither yet (loading).
func (p *pendingModule) state() (mod *wasmhost.Module, err error, loading bool) {
	select {
	case <-p.done:
		return p.mod, p.err, false
	default:
		return nil, nil, true
	}
}

// ModuleLoaded waits for the load-balancer module to be compiled and
// verified, and returns why it failed; nil also without load balancing.
// The binary stops on an error: a module that cannot load is a mistake in
// the configuration, as a bad path is.
func (c *Cloud) ModuleLoaded(ctx context.Context) error {
	if c.module == nil {
		return nil
	}
	_, err := c.module.wait(ctx)
	return err
}

// runModuleLoop starts the loop that keeps the cluster at mod's output.
func (c *Cloud) runModuleLoop(ctx context.Context, env *runEnv, cfg *config.Config, mod *wasmhost.Module) {
	dyn, err := dynamic.NewForConfig(env.restConfig)
	if err != nil {
		klog.ErrorS(err, "Load-balancer module loop not started")
		return
	}
	meta, err := metadata.NewForConfig(env.restConfig)
	if err != nil {
		klog.ErrorS(err, "Load-balancer module loop not started")
		return
	}
	services := env.informers.Core().V1().Services()
	snap := &snapshotter{
		lb: cfg.LB, templates: lbsnapshot.TemplatesFrom(cfg), services: services.Lister().List, eips: c.lb.eips.Load, reservations: c.metal, staged: &c.lb.staged,
		bgpNodes: bgpNodes(&c.bgp), budget: bgp.NewPrefixBudget(cfg.BGPMaxPrefixes, env.recorder),
	}
	// NoAnnouncingNode: checked at each sync against the snapshot's
	// BGP nodes, and for one Service when its EndpointSlices change.
	endpoints := newLocalEndpoints(env.kube)
	announcements := lbmodule.NewAnnouncements(lbmodule.AnnouncementsConfig{
		Service:    func(ns, name string) (*v1.Service, error) { return services.Lister().Services(ns).Get(name) },
		ReadyNodes: endpoints.readyNodes,
		Recorder:   env.recorder,
	})
	rec, err := lbmodule.NewReconciler(lbmodule.ReconcilerConfig{
		Module: mod, Dynamic: dyn, Metadata: meta, Kube: env.kube, Snapshot: snap.request, Recorder: env.recorder,
		Announcements: announcements,
	})
	if err != nil {
		klog.ErrorS(err, "Load-balancer module loop not started")
		return
	}
	endpoints.changed, endpoints.synced = announcements.EndpointsChanged, rec.MarkDirty
	go endpoints.run(ctx)
	c.lb.setDirty(rec.MarkDirty)
	if len(mod.Describe().Emits) > 0 {
		// Only a module that writes objects (MetalLB's pools) has
		// something to put in place before a Service's address (staged.go).
		c.lb.setAwaitSync(rec.AwaitSync)
	}
	c.reconciler.Store(rec)
	if w := c.moduleWatch; w != nil {
		w.set, w.events = rec.SetModule, moduleReloadEvents(env.recorder, w.lb.Path)
		go w.run(ctx)
	}
	// A Service's address appears in its status after EnsureLoadBalancer
	// returns, so status changes must regenerate too; an update that
	// changes nothing the loop reads of the Service (lbsnapshot.ViewChanged)
	// does not. (Added after the factory started, the handler is first
	// told of every Service.)
	_, _ = services.Informer().AddEventHandler(cache.FilteringResourceEventHandler{
		FilterFunc: func(obj any) bool {
			if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = d.Obj
			}
			s, ok := obj.(*v1.Service)
			return ok && s.Spec.Type == v1.ServiceTypeLoadBalancer
		},
		Handler: cache.ResourceEventHandlerFuncs{
			AddFunc: func(any) { rec.MarkDirty() },
			UpdateFunc: func(old, cur any) {
				o, ok1 := old.(*v1.Service)
				c, ok2 := cur.(*v1.Service)
				if !ok1 || !ok2 || lbsnapshot.ViewChanged(o, c) {
					rec.MarkDirty()
				}
			},
			DeleteFunc: func(any) { rec.MarkDirty() },
		},
	})
	go func() {
		if c.waitForInputs(ctx, services.Informer().HasSynced) {
			rec.Run(ctx)
		}
	}()
}

// waitForInputs holds the first sync until the module's input is complete:
// every Service read, and every BGP node synced once. A sync from a partial
// snapshot would prune the pools and peers of the Services and nodes not
// seen yet — after every restart, and when taking over from upstream.
func (c *Cloud) waitForInputs(ctx context.Context, servicesSynced cache.InformerSynced) bool {
	if !cache.WaitForCacheSync(ctx.Done(), servicesSynced) {
		return false
	}
	if c.lb == nil {
		return true // no BGP without load balancing
	}
	logged := false
	err := wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(context.Context) (bool, error) {
		ctl := c.bgp.Load()
		if ctl != nil && ctl.Synced() {
			return true, nil
		}
		if !logged {
			klog.InfoS("Load-balancer module waits for the BGP nodes before its first sync")
			logged = true
		}
		return false, nil
	})
	return err == nil
}

// pullModule turns a wasm+oci:// module into a file module: pulled once by
// digest (credentials from $DOCKER_CONFIG, where the chart mounts a pull
// Secret), verified, cached under the module cache directory, and then
// loaded like a mounted file pinned by its sha256. Anything that does not
// match the digest is never run: the CCM stops at start with the reason.
func pullModule(ctx context.Context, cfg *config.Config) (config.LoadBalancer, error) {
	lb := cfg.LB
	if lb.OCIRef == "" {
		return lb, nil
	}
	dir := filepath.Join(os.TempDir(), "ccm-oci-modules")
	if cfg.ModuleCacheDir != "" {
		dir = filepath.Join(cfg.ModuleCacheDir, "oci")
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	wasm, path, err := (&ocimodule.Fetcher{CacheDir: dir}).Fetch(ctx, lb.OCIRef)
	if err != nil {
		return lb, fmt.Errorf("load-balancer %v", err)
	}
	sum := sha256.Sum256(wasm)
	lb.Path, lb.SHA256 = path, hex.EncodeToString(sum[:])
	klog.InfoS("Pulled the load-balancer module", "ref", lb.OCIRef, "cache", path)
	return lb, nil
}

// snapshotter is the thin adapter around lbsnapshot.Build: it reads the
// Service lister and the BGP controller into an lbsnapshot.Input, and
// watches the prefix budget of the result.
type snapshotter struct {
	lb        config.LoadBalancer
	templates lbsnapshot.Templates
	services  func(labels.Selector) ([]*v1.Service, error)
	bgpNodes  func() []lbsnapshot.Node
	budget    *bgp.PrefixBudget
	// eips decides whether a user's own address is served (nil until the
	// Elastic IP manager runs: until then none is).
	eips func() *eip.Manager
	// reservations says where each Service address is reserved (the same
	// cache), for sdk.Service.Locations; nil locates nothing.
	reservations *metal.Client
	// staged are the addresses about to be written into Services
	// (staged.go); nil stages none.
	staged *stagedAddresses
}

func (s *snapshotter) request(ctx context.Context) (sdk.GenerateRequest, error) {
	svcs, err := s.services(labels.Everything())
	if err != nil {
		return sdk.GenerateRequest{}, err
	}
	in := lbsnapshot.Input{LB: s.lb, Templates: s.templates, Services: svcs, Nodes: s.bgpNodes()}
	if s.eips != nil {
		if m := s.eips(); m != nil {
			in.OwnAddressServed = func(svc *v1.Service, ip string) bool { return m.ServesOwnAddress(ctx, svc, ip) }
		}
	}
	if s.reservations != nil {
		in.Locate = locator(ctx, s.reservations)
	}
	if s.staged != nil {
		in.Staged = s.staged.get
	}
	req := lbsnapshot.Build(in)
	s.checkPrefixes(req)
	return req, nil
}

// reservationLocation is where an Elastic IP reservation is, as a module
// reads it: its metro's code and, for a reservation made in a facility,
// the facility's (the codes a node's topology labels carry).
func reservationLocation(r *metalv1.IPReservation) sdk.AddressLocation {
	m, f := r.GetMetro(), r.GetFacility()
	return sdk.AddressLocation{Metro: m.GetCode(), Facility: f.GetCode()}
}

// bgpNodes reads the BGP nodes from the controller once it runs; before
// (or without BGP) there are none.
func bgpNodes(ctl *atomic.Pointer[bgp.Controller]) func() []lbsnapshot.Node {
	return func() []lbsnapshot.Node {
		if c := ctl.Load(); c != nil {
			return c.Nodes()
		}
		return nil
	}
}

// locator says where the project's reservation holding an address is,
// from the reservation cache (no Equinix call).
func locator(ctx context.Context, reservations *metal.Client) func(ip string) (sdk.AddressLocation, bool) {
	return func(ip string) (sdk.AddressLocation, bool) {
		r, err := reservations.ReservationHolding(ctx, ip)
		if err != nil || r == nil {
			return sdk.AddressLocation{}, false
		}
		return reservationLocation(r), true
	}
}

// checkPrefixes counts the distinct Service addresses each BGP node
// announces (an Elastic IP from the nodes of its metro or facility).
func (s *snapshotter) checkPrefixes(req sdk.GenerateRequest) {
	s.budget.Check(lbsnapshot.AnnouncedPerNode(req))
}

// announcedBy are the addresses that svcs make BGP nodes announce, each
// with its reservation's metro ("" unknown), from the same input as
// checkPrefixes: for the cap on new Elastic IPs (bgpMaxPrefixesAction=
// refuse), the same count as the warning's, per metro.
func announcedBy(reservations *metal.Client) func(svcs []*v1.Service) map[string]string {
	return func(svcs []*v1.Service) map[string]string {
		req := lbsnapshot.Build(lbsnapshot.Input{Services: svcs, Locate: locator(context.Background(), reservations)})
		out := map[string]string{}
		for _, s := range req.Services {
			for _, ip := range s.IPs {
				out[ip] = ""
			}
			for _, l := range s.Locations {
				out[l.IP] = l.Metro
			}
		}
		return out
	}
}
