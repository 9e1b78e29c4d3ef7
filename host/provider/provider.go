// Package provider is the cloudprovider.Interface of the Equinix Metal CCM:
// the thin seam between k8s.io/cloud-provider's controllers and the
// packages that do the work (instances, Elastic IPs, BGP, the load-balancer
// module, the control-plane EIP).
//
// Like every package under host/, it belongs to this repository alone:
// its API carries no compatibility promise to code outside it.
package provider

import (
	"context"
	"fmt"
	"io"
	"sync/atomic"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	cloudprovider "k8s.io/cloud-provider"
	"k8s.io/klog/v2"

	"github.com/metal-ccm/cloud-provider-equinix-metal/host/bgp"
	"github.com/metal-ccm/cloud-provider-equinix-metal/host/clusterevent"
	"github.com/metal-ccm/cloud-provider-equinix-metal/host/config"
	"github.com/metal-ccm/cloud-provider-equinix-metal/host/eip"
	"github.com/metal-ccm/cloud-provider-equinix-metal/host/fieldmanager"
	"github.com/metal-ccm/cloud-provider-equinix-metal/host/informertrim"
	"github.com/metal-ccm/cloud-provider-equinix-metal/host/instances"
	"github.com/metal-ccm/cloud-provider-equinix-metal/host/lbmodule"
	"github.com/metal-ccm/cloud-provider-equinix-metal/host/lbretry"
	"github.com/metal-ccm/cloud-provider-equinix-metal/host/lbsnapshot"
	"github.com/metal-ccm/cloud-provider-equinix-metal/host/metal"
	"github.com/metal-ccm/cloud-provider-equinix-metal/host/policy"
)

// ProviderName is the --cloud-provider value and the provider ID scheme
// (equinixmetal://<device-uuid>), the same as upstream's.
const ProviderName = instances.ProviderName

// DefaultConcurrentServiceSyncs replaces the service controller's default
// of one worker, which serialises a burst of new Services behind each
// other's Equinix round trips. The client-side rate limiter, not the worker
// count, protects the API.
const DefaultConcurrentServiceSyncs = 50

// DefaultKubeAPIQPS and DefaultKubeAPIBurst are the binary's defaults of
// --kube-api-qps and --kube-api-burst (the framework's are 20 and 30).
// Each Service costs the framework's service controller two writes of its
// own (the finalizer and the status, both patches of services/status), on
// one client whose token bucket all Services share: at 20 per second, 100
// Services created at once waited 10 s for their addresses behind the
// bucket, not behind Equinix or the API server. Every clientset built from
// the config has a bucket of its own, so this is also the limit of the
// CCM's own writes (Services, nodes, the module's objects) and of the
// Events, each on its own.
const (
	DefaultKubeAPIQPS   = 100
	DefaultKubeAPIBurst = 200
)

// userAgent identifies the CCM to the Equinix Metal API.
const userAgent = "cloud-provider-equinix-metal (metal-ccm)"

// PlanUserAgent identifies the plan and cleanup commands, to both APIs.
const PlanUserAgent = "cloud-provider-equinix-metal-plan (metal-ccm)"

func init() {
	// Registration lets k8s.io/cloud-provider's own helpers (InitCloudProvider,
	// app/testing) build the provider from a cloud-config file plus the
	// environment. The binary builds it with flags as well, through New.
	cloudprovider.RegisterCloudProvider(ProviderName, func(r io.Reader) (cloudprovider.Interface, error) {
		var b []byte
		if r != nil {
			var err error
			if b, err = io.ReadAll(r); err != nil {
				return nil, fmt.Errorf("reading the cloud-config: %w", err)
			}
		}
		cfg, err := config.Load(config.Sources{CloudConfig: b})
		if err != nil {
			return nil, err
		}
		return New(cfg)
	})
}

// Cloud is the Equinix Metal provider: it implements cloudprovider.Interface
// (and cloudprovider.InformerUser) for k8s.io/cloud-provider's controllers,
// and adds what the binary needs beyond that interface: ModuleLoaded and
// Readiness for the readiness endpoint, WatchCredentials for a rotated
// cloud-config, and Plan for the plan subcommand. New and NewForPlan build
// it; its zero value is not usable.
type Cloud struct {
	cfg       *config.Config
	metal     *metal.Client
	instances *instances.Instances
	policies  *policy.Engine
	// policyEvents records failed policy reloads (set in start, before the
	// watch that calls policiesReloaded).
	policyEvents *clusterevent.Reporter
	lb           *loadBalancer
	// module is the load-balancer module, loaded in the background (nil
	// without load balancing).
	module *pendingModule
	bgp    atomic.Pointer[bgp.Controller]
	// reconciler and env are set once the loops run (on the leader), for
	// Readiness.
	reconciler atomic.Pointer[lbmodule.Reconciler]
	// moduleWatch reloads a file module that changes (nil for others).
	moduleWatch *moduleWatch
	env         atomic.Pointer[runEnv]
	// hooks run from start, after leader election, for the parts wired
	// in by other files (the module loop, the control-plane EIP).
	hooks []func(ctx context.Context, env *runEnv)
	// pending is Initialize's arguments until SetInformers starts the loops.
	pending *pendingStart
}

