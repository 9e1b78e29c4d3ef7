package emulator

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	metalv1 "github.com/equinix/equinix-sdk-go/services/metalv1"
)

// Options tune an Emulator. The zero value is fine.
type Options struct {
	// Logger, when set, gets one line per request (method, path, route,
	// status, duration).
	Logger *slog.Logger
	// ReservationPendingFor keeps every reservation requested through the
	// API in state "pending" for this long before it turns "created".
	ReservationPendingFor time.Duration
	// Now is the clock (default time.Now).
	Now func() time.Time
	// RandSeed seeds the generated IDs and the fault draws; 0 picks one at
	// random.
	RandSeed uint64
}

// Emulator is an in-memory Equinix Metal API. It is safe for concurrent
// use. Create it with New, then serve it with Start, Listen or Handler.
type Emulator struct {
	opts     Options
	store    *store
	counters *counters
	faults   faults
	handler  http.Handler

	mu   sync.Mutex
	srv  *httptest.Server
	hsrv *http.Server
	url  string
}

// New builds an emulator from a seed (DefaultSeed when nil). What the seed
// leaves out comes from DefaultSeed: without tokens, DefaultToken; without
// metros, DefaultSeed's metros and facilities; without projects, the
// project DefaultProjectID.
func New(seed *Seed, opts Options) (*Emulator, error) {
	if seed == nil {
		seed = DefaultSeed()
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	rs := opts.RandSeed
	if rs == 0 {
		rs = uint64(time.Now().UnixNano())
	}
	e := &Emulator{opts: opts, store: newStore(opts.Now, rs, opts.ReservationPendingFor), counters: newCounters()}
	seed = withDefaults(seed)
	if err := e.store.apply(seed); err != nil {
		return nil, err
	}
	e.handler = e.routes()
	return e, nil
}

// withDefaults fills what a seed leaves out from DefaultSeed: the token,
// the metros with their facilities, and the project.
func withDefaults(seed *Seed) *Seed {
	cp, def := *seed, DefaultSeed()
	if len(cp.Tokens) == 0 {
		cp.Tokens = def.Tokens
	}
	if len(cp.Metros) == 0 {
		cp.Metros = def.Metros
		if len(cp.Facilities) == 0 {
			cp.Facilities = def.Facilities
		}
	}
	if len(cp.Projects) == 0 {
		cp.Projects = def.Projects
	}
	return &cp
}

// StartForTest builds an emulator, serves it on a loopback port for the
// test's lifetime, and fails the test if the seed is invalid.
func StartForTest(t testing.TB, seed *Seed, opts Options) *Emulator {
	t.Helper()
	e, err := New(seed, opts)
	if err != nil {
		t.Fatalf("emulator: %v", err)
	}
	e.Start()
	t.Cleanup(e.Close)
	return e
}

// Handler serves the API below BasePath and the admin endpoints below
// /_emulator/.
func (e *Emulator) Handler() http.Handler { return e.handler }

// Start serves the emulator on a loopback port (an httptest.Server) and
// returns the API's base URL, for example http://127.0.0.1:41234/metal/v1.
func (e *Emulator) Start() string {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.url != "" {
		return e.url
	}
	e.srv = httptest.NewServer(e.handler)
	e.url = e.srv.URL + BasePath
	return e.url
}

// Listen serves the emulator on addr (host:port; port 0 picks one) in the
// background and returns the API's base URL.
func (e *Emulator) Listen(addr string) (string, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.url != "" {
		return "", errors.New("emulator: already serving at " + e.url)
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return "", err
	}
	e.hsrv = &http.Server{Handler: e.handler, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = e.hsrv.Serve(l) }()
	e.url = "http://" + l.Addr().String() + BasePath
	return e.url, nil
}

// URL is the API's base URL ("" before Start or Listen).
func (e *Emulator) URL() string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.url
}

// Close stops serving.
func (e *Emulator) Close() {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.srv != nil {
		e.srv.Close()
		e.srv = nil
	}
	if e.hsrv != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		_ = e.hsrv.Shutdown(ctx)
		cancel()
		e.hsrv = nil
	}
}

// Configuration is an equinix-sdk-go configuration pointed at the
// emulator (it must be serving) with the given API token.
func (e *Emulator) Configuration(token string) *metalv1.Configuration {
	cfg := metalv1.NewConfiguration()
	cfg.Servers = metalv1.ServerConfigurations{{URL: e.URL()}}
	cfg.AddDefaultHeader("X-Auth-Token", token)
	cfg.UserAgent = "metal-emulator-client"
	return cfg
}

// Client is an equinix-sdk-go client of the emulator with the given token.
func (e *Emulator) Client(token string) *metalv1.APIClient {
	return metalv1.NewAPIClient(e.Configuration(token))
}

// --- request plumbing ------------------------------------------------------

// call is one API request being served.
type call struct {
	e   *Emulator
	w   http.ResponseWriter
	r   *http.Request
	tok *token
}

// result is a handler's answer: a status and a body to encode as JSON
// (nil for no body).
type result struct {
	status int
	body   any
}

type handlerFunc func(c *call) (result, error)

