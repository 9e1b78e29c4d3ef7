package lbmodule

import (
	"context"
	"crypto/sha256"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/metal-ccm/cloud-provider-equinix-metal/host/watchcache"
	"github.com/metal-ccm/cloud-provider-equinix-metal/sdk"
	"github.com/metal-ccm/cloud-provider-equinix-metal/sdk/wasmhost"
)

const (
	// eventReason is the reason of the Warning Event recorded, once per
	// cause, when a sync fails (see failureReporter).
	eventReason = "LoadBalancerModuleFailed"

	// defaultDebounce gathers a burst of Service and node events into one
	// generate call.
	defaultDebounce = time.Second
	queueKey        = "lbconfig"
)

// SnapshotFunc returns the current Services with addresses, BGP nodes with
// peers, and annotation templates. The reconciler fills the envelope, the
// options and Existing.
type SnapshotFunc func(ctx context.Context) (sdk.GenerateRequest, error)

// eventRecorder is the part of client-go's record.EventRecorder used here.
type eventRecorder interface {
	Eventf(object runtime.Object, eventtype, reason, messageFmt string, args ...interface{})
}

// ReconcilerConfig wires a Reconciler.
type ReconcilerConfig struct {
	Module  *wasmhost.Module
	Dynamic dynamic.Interface
	// Metadata lists objects as metadata only: the owned objects (to skip
	// unchanged ones and to prune) and the nodes (their annotations'
	// managers). At 10,000 Services a full list of the pools costs tens of
	// MB of decoding per sync; their metadata, a fraction. Nil lists
	// through Dynamic and Kube instead.
	Metadata metadata.Interface
	Kube     kubernetes.Interface
	Snapshot SnapshotFunc
	// Recorder receives the failure Events; nil records none.
	Recorder eventRecorder
	// Announcements, if set, is told every snapshot, to say on a Local
	// Service that no BGP node announces it (announce.go).
	Announcements *Announcements
	// EventObject is what the failure Events are recorded on; nil is
	// clusterevent.Reporter's object (the kube-system Namespace).
	EventObject *corev1.ObjectReference
	// Mapper resolves kinds to resources; nil builds one from Kube's
	// discovery, refreshed when a kind is not found (CRDs installed later).
	Mapper meta.RESTMapper
	// Debounce defaults to defaultDebounce.
	Debounce time.Duration
	// RetryBase and RetryMax bound the exponential backoff after a failed
	// sync; they default to 1s and 5m.
	RetryBase, RetryMax time.Duration
	// Clock is for tests; the real clock if nil.
	Clock  clock.WithTicker
	Logger *klog.Logger
}

// Reconciler keeps the cluster at what the module generates: one worker,
// one generate call per burst of changes, nothing applied unless the whole
// output is valid, retries with backoff, and the last good state kept on
// failure.
type Reconciler struct {
	cfg    ReconcilerConfig
	mapper meta.RESTMapper
	reset  func()
	queue  workqueue.TypedRateLimitingInterface[string]
	log    klog.Logger
	// failures reports a failing sync once per cause.
	failures *failureReporter
	// lastStart and lastEnd are when the last sync began and ended (Unix
	// nanoseconds); lastBusy is how long it built the module's input and
	// called the module (phaseClock.busy: the part that costs CPU), a
	// time.Duration.
	lastStart, lastEnd, lastBusy atomic.Int64

	// runMu guards running (a sync of the loop is under way) and the
	// requests for a sync made meanwhile: one someone waits for
	// (heldAwaited), one no one does (heldPlain) (loop.go).
	runMu                           sync.Mutex
	running, heldAwaited, heldPlain bool

	// appliedLast is how many objects the last sync's apply wrote (the
	// rest were unchanged); only the worker touches it.
	appliedLast int

	// mappings caches RESTMappings within one sync: resolving one per
	// object (10,000 pools) is a lot of garbage for one answer per kind.
	mappings map[schema.GroupVersionKind]*meta.RESTMapping

	mu sync.Mutex
	// annotated are the nodes that carry annotations under
	// fieldmanager.ModuleNodeAnnotations; nil until the first sync has looked.
	annotated map[string]bool
	lastErr   error
	// record is the kinds record (prune.go) as last read or written; nil
	// until the first sync reads it.
	record map[kindKey]bool
	// applied is, per owned object, what this process last applied and the
	// resourceVersion the apiserver answered: while the object still has
	// that version and the module wants the same body, applying it again
	// would change nothing, so it is skipped.
	applied map[objectKey]appliedObject
	// next is a module to use from the next sync on (SetModule).
	next atomic.Pointer[wasmhost.Module]
	// watch serves the sync's reads and lists from watches (readAndList);
	// nil outside Run (plan, the tests that call Sync), which list.
	watch *watchcache.Cache

	// doneMu guards the rest (AwaitSync): snapped numbers the syncs as
	// they take their snapshot; reading says a sync has begun and not
	// taken it yet; doneSeq is the number of the last one to have written
	// its objects or ended, and doneCh is closed when the next one does.
	doneMu  sync.Mutex
	snapped int64
	reading bool
	doneSeq int64
	doneCh  chan struct{}
}