// runEnv is what the parts started in start share.
type runEnv struct {
	restConfig *rest.Config
	kube       kubernetes.Interface
	informers  informers.SharedInformerFactory
	recorder   record.EventRecorder
}

var _ cloudprovider.Interface = (*Cloud)(nil)

// New builds the provider from a validated configuration. Everything that
// can be checked without the cluster is checked here (the policies compile,
// the module loads), so a mistake stops the CCM at start with one message.
func New(cfg *config.Config) (*Cloud, error) { return newCloud(cfg, false) }

// NewForPlan is New with a read-only Equinix Metal client, for Plan: the
// provider is built exactly as for running (policies, module), and is
// never started.
func NewForPlan(cfg *config.Config) (*Cloud, error) { return newCloud(cfg, true) }

func newCloud(cfg *config.Config, readOnly bool) (*Cloud, error) {
	if cfg == nil {
		return nil, fmt.Errorf("provider: no configuration")
	}
	opts := metal.OptionsFromConfig(cfg, userAgent)
	if readOnly {
		opts.ReadOnly, opts.UserAgent = true, PlanUserAgent
	}
	mc, err := metal.New(opts)
	if err != nil {
		return nil, err
	}
	c := &Cloud{cfg: cfg, metal: mc, instances: instances.New(mc, metal.IsNotFound, instances.Options{ExternalIPv6: cfg.NodeExternalIPv6})}
	if cfg.LB.Kind != config.LBNone {
		engine, err := policy.Load(context.Background(), cfg.PolicyDir, policy.Options{OnReload: c.policiesReloaded})
		if err != nil {
			return nil, err
		}
		c.policies = engine
		c.lb = &loadBalancer{retry: lbretry.New()}
		mc.OnAnswersAgain(func() {
			if n := c.lb.retry.Retry(); n > 0 {
				klog.InfoS("The Equinix Metal API answers again: syncing now the Services whose sync failed meanwhile", "services", n)
			}
		})
		if err := c.setupModule(cfg, readOnly); err != nil {
			return nil, err
		}
	}
	if err := c.setupControlPlane(cfg); err != nil {
		return nil, err
	}
	return c, nil
}

// Initialize records what the provider's loops need; k8s.io/cloud-provider
// calls it once, after leader election, so only the leader acts. The loops
// start in SetInformers, which the framework calls right after, so that they
// share the framework's Service and Node informers instead of caching every
// Service and Node a second time (about 20 MB at 10,000 Services).
func (c *Cloud) Initialize(clientBuilder cloudprovider.ControllerClientBuilder, stop <-chan struct{}) {
	c.initialize(wait.ContextForChannel(stop), clientBuilder.ConfigOrDie(fieldmanager.CCM))
}

func (c *Cloud) initialize(ctx context.Context, restConfig *rest.Config) {
	c.pending = &pendingStart{ctx: ctx, restConfig: restConfig}
}

// pendingStart is Initialize's arguments, kept until SetInformers.
type pendingStart struct {
	ctx        context.Context
	restConfig *rest.Config
}

// SetInformers trims the objects of the Service and Node informers that
// k8s.io/cloud-provider's controllers share (see informertrim), and starts
// the provider's loops on the same factory. The framework calls it after
// Initialize and before it starts the factory; an informer already started
// keeps its objects whole. The factory's handlers resync every 12–24 h
// (the framework's period): the loops' own timers (module resync, BGP
// refresh, reservation refresh) do the periodic work.
func (c *Cloud) SetInformers(f informers.SharedInformerFactory) {
	for _, inf := range []cache.SharedIndexInformer{f.Core().V1().Services().Informer(), f.Core().V1().Nodes().Informer()} {
		if err := inf.SetTransform(informertrim.Transform); err != nil {
			klog.InfoS("Informer objects kept whole", "reason", err)
		}
	}
	if p := c.pending; p != nil {
		c.pending = nil
		c.start(p.ctx, p.restConfig, f)
	}
}

var _ cloudprovider.InformerUser = (*Cloud)(nil)

