package emulator

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// Route names one endpoint: the method and the path pattern below
// BasePath, as in "GET /devices/{id}". Counters and faults are per Route.
type Route string

// The emulated endpoints.
const (
	RouteGetDevice            Route = "GET /devices/{id}"
	RouteListProjectDevices   Route = "GET /projects/{id}/devices"
	RouteGetBGPConfig         Route = "GET /projects/{id}/bgp-config"
	RouteRequestBGPConfig     Route = "POST /projects/{id}/bgp-configs"
	RouteCreateBGPSession     Route = "POST /devices/{id}/bgp/sessions"
	RouteListBGPSessions      Route = "GET /devices/{id}/bgp/sessions"
	RouteGetBGPNeighbors      Route = "GET /devices/{id}/bgp/neighbors"
	RouteListIPReservations   Route = "GET /projects/{id}/ips"
	RouteRequestIPReservation Route = "POST /projects/{id}/ips"
	RouteGetIP                Route = "GET /ips/{id}"
	RouteDeleteIP             Route = "DELETE /ips/{id}"
	RouteAssignIP             Route = "POST /devices/{id}/ips"
	RouteListDeviceIPs        Route = "GET /devices/{id}/ips"
	RouteGetProject           Route = "GET /projects/{id}"
	RouteListMetros           Route = "GET /locations/metros"
	RouteGetMetro             Route = "GET /locations/metros/{id}"
	RouteListFacilities       Route = "GET /facilities"
	// RouteUnmatched counts requests below BasePath that match no endpoint
	// (answered 404).
	RouteUnmatched Route = "* (unmatched)"
	// AllRoutes, given to SetFault, applies a fault to every route that has
	// no fault of its own.
	AllRoutes Route = "*"
)

// Routes lists the emulated endpoints.
func Routes() []Route {
	return []Route{
		RouteGetDevice, RouteListProjectDevices, RouteGetBGPConfig, RouteRequestBGPConfig,
		RouteCreateBGPSession, RouteListBGPSessions, RouteGetBGPNeighbors, RouteListIPReservations,
		RouteRequestIPReservation, RouteGetIP, RouteDeleteIP, RouteAssignIP, RouteListDeviceIPs,
		RouteGetProject, RouteListMetros, RouteGetMetro, RouteListFacilities,
	}
}

// Duration is a time.Duration that reads and writes as a Go duration
// string ("250ms") in JSON, and also accepts a number of seconds.
type Duration time.Duration

func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }

func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err == nil {
		v, err := time.ParseDuration(s)
		if err != nil {
			return err
		}
		*d = Duration(v)
		return nil
	}
	var f float64
	if err := json.Unmarshal(b, &f); err != nil {
		return fmt.Errorf("duration: want a string like \"250ms\" or seconds: %w", err)
	}
	*d = Duration(f * float64(time.Second))
	return nil
}

// Fault is the standing misbehaviour of a route. Each request draws once:
// with probability RateLimitShare it is answered 429, else with
// ServerErrorShare a 5xx, else with UnavailableShare a 503, else with
// ResetShare its connection is reset, else with LostShare it is served but
// its answer is lost; otherwise it is served normally. Latency (plus up to
// Jitter more, drawn uniformly) is added before any of that.
type Fault struct {
	Latency Duration `json:"latency,omitempty"`
	Jitter  Duration `json:"jitter,omitempty"`
	// RateLimitShare of requests (0..1) get 429 with a Retry-After header
	// of RetryAfter (rounded up to whole seconds; default 1s).
	RateLimitShare float64  `json:"rate_limit_share,omitempty"`
	RetryAfter     Duration `json:"retry_after,omitempty"`
	// ServerErrorShare of requests get ServerErrorStatus (default 500).
	ServerErrorShare  float64 `json:"server_error_share,omitempty"`
	ServerErrorStatus int     `json:"server_error_status,omitempty"`
	// ResetShare of requests have their TCP connection reset without an
	// answer. Note that Go's http.Transport silently retries an idempotent
	// request (GET, DELETE) once when its reused keep-alive connection is
	// reset before any answer, exactly as it would against the real API;
	// the counters see both requests.
	ResetShare float64 `json:"reset_share,omitempty"`
	// UnavailableShare of requests get 503 Service Unavailable (the API's
	// answer while it is being deployed), apart from ServerErrorShare so
	// that one Fault can mix 500s and 503s.
	UnavailableShare float64 `json:"unavailable_share,omitempty"`
	// LostShare of requests are served (what they change, changes) but
	// their answer is held for LostFor (default 35s) and then their
	// connection reset: the client never learns that, say, its reservation
	// was created. The worst case for idempotency.
	LostShare float64  `json:"lost_share,omitempty"`
	LostFor   Duration `json:"lost_for,omitempty"`
}

