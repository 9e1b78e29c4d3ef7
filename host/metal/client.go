package metal

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/equinix/equinix-sdk-go/services/metalv1"
	"golang.org/x/sync/singleflight"
	"golang.org/x/time/rate"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/klog/v2"
	"k8s.io/utils/keymutex"

	"github.com/metal-ccm/cloud-provider-equinix-metal/host/config"
	"github.com/metal-ccm/cloud-provider-equinix-metal/host/redact"
)

// Options configures a Client. Zero values take the defaults named below.
type Options struct {
	// BaseURL of the API; default config.DefaultBaseURL.
	BaseURL string
	// APIKey is sent as X-Auth-Token and nowhere else. Required.
	APIKey config.Secret
	// ProjectID whose devices and IP reservations are read. Required.
	ProjectID string
	// Timeout bounds one HTTP attempt (connect, send, read the whole
	// answer); default 30s. The caller's context bounds the whole call.
	Timeout time.Duration
	// Retries of an idempotent request (GET, DELETE) after a 429, 5xx or
	// transport error. 0 means none; negative is an error.
	Retries int
	// QPS and Burst of the client-side token bucket shared by every call
	// of this Client (create one Client per process); default 10 and 20.
	QPS   float64
	Burst int
	// RefreshPeriod of the full device and reservation re-reads done by
	// Run; default 5m.
	RefreshPeriod time.Duration
	// UserAgent prefix, e.g. "cloud-provider-equinix-metal/v1.2.3".
	UserAgent string

	// RetryWaitMin and RetryWaitMax bound the backoff between retries
	// (default 1s and 30s). A 429 whose Retry-After exceeds RetryWaitMax is
	// not retried: the error carries RetryAfter for the caller to requeue.
	RetryWaitMin time.Duration
	RetryWaitMax time.Duration
	// PageSize of listings; default and maximum 1000 (the API's maximum).
	PageSize int
	// ReadOnly refuses, before it is sent, every request but GET and HEAD
	// (the plan and cleanup listing guard: they must never write).
	ReadOnly bool
}

// OptionsFromConfig maps the validated configuration onto Options.
func OptionsFromConfig(cfg *config.Config, userAgent string) Options {
	return Options{
		BaseURL:       cfg.BaseURL,
		APIKey:        cfg.APIKey,
		ProjectID:     cfg.ProjectID,
		Timeout:       cfg.APITimeout,
		Retries:       cfg.APIRetries,
		QPS:           cfg.APIQPS,
		Burst:         cfg.APIBurst,
		RefreshPeriod: cfg.CacheRefreshPeriod,
		UserAgent:     userAgent,
	}
}

const (
	defaultTimeout       = 30 * time.Second
	defaultQPS           = 10
	defaultRefreshPeriod = 5 * time.Minute
	defaultRetryWaitMin  = time.Second
	defaultRetryWaitMax  = 30 * time.Second
	maxPageSize          = 1000
	// refreshTimeout bounds one full re-read of a cache.
	refreshTimeout = 5 * time.Minute
)

// Client is the process's access to the Equinix Metal API. It is safe for
// concurrent use; create one per process so that its rate limiter and
// caches are shared.
type Client struct {
	opts    Options
	api     *metalv1.APIClient
	limiter *rate.Limiter
	red     redactor
	auth    *authState
	reach   *reachState
	// callTimeout bounds one call including its retries and backoff.
	callTimeout time.Duration

	devices      *store
	reservations *store
	// gets collapses concurrent GETs of the same object.
	gets singleflight.Group
	// reserveLocks serialises RequestReservation per tag set and family,
	// so two callers in this process never both see "none" and both create
	// one.
	reserveLocks keymutex.KeyMutex
	// editMu serialises read-modify-write edits of cached reservations
	// (an assignment added or removed), so that two do not lose one.
	editMu sync.Mutex
	// uncertainTags are tag sets (sorted, joined; ";ipv6" appended for an
	// IPv6 request) whose last reservation request failed without knowing
	// whether the API created it.
	uncertainMu   sync.Mutex
	uncertainTags map[string]bool

	// refreshHooks run after every successful periodic re-read of the
	// reservation cache (see OnReservationsRefreshed).
	hooksMu      sync.Mutex
	refreshHooks []func(context.Context)

	// bgpSessions remembers devices known to have an IPv4 BGP session (by
	// device ID) or an IPv6 one (sessionKey).
	bgpMu       sync.Mutex
	bgpSessions map[string]bool
}