type appliedObject struct {
	body [sha256.Size]byte
	version
}

// version is what tells whether an object is still as it was applied:
// its resourceVersion, and its UID and generation. The generation counts
// changes of what the CCM writes (not of the status, nor of the metadata)
// in kinds that keep one (custom resources; 0 in ConfigMaps and
// Secrets): MetalLB's controller updates each IPAddressPool's status as
// it allocates, which changes the resourceVersion but not what the CCM
// owns, and re-applying every such pool cost a burst of new Services a
// write each, per sync, through MetalLB's webhook.
type version struct {
	rv         string
	uid        types.UID
	generation int64
}

// unchanged reports whether live is still the object as applied. A live
// generation below the applied one, of the same object, is a watched copy
// that has not yet seen this process's write (fromWatch): the object is at
// least as applied, and a change by another writer would have raised the
// generation above it.
func (v version) unchanged(live version) bool {
	return live.rv == v.rv || (live.uid == v.uid && v.generation > 0 && live.generation > 0 && live.generation <= v.generation)
}

// NewReconciler checks cfg and builds a Reconciler; call Run to start it.
func NewReconciler(cfg ReconcilerConfig) (*Reconciler, error) {
	if cfg.Module == nil || cfg.Dynamic == nil || cfg.Kube == nil || cfg.Snapshot == nil {
		return nil, errors.New("lbmodule.NewReconciler needs Module, Dynamic, Kube and Snapshot")
	}
	if cfg.Debounce == 0 {
		cfg.Debounce = defaultDebounce
	}
	if cfg.RetryBase == 0 {
		cfg.RetryBase = time.Second
	}
	if cfg.RetryMax == 0 {
		cfg.RetryMax = 5 * time.Minute
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	r := &Reconciler{cfg: cfg, mapper: cfg.Mapper, reset: func() {}, doneCh: make(chan struct{})}
	if cfg.Logger != nil {
		r.log = *cfg.Logger
	} else {
		r.log = klog.Background()
	}
	r.log = r.log.WithValues("module", cfg.Module.Name())
	r.failures = newFailureReporter(cfg, r.log)
	if r.mapper == nil {
		m := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(cfg.Kube.Discovery()))
		r.mapper, r.reset = m, m.Reset
	}
	r.queue = workqueue.NewTypedRateLimitingQueueWithConfig(
		workqueue.NewTypedItemExponentialFailureRateLimiter[string](cfg.RetryBase, cfg.RetryMax),
		workqueue.TypedRateLimitingQueueConfig[string]{Name: "lbmodule", Clock: cfg.Clock})
	registerMetrics()
	return r, nil
}