// DefaultLostFor is how long a lost answer is held when Fault.LostFor is
// not set.
const DefaultLostFor = 35 * time.Second

// The kinds of fault that InjectedFaults counts.
const (
	FaultRateLimit   = "429"
	FaultServerError = "500" // or Fault.ServerErrorStatus
	FaultUnavailable = "503"
	FaultReset       = "reset"
	FaultLost        = "lost"
	FaultScripted    = "other" // a scripted failure with a status below 500
)

// Failure is one scripted failure, see Emulator.FailNext.
type Failure struct {
	// Status is the answer (429, 5xx, or any other status, with an Error
	// body); ignored when Reset is set.
	Status int `json:"status,omitempty"`
	// RetryAfter is sent as Retry-After (whole seconds) when set, and on
	// every 429 (default 1s).
	RetryAfter Duration `json:"retry_after,omitempty"`
	// Reset resets the connection instead of answering (see
	// Fault.ResetShare about transparent retries by Go clients).
	Reset bool `json:"reset,omitempty"`
	// Message is the error text (default: the status text).
	Message string `json:"message,omitempty"`
	// Lost serves the request and loses its answer, as Fault.LostShare
	// does, for LostFor (default DefaultLostFor).
	Lost    bool     `json:"lost,omitempty"`
	LostFor Duration `json:"lost_for,omitempty"`
}

// kind is the InjectedFaults kind of a scripted failure.
func (f Failure) kind() string {
	switch {
	case f.Lost:
		return FaultLost
	case f.Reset:
		return FaultReset
	case f.Status == http.StatusTooManyRequests:
		return FaultRateLimit
	case f.Status == http.StatusServiceUnavailable:
		return FaultUnavailable
	case f.Status >= 500 || f.Status == 0:
		return FaultServerError
	}
	return FaultScripted
}

type script struct {
	f    Failure
	left int
}

type faults struct {
	standing atomic.Pointer[map[Route]Fault] // copy on write
	mu       sync.Mutex
	scripts  map[Route][]*script
	nScripts atomic.Int64
	injected sync.Map // fault kind → *atomic.Int64
}

func (fs *faults) count(kind string) {
	v, _ := fs.injected.LoadOrStore(kind, new(atomic.Int64))
	v.(*atomic.Int64).Add(1)
}

// InjectedFaults counts the faults injected since the emulator started,
// by kind (FaultRateLimit, FaultServerError, ...). ClearFaults does not
// reset it: a run reads it once at its end.
func (e *Emulator) InjectedFaults() map[string]int64 {
	out := map[string]int64{}
	e.faults.injected.Range(func(k, v any) bool {
		out[k.(string)] = v.(*atomic.Int64).Load()
		return true
	})
	return out
}

func (fs *faults) set(r Route, f Fault) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	m := map[Route]Fault{}
	if cur := fs.standing.Load(); cur != nil {
		for k, v := range *cur {
			m[k] = v
		}
	}
	if f == (Fault{}) {
		delete(m, r)
	} else {
		m[r] = f
	}
	fs.standing.Store(&m)
}

func (fs *faults) snapshot() (map[Route]Fault, map[Route][]Failure) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	st := map[Route]Fault{}
	if cur := fs.standing.Load(); cur != nil {
		for k, v := range *cur {
			st[k] = v
		}
	}
	sc := map[Route][]Failure{}
	for r, l := range fs.scripts {
		for _, s := range l {
			for i := 0; i < s.left; i++ {
				sc[r] = append(sc[r], s.f)
			}
		}
	}
	return st, sc
}

func (fs *faults) clear() {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	fs.standing.Store(nil)
	fs.scripts = nil
	fs.nScripts.Store(0)
}

func (fs *faults) failNext(r Route, n int, f Failure) {
	if n <= 0 {
		return
	}
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if fs.scripts == nil {
		fs.scripts = map[Route][]*script{}
	}
	fs.scripts[r] = append(fs.scripts[r], &script{f: f, left: n})
	fs.nScripts.Add(int64(n))
}