// ServiceInformer is the Service informer to give k8s.io/cloud-provider's
// service controller: inf, whose handlers the provider keeps so that the
// Services whose sync failed while the Equinix Metal API did not answer
// are synced again as soon as it answers, not after the controller's
// backoff of up to 5 minutes (host/lbretry). Without load balancing, inf.
func (c *Cloud) ServiceInformer(inf coreinformers.ServiceInformer) coreinformers.ServiceInformer {
	if c.lb == nil {
		return inf
	}
	return c.lb.retry.Wrap(inf)
}

// start runs the provider's loops with a client config, on the framework's
// informer factory f. It does not start f: the framework starts its factory
// once its controllers have added their handlers (started here, the Service
// informer would run before the service controller asks for its 30 s
// resync, which a running informer cannot give).
func (c *Cloud) start(ctx context.Context, restConfig *rest.Config, f informers.SharedInformerFactory) {
	kube := kubernetes.NewForConfigOrDie(restConfig)
	broadcaster := record.NewBroadcaster(record.WithContext(ctx))
	broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: kube.CoreV1().Events("")})
	env := &runEnv{
		restConfig: restConfig,
		kube:       kube,
		informers:  f,
		recorder:   broadcaster.NewRecorder(scheme.Scheme, v1.EventSource{Component: fieldmanager.CCM}),
	}
	go c.metal.Run(ctx)
	// Hooks first: they register informers before the factory starts.
	for _, hook := range c.hooks {
		hook(ctx, env)
	}
	if c.lb != nil {
		c.startLoadBalancing(ctx, env)
	}
	// The watch starts last: a reload calls policiesReloaded, which uses
	// what the lines above set up.
	if c.policies != nil {
		c.policyEvents = policyReloadEvents(env.recorder, c.cfg.PolicyDir)
		go func() {
			if err := c.policies.Watch(ctx); err != nil && ctx.Err() == nil {
				klog.ErrorS(err, "Watching the policy directory failed; policies will not reload")
			}
		}()
	}
	c.env.Store(env)
}

// startLoadBalancing wires Elastic IPs and BGP. The parts that need the API
// (the cluster ID, project BGP) retry in the background: the API being down
// at start must not crash-loop the CCM.
func (c *Cloud) startLoadBalancing(ctx context.Context, env *runEnv) {
	nodes := env.informers.Core().V1().Nodes()
	var selector bgp.Selector = policySelector{engine: c.policies, reqs: policy.SelectorRequirements(c.cfg.NodeSelector)}
	controller := bgp.NewController(c.metal, env.kube, nodes, selector, env.recorder, bgp.Options{
		Templates: lbsnapshot.TemplatesFrom(c.cfg),
		Refresh:   c.cfg.CacheRefreshPeriod,
		OnChange:  func() { c.lb.dirty() },
	})
	c.bgp.Store(controller)
	c.lb.setIPv6(controller.EnableIPv6)
	placer := policyPlacer{engine: c.policies, cfg: c.cfg, nodes: nodes.Lister(),
		failures: &clusterevent.Reporter{Recorder: env.recorder, Reason: eip.ReasonFailed}}
	// Registered here, before the factory starts: sharing keys need to know
	// the other Services of a key.
	services := env.informers.Core().V1().Services()
	_ = services.Informer()
	keeper := newStatusKeeper(env.kube, services, env.recorder, func(ctx context.Context, svc *v1.Service) ([]string, bool, error) {
		m, err := c.lb.manager()
		if err != nil {
			return nil, false, err
		}
		return m.Current(ctx, svc)
	})
	go keeper.run(ctx)

	go func() {
		clusterID := retry(ctx, "reading the kube-system namespace UID (the cluster tag of Elastic IPs)", func() (string, error) {
			ns, err := env.kube.CoreV1().Namespaces().Get(ctx, metav1.NamespaceSystem, metav1.GetOptions{})
			if err != nil {
				return "", err
			}
			return string(ns.UID), nil
		})
		c.watchOrphans(env, services, clusterID)
		if ctx.Err() != nil {
			return
		}
		eips := eip.NewManager(c.metal, env.kube, placer, env.recorder, clusterID)
		eips.SetServices(eip.Services{
			List:   func() ([]*v1.Service, error) { return services.Lister().List(labels.Everything()) },
			Synced: services.Informer().HasSynced,
		})
		eips.SetIPv6Unsupported(c.cfg.LB.IPv6Unsupported())
		eips.SetBeforePublish(c.lb.stage)
		if c.cfg.BGPMaxPrefixesAction == config.PrefixesRefuse {
			eips.SetPrefixCap(eip.PrefixCap{Limit: c.cfg.BGPMaxPrefixes, Announced: announcedBy(c.metal)})
		}
		c.lb.setEIPs(eips)
		retry(ctx, "enabling BGP on the project", func() (bgp.ProjectState, error) {
			return bgp.EnableProject(ctx, c.metal, c.cfg.LocalASN, c.cfg.BGPPass)
		})
		if ctx.Err() != nil {
			return
		}
		controller.Run(ctx, 2)
	}()
}