// recorder remembers the status for counters and logs.
type recorder struct {
	http.ResponseWriter
	status int
	bytes  int
}

func (r *recorder) WriteHeader(s int) {
	if r.status == 0 {
		r.status = s
	}
	r.ResponseWriter.WriteHeader(s)
}

func (r *recorder) Write(b []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	n, err := r.ResponseWriter.Write(b)
	r.bytes += n
	return n, err
}

func (r *recorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

func (e *Emulator) routes() http.Handler {
	mux := http.NewServeMux()
	for r, h := range map[Route]handlerFunc{
		RouteGetDevice:            (*call).getDevice,
		RouteListProjectDevices:   (*call).listProjectDevices,
		RouteGetBGPConfig:         (*call).getBGPConfig,
		RouteRequestBGPConfig:     (*call).requestBGPConfig,
		RouteCreateBGPSession:     (*call).createBGPSession,
		RouteListBGPSessions:      (*call).listBGPSessions,
		RouteGetBGPNeighbors:      (*call).getBGPNeighbors,
		RouteListIPReservations:   (*call).listIPReservations,
		RouteRequestIPReservation: (*call).requestIPReservation,
		RouteGetIP:                (*call).getIP,
		RouteDeleteIP:             (*call).deleteIP,
		RouteAssignIP:             (*call).assignIP,
		RouteListDeviceIPs:        (*call).listDeviceIPs,
		RouteGetProject:           (*call).getProject,
		RouteListMetros:           (*call).listMetros,
		RouteGetMetro:             (*call).getMetro,
		RouteListFacilities:       (*call).listFacilities,
	} {
		method, path, _ := cutRoute(r)
		mux.Handle(method+" "+BasePath+path, e.serve(r, h))
	}
	mux.Handle(BasePath+"/", e.serve(RouteUnmatched, func(*call) (result, error) { return result{}, errNotFound }))
	e.adminRoutes(mux)
	return mux
}

func cutRoute(r Route) (method, path string, ok bool) {
	for i := 0; i < len(r); i++ {
		if r[i] == ' ' {
			return string(r[:i]), string(r[i+1:]), true
		}
	}
	return "", string(r), false
}

// serve wraps a handler with counting, logging, faults and auth.
func (e *Emulator) serve(r Route, h handlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		start := time.Now()
		e.counters.arrive(r)
		rec := &recorder{ResponseWriter: w}
		defer func() {
			e.counters.answered(r, rec.status)
			if e.opts.Logger != nil {
				e.opts.Logger.Info("request", "method", req.Method, "path", req.URL.RequestURI(), "route", string(r),
					"status", rec.status, "bytes", rec.bytes, "duration", time.Since(start).Round(time.Microsecond).String())
			}
		}()
		serve, lose := e.inject(rec, req, r)
		if !serve {
			return
		}
		if lose > 0 {
			// Served for its effect; the answer goes nowhere, and the
			// client waits, then sees its connection reset.
			e.handle(httptest.NewRecorder(), req, h)
			if sleep(req.Context(), lose) {
				resetConnection(rec)
			}
			return
		}
		e.handle(rec, req, h)
	})
}

// handle authenticates and serves one request.
func (e *Emulator) handle(w http.ResponseWriter, req *http.Request, h handlerFunc) {
	tok := e.authenticate(req)
	if tok == nil {
		writeJSON(w, http.StatusUnauthorized, &metalv1.Error{Error: ptr("Invalid authentication token")})
		return
	}
	if tok.readOnly && (req.Method == http.MethodPost || req.Method == http.MethodDelete || req.Method == http.MethodPut || req.Method == http.MethodPatch) {
		writeError(w, http.StatusForbidden, "You are not authorized to perform this action with a read-only API key")
		return
	}
	res, err := h(&call{e: e, w: w, r: req, tok: tok})
	if err != nil {
		var ae *apiError
		if errors.As(err, &ae) {
			writeError(w, ae.status, ae.msg)
		} else {
			writeError(w, http.StatusInternalServerError, err.Error())
		}
		return
	}
	if res.body == nil {
		w.WriteHeader(res.status)
		return
	}
	writeJSON(w, res.status, res.body)
}

func (e *Emulator) authenticate(req *http.Request) *token {
	t := req.Header.Get("X-Auth-Token")
	if t == "" {
		return nil
	}
	e.store.mu.RLock()
	defer e.store.mu.RUnlock()
	return e.store.tokens[t]
}

var bufPool = sync.Pool{New: func() any { return new(bytes.Buffer) }}

func writeJSON(w http.ResponseWriter, status int, v any) {
	buf := bufPool.Get().(*bytes.Buffer)
	buf.Reset()
	defer bufPool.Put(buf)
	if err := encodeJSON(buf, v); err != nil {
		status = http.StatusInternalServerError
		buf.Reset()
		_ = json.NewEncoder(buf).Encode(&metalv1.Error{Errors: []string{"encoding the response: " + err.Error()}})
	} else {
		buf.WriteByte('\n')
	}
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

// writeError answers with the API's error body, {"errors":["..."]}.
func writeError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, &metalv1.Error{Errors: []string{msg}})
}
