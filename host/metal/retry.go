package metal

import (
	"context"
	"math"
	"net/http"
	"strconv"
	"time"

	"github.com/hashicorp/go-retryablehttp"
	"k8s.io/apimachinery/pkg/util/wait"
)

// idempotent reports whether a request may be sent again without changing
// the outcome. Only these methods go through the retrying client: a POST
// that timed out may have created its object, and sending it again would
// create a second one (a second Elastic IP billed to the user).
func idempotent(method string) bool {
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodDelete:
		return true
	}
	return false
}

// shouldRetry is the retry decision for an idempotent request: retry a
// transport error or timeout (except the permanent ones go-retryablehttp
// knows: bad scheme, bad certificate, redirect loop), a 429 unless its
// Retry-After asks for more than maxWait, and a 5xx except 501. Everything
// else (4xx) is an answer, not a failure.
func shouldRetry(ctx context.Context, resp *http.Response, err error, maxWait time.Duration) bool {
	if ctx.Err() != nil {
		return false
	}
	if err != nil || resp == nil {
		retry, _ := retryablehttp.DefaultRetryPolicy(ctx, resp, err)
		return retry
	}
	switch {
	case resp.StatusCode == http.StatusTooManyRequests:
		return retryAfter(resp) <= maxWait
	case resp.StatusCode == http.StatusServiceUnavailable:
		return retryAfter(resp) <= maxWait
	case resp.StatusCode >= 500 && resp.StatusCode != http.StatusNotImplemented:
		return true
	}
	return false
}

// backoff is how long to wait before retry number attempt+1. A 429 or 503
// with Retry-After waits exactly that long (shouldRetry already refused
// waits above max); otherwise the wait doubles from min, capped at max, with
// up to 20% jitter so that many workers do not retry in lockstep.
func backoff(min, max time.Duration, attempt int, resp *http.Response) time.Duration {
	if d := retryAfter(resp); d > 0 {
		if d > max {
			return max
		}
		return d
	}
	d := time.Duration(float64(min) * math.Pow(2, float64(attempt)))
	if d <= 0 || d > max {
		d = max
	}
	d = wait.Jitter(d, 0.2)
	if d > max {
		d = max
	}
	return d
}

// retryAfter reads Retry-After (seconds or an HTTP date) from a 429 or 503;
// 0 when absent, unparsable or in the past.
func retryAfter(resp *http.Response) time.Duration {
	if resp == nil || (resp.StatusCode != http.StatusTooManyRequests && resp.StatusCode != http.StatusServiceUnavailable) {
		return 0
	}
	v := resp.Header.Get("Retry-After")
	if v == "" {
		return 0
	}
	if s, err := strconv.ParseInt(v, 10, 64); err == nil {
		if s <= 0 {
			return 0
		}
		if s > int64(math.MaxInt64/int64(time.Second)) {
			return time.Duration(math.MaxInt64)
		}
		return time.Duration(s) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil {
		if d := time.Until(t); d > 0 {
			return d
		}
	}
	return 0
}