// New checks the options and builds a Client. It makes no API call.
func New(opts Options) (*Client, error) {
	if opts.APIKey == "" {
		return nil, errors.New("equinix metal client: no API key; set apiKey in the cloud-config or METAL_API_KEY")
	}
	if opts.ProjectID == "" {
		return nil, errors.New("equinix metal client: no project ID; set projectID in the cloud-config or METAL_PROJECT_ID")
	}
	if opts.BaseURL == "" {
		opts.BaseURL = config.DefaultBaseURL
	}
	u, err := url.Parse(opts.BaseURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("equinix metal client: base URL %q is not an http(s) URL; set base-url (METAL_BASE_URL) to one like %s", opts.BaseURL, config.DefaultBaseURL)
	}
	if opts.Retries < 0 {
		return nil, fmt.Errorf("equinix metal client: retries is %d; set apiRetries (METAL_API_RETRIES) to 0 or more", opts.Retries)
	}
	if opts.QPS < 0 || opts.Burst < 0 {
		return nil, fmt.Errorf("equinix metal client: QPS %g and burst %d must not be negative; fix apiQPS and apiBurst (METAL_API_QPS, METAL_API_BURST)", opts.QPS, opts.Burst)
	}
	if opts.Timeout <= 0 {
		opts.Timeout = defaultTimeout
	}
	if opts.QPS == 0 {
		opts.QPS = defaultQPS
	}
	if opts.Burst == 0 {
		opts.Burst = max(1, int(2*opts.QPS))
	}
	if opts.RefreshPeriod <= 0 {
		opts.RefreshPeriod = defaultRefreshPeriod
	}
	if opts.RetryWaitMin <= 0 {
		opts.RetryWaitMin = defaultRetryWaitMin
	}
	if opts.RetryWaitMax <= 0 {
		opts.RetryWaitMax = defaultRetryWaitMax
	}
	if opts.RetryWaitMax < opts.RetryWaitMin {
		opts.RetryWaitMax = opts.RetryWaitMin
	}
	if opts.PageSize <= 0 || opts.PageSize > maxPageSize {
		opts.PageSize = maxPageSize
	}
	registerMetrics()
	// The key is hidden from every log line of the process, not only from
	// this client's errors.
	redact.Default.Add(opts.APIKey.Reveal())

	c := &Client{
		opts:          opts,
		limiter:       rate.NewLimiter(rate.Limit(opts.QPS), opts.Burst),
		red:           newRedactor(opts.APIKey),
		auth:          newAuthState(opts.APIKey),
		reach:         newReachState(),
		reserveLocks:  keymutex.NewHashed(1024),
		bgpSessions:   map[string]bool{},
		uncertainTags: map[string]bool{},
	}
	c.callTimeout = opts.Timeout*time.Duration(opts.Retries+1) + opts.RetryWaitMax*time.Duration(opts.Retries)

	cfg := metalv1.NewConfiguration()
	cfg.Servers = metalv1.ServerConfigurations{{URL: strings.TrimSuffix(opts.BaseURL, "/")}}
	cfg.OperationServers = map[string]metalv1.ServerConfigurations{}
	cfg.UserAgent = strings.TrimSpace(opts.UserAgent + " " + cfg.UserAgent)
	// Debug would dump requests and responses to the standard logger.
	cfg.Debug = false
	cfg.HTTPClient = newHTTPStack(c.auth, c.reach, c.limiter, opts.Timeout, opts.Retries, opts.RetryWaitMin, opts.RetryWaitMax)
	if opts.ReadOnly {
		cfg.HTTPClient.Transport = readOnly{cfg.HTTPClient.Transport}
	}
	c.api = metalv1.NewAPIClient(cfg)
	// The key now lives only in the HTTP stack (behind pointers). Printing
	// a Client with %+v would show an unexported Secret field in clear.
	c.opts.APIKey = ""

	c.devices = newDeviceStore()
	c.reservations = newReservationStore()
	return c, nil
}