// nextScripted pops the route's next scripted failure, if any.
func (fs *faults) nextScripted(r Route) (Failure, bool) {
	if fs.nScripts.Load() == 0 {
		return Failure{}, false
	}
	fs.mu.Lock()
	defer fs.mu.Unlock()
	for _, key := range []Route{r, AllRoutes} {
		l := fs.scripts[key]
		if len(l) == 0 {
			continue
		}
		s := l[0]
		s.left--
		if s.left == 0 {
			fs.scripts[key] = l[1:]
		}
		fs.nScripts.Add(-1)
		return s.f, true
	}
	return Failure{}, false
}

func (fs *faults) standingFor(r Route) (Fault, bool) {
	cur := fs.standing.Load()
	if cur == nil {
		return Fault{}, false
	}
	if f, ok := (*cur)[r]; ok {
		return f, true
	}
	f, ok := (*cur)[AllRoutes]
	return f, ok
}

// inject applies the route's faults. It returns false when the request has
// been answered (or its connection reset) and must not be served; lose > 0
// asks the caller to serve it and then lose the answer for that long.
func (e *Emulator) inject(w http.ResponseWriter, req *http.Request, r Route) (serve bool, lose time.Duration) {
	if f, ok := e.faults.nextScripted(r); ok {
		e.faults.count(f.kind())
		if f.Lost {
			return true, lostFor(f.LostFor)
		}
		e.fail(w, req, f)
		return false, 0
	}
	f, ok := e.faults.standingFor(r)
	if !ok {
		return true, 0
	}
	if d := time.Duration(f.Latency); d > 0 || f.Jitter > 0 {
		if f.Jitter > 0 {
			d += time.Duration(e.store.float64() * float64(f.Jitter))
		}
		if !sleep(req.Context(), d) {
			return false, 0
		}
	}
	kind := draw(f, e.store.float64())
	if kind == "" {
		return true, 0
	}
	e.faults.count(kind)
	switch kind {
	case FaultRateLimit:
		e.fail(w, req, Failure{Status: http.StatusTooManyRequests, RetryAfter: f.RetryAfter})
	case FaultServerError:
		st := f.ServerErrorStatus
		if st == 0 {
			st = http.StatusInternalServerError
		}
		e.fail(w, req, Failure{Status: st})
	case FaultUnavailable:
		e.fail(w, req, Failure{Status: http.StatusServiceUnavailable})
	case FaultReset:
		e.fail(w, req, Failure{Reset: true})
	case FaultLost:
		return true, lostFor(f.LostFor)
	}
	return false, 0
}

func lostFor(d Duration) time.Duration {
	if d <= 0 {
		return DefaultLostFor
	}
	return time.Duration(d)
}

// draw picks the fault for a uniform draw x in [0,1): the shares are laid
// end to end in the order Fault documents; "" is no fault.
func draw(f Fault, x float64) string {
	for _, k := range []struct {
		share float64
		kind  string
	}{
		{f.RateLimitShare, FaultRateLimit}, {f.ServerErrorShare, FaultServerError},
		{f.UnavailableShare, FaultUnavailable}, {f.ResetShare, FaultReset}, {f.LostShare, FaultLost},
	} {
		if x < k.share {
			return k.kind
		}
		x -= k.share
	}
	return ""
}

func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

func (e *Emulator) fail(w http.ResponseWriter, req *http.Request, f Failure) {
	if f.Reset {
		resetConnection(w)
		return
	}
	st := f.Status
	if st == 0 {
		st = http.StatusInternalServerError
	}
	if st == http.StatusTooManyRequests && f.RetryAfter == 0 {
		f.RetryAfter = Duration(time.Second)
	}
	if f.RetryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(int(math.Ceil(time.Duration(f.RetryAfter).Seconds()))))
	}
	msg := f.Message
	if msg == "" {
		msg = http.StatusText(st)
	}
	writeError(w, st, msg)
}

// resetConnection closes the client's TCP connection with a reset (RST),
// so the client sees "connection reset by peer".
func resetConnection(w http.ResponseWriter) {
	conn, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		// Not hijackable (HTTP/2, or a recorder): abort the response.
		panic(http.ErrAbortHandler)
	}
	if tc, ok := conn.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	_ = conn.Close()
}