// watchOrphans reports (and with orphanEIPs=release, releases) this
// cluster's Service reservations whose Service is gone, after every full
// refresh of the reservation cache.
func (c *Cloud) watchOrphans(env *runEnv, services coreinformers.ServiceInformer, clusterID string) {
	if clusterID == "" {
		return // stopped before the cluster ID was read
	}
	w := &eip.OrphanWatcher{
		API:       c.metal,
		ClusterID: clusterID,
		Services:  func() ([]*v1.Service, error) { return services.Lister().List(labels.Everything()) },
		Synced:    services.Informer().HasSynced,
		LiveServices: func(ctx context.Context) ([]*v1.Service, error) {
			l, err := env.kube.CoreV1().Services(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
			if err != nil {
				return nil, err
			}
			out := make([]*v1.Service, 0, len(l.Items))
			for i := range l.Items {
				out = append(out, &l.Items[i])
			}
			return out, nil
		},
		Release: c.cfg.OrphanEIPs == config.OrphanRelease,
		Grace:   c.cfg.OrphanEIPGrace,
	}
	c.metal.OnReservationsRefreshed(func(ctx context.Context) { w.Check(ctx) })
}

// policiesReloaded applies new policies at once: nothing the informers see
// changes when only a policy does, so without this a new selection policy
// would wait for an unrelated node event. Selection is re-evaluated for all
// nodes (sessions, annotations), and the load-balancer config regenerated.
// Placement needs nothing: it is evaluated for each new Service.
//
// A failed reload changes nothing; it is recorded once per cause as a
// PolicyReloadFailed Event (reloadevents.go), the next good one as
// PolicyReloadRecovered.
func (c *Cloud) policiesReloaded(err error) {
	if err != nil {
		// The previous policies stay in use; nothing changed. The error
		// names the file and line, and that the previous policies decide.
		if c.policyEvents != nil {
			c.policyEvents.Failed(err.Error(), fmt.Sprintf("%v (in use: the policies with digest %s); no restart needed once the files are fixed", err, short(c.policies.Digest())))
		}
		return
	}
	if c.policyEvents != nil {
		c.policyEvents.Succeeded()
	}
	if controller := c.bgp.Load(); controller != nil {
		controller.Reselect()
	}
	if c.lb != nil {
		c.lb.dirty()
	}
}

// retry calls f with backoff until it succeeds or ctx ends, logging each
// failure.
func retry[T any](ctx context.Context, what string, f func() (T, error)) T {
	var out T
	backoff := wait.Backoff{Duration: time.Second, Factor: 2, Jitter: 0.1, Steps: 1 << 30, Cap: time.Minute}
	_ = wait.ExponentialBackoffWithContext(ctx, backoff, func(context.Context) (bool, error) {
		v, err := f()
		if err != nil {
			klog.ErrorS(err, "Retrying", "step", what)
			return false, nil
		}
		out = v
		return true, nil
	})
	return out
}

// LoadBalancer is enabled when the loadbalancer setting is.
func (c *Cloud) LoadBalancer() (cloudprovider.LoadBalancer, bool) {
	if c.lb == nil {
		return nil, false
	}
	return c.lb, true
}

// Instances is the deprecated interface; InstancesV2 replaces it.
func (c *Cloud) Instances() (cloudprovider.Instances, bool) { return nil, false }

// InstancesV2 serves node metadata from Equinix Metal devices.
func (c *Cloud) InstancesV2() (cloudprovider.InstancesV2, bool) { return c.instances, true }

// Zones is superseded by InstancesV2's metadata.
func (c *Cloud) Zones() (cloudprovider.Zones, bool) { return nil, false }

// Clusters is not used by external cloud providers.
func (c *Cloud) Clusters() (cloudprovider.Clusters, bool) { return nil, false }

// Routes is not offered: Equinix Metal has no route table to program.
func (c *Cloud) Routes() (cloudprovider.Routes, bool) { return nil, false }

// ProviderName returns "equinixmetal".
func (c *Cloud) ProviderName() string { return ProviderName }

// HasClusterID is true: EIPs are tagged with the kube-system namespace UID.
func (c *Cloud) HasClusterID() bool { return true }