// ProjectID is the project this client works in, for messages.
func (c *Client) ProjectID() string { return c.opts.ProjectID }

// call bounds one API call (all its attempts) and labels it for metrics.
func (c *Client) call(ctx context.Context, op operation) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithTimeout(ctx, c.callTimeout)
	return withOp(ctx, op), cancel
}

// Run re-reads the device and reservation caches every RefreshPeriod (with
// 10% jitter), starting now, until ctx ends. A failed re-read keeps the
// previous contents and is logged; the next period tries again. While
// calls fail, it also probes the API (see OnAnswersAgain).
func (c *Client) Run(ctx context.Context) {
	go c.probeWhileFailing(ctx)
	wait.JitterUntilWithContext(ctx, func(ctx context.Context) {
		if err := c.RefreshDevices(ctx); err != nil && ctx.Err() == nil {
			klog.ErrorS(err, "Equinix Metal device cache not refreshed; keeping the previous contents")
		}
		if err := c.RefreshReservations(ctx); err != nil {
			if ctx.Err() == nil {
				klog.ErrorS(err, "Equinix Metal IP reservation cache not refreshed; keeping the previous contents")
			}
			return
		}
		c.hooksMu.Lock()
		hooks := slices.Clone(c.refreshHooks)
		c.hooksMu.Unlock()
		for _, h := range hooks {
			h(ctx)
		}
	}, c.opts.RefreshPeriod, 0.1, true)
}

// OnReservationsRefreshed registers f to run after every successful full
// re-read of the reservation cache by Run (not after the re-reads a lookup
// forces), in Run's goroutine: the place for work that needs the whole
// project's reservations as of a fresh listing, such as finding orphans.
func (c *Client) OnReservationsRefreshed(f func(context.Context)) {
	c.hooksMu.Lock()
	defer c.hooksMu.Unlock()
	c.refreshHooks = append(c.refreshHooks, f)
}

// maxPages guards against an API that never reaches its last page.
const maxPages = 10000

// listPages reads every page of a listing: fetch(page) returns the page's
// items and its meta. It stops at the last page the API announces.
//
// Pages are offsets, so an object deleted while the listing runs shifts the
// later ones back and one of them can be skipped: a cache missing an
// existing reservation could lead to a duplicate. When fewer items arrive
// than the first page's total announced, the listing is read once more.
func listPages[T any](ctx context.Context, fetch func(ctx context.Context, page int32) ([]T, *metalv1.Meta, error)) ([]T, error) {
	var all []T
	for attempt := 0; ; attempt++ {
		all = all[:0]
		total := -1
		for page := int32(1); ; page++ {
			items, meta, err := fetch(ctx, page)
			if err != nil {
				return nil, err
			}
			if page == 1 && meta != nil && meta.Total != nil {
				total = int(meta.GetTotal())
			}
			all = append(all, items...)
			if meta == nil || meta.GetLastPage() <= page || len(items) == 0 {
				break
			}
			if page >= maxPages {
				return nil, fmt.Errorf("listing stopped after %d pages; the API keeps announcing more", maxPages)
			}
		}
		if total < 0 || len(all) >= total || attempt == 1 {
			return all, nil
		}
	}
}
