package metal

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"

	"github.com/hashicorp/go-cleanhttp"
	"github.com/hashicorp/go-retryablehttp"
	"golang.org/x/time/rate"
)

// The HTTP stack under the SDK, outermost first:
//
//	SDK → entry (auth header, rate limiter, choose path)
//	        ├─ GET/HEAD/DELETE → go-retryablehttp (CheckRetry, Backoff, rate limiter before each retry)
//	        │                      → attempt client (per-attempt Timeout) → attempt transport (metrics) → network
//	        └─ anything else   → attempt client → attempt transport → network (one try, never repeated)
//
// The rate limiter sits outside the per-attempt timeout so that waiting for
// a token never eats into the time an attempt has to complete.

type opKey struct{}

// withOp tags a context with the operation for the metrics below.
func withOp(ctx context.Context, op operation) context.Context {
	return context.WithValue(ctx, opKey{}, op.label)
}

func opLabel(ctx context.Context) string {
	if s, ok := ctx.Value(opKey{}).(string); ok {
		return s
	}
	return "unknown"
}

// httpStack builds the SDK's *http.Client.
type httpStack struct {
	auth     *authState
	reach    *reachState
	limiter  *rate.Limiter
	attempt  *http.Client
	retrying *retryablehttp.RoundTripper
}

func newHTTPStack(auth *authState, reach *reachState, limiter *rate.Limiter, timeout time.Duration, retries int, waitMin, waitMax time.Duration) *http.Client {
	base := cleanhttp.DefaultPooledTransport()
	// Many workers talk to one host; keep their connections instead of
	// re-dialling TLS for every request.
	base.MaxIdleConnsPerHost = 64
	s := &httpStack{auth: auth, reach: reach, limiter: limiter}
	s.attempt = &http.Client{Timeout: timeout, Transport: attemptTransport{base}}
	s.retrying = &retryablehttp.RoundTripper{Client: &retryablehttp.Client{
		HTTPClient:   s.attempt,
		Logger:       nil, // it would log URLs at debug level; we log nothing per request
		RetryWaitMin: waitMin,
		RetryWaitMax: waitMax,
		RetryMax:     retries,
		CheckRetry: func(ctx context.Context, resp *http.Response, err error) (bool, error) {
			return shouldRetry(ctx, resp, err, waitMax), nil
		},
		Backoff:      backoff,
		ErrorHandler: lastAnswer,
		PrepareRetry: func(req *http.Request) error {
			apiRetries.WithLabelValues(opLabel(req.Context())).Inc()
			return s.throttle(req.Context())
		},
	}}
	return &http.Client{Transport: s}
}

// RoundTrip adds the credential, waits for the rate limiter, and sends the
// request through the retrying or the single-shot path.
func (s *httpStack) RoundTrip(req *http.Request) (*http.Response, error) {
	key, err := s.auth.current()
	if err != nil {
		if req.Body != nil {
			_ = req.Body.Close()
		}
		return nil, err
	}
	if err := s.throttle(req.Context()); err != nil {
		if req.Body != nil {
			_ = req.Body.Close()
		}
		return nil, err
	}
	r := req.Clone(req.Context())
	// The only place the key leaves the process.
	r.Header.Set("X-Auth-Token", key.Reveal())
	var resp *http.Response
	if idempotent(r.Method) {
		resp, err = s.retrying.RoundTrip(r)
	} else {
		resp, err = s.attempt.Do(r)
	}
	s.auth.observe(req.Context(), key, resp)
	s.reach.observe(req.Context(), resp, err)
	if err == nil {
		trimResponse(req, resp)
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		// The SDK's own http.Client wraps again; do not say the URL twice.
		err = ue.Err
	}
	return resp, err
}

// throttle waits for the process-wide rate limiter and records the wait.
func (s *httpStack) throttle(ctx context.Context) error {
	start := time.Now()
	err := s.limiter.Wait(ctx)
	apiThrottle.WithLabelValues(opLabel(ctx)).Observe(time.Since(start).Seconds())
	if err != nil {
		return fmt.Errorf("waiting for the client-side rate limit (metal-api-qps %g): %w", float64(s.limiter.Limit()), err)
	}
	return nil
}

// lastAnswer is go-retryablehttp's ErrorHandler once it gives up: hand the
// last response to the SDK so that the user sees the API's own message (the
// library's default closes it and returns only "giving up after N
// attempts"); without a response, return the transport error.
func lastAnswer(resp *http.Response, err error, attempts int) (*http.Response, error) {
	if resp != nil && err == nil {
		return resp, nil
	}
	if resp != nil && resp.Body != nil {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
		_ = resp.Body.Close()
	}
	if err == nil {
		err = fmt.Errorf("no usable answer after %d attempts", attempts)
	}
	return nil, err
}

// attemptTransport counts and times every single HTTP request.
type attemptTransport struct{ next http.RoundTripper }

func (t attemptTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	op := opLabel(req.Context())
	start := time.Now()
	resp, err := t.next.RoundTrip(req)
	apiDuration.WithLabelValues(op).Observe(time.Since(start).Seconds())
	code := "error"
	if err == nil && resp != nil {
		code = fmt.Sprint(resp.StatusCode)
	}
	apiRequests.WithLabelValues(op, code).Inc()
	return resp, err
}

// errReadOnly is the error of a write through a ReadOnly client.
var errReadOnly = errors.New("refused: this Equinix Metal client is read-only")

// readOnly lets reads through and refuses anything else unsent.
type readOnly struct{ next http.RoundTripper }

func (t readOnly) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Method != http.MethodGet && req.Method != http.MethodHead {
		if req.Body != nil {
			_ = req.Body.Close()
		}
		return nil, fmt.Errorf("%w: %s %s", errReadOnly, req.Method, req.URL.Path)
	}
	return t.next.RoundTrip(req)
}
