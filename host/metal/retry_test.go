package metal

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"testing"
	"time"
)

func resp(code int, retryAfter string) *http.Response {
	r := &http.Response{StatusCode: code, Header: http.Header{}}
	if retryAfter != "" {
		r.Header.Set("Retry-After", retryAfter)
	}
	return r
}

func TestIdempotent(t *testing.T) {
	for method, want := range map[string]bool{
		http.MethodGet: true, http.MethodHead: true, http.MethodDelete: true,
		http.MethodPost: false, http.MethodPut: false, http.MethodPatch: false,
	} {
		if got := idempotent(method); got != want {
			t.Errorf("idempotent(%s) = %v, want %v", method, got, want)
		}
	}
}

func TestShouldRetry(t *testing.T) {
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	transport := &url.Error{Op: "Get", URL: "http://x", Err: errors.New("connection reset by peer")}
	badScheme := &url.Error{Op: "Get", URL: "ftp://x", Err: errors.New("unsupported protocol scheme \"ftp\"")}
	const maxWait = 30 * time.Second
	tests := []struct {
		name string
		ctx  context.Context
		resp *http.Response
		err  error
		want bool
	}{
		{"transport error", context.Background(), nil, transport, true},
		{"bad scheme is permanent", context.Background(), nil, badScheme, false},
		{"caller gave up", cancelled, nil, transport, false},
		{"429 without Retry-After", context.Background(), resp(429, ""), nil, true},
		{"429 with short Retry-After", context.Background(), resp(429, "2"), nil, true},
		{"429 asking for longer than we wait", context.Background(), resp(429, "120"), nil, false},
		{"503 with Retry-After", context.Background(), resp(503, "1"), nil, true},
		{"500", context.Background(), resp(500, ""), nil, true},
		{"502", context.Background(), resp(502, ""), nil, true},
		{"504", context.Background(), resp(504, ""), nil, true},
		{"501 is permanent", context.Background(), resp(501, ""), nil, false},
		{"200", context.Background(), resp(200, ""), nil, false},
		{"404 is an answer", context.Background(), resp(404, ""), nil, false},
		{"422 is an answer", context.Background(), resp(422, ""), nil, false},
		{"401 is an answer", context.Background(), resp(401, ""), nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := shouldRetry(tt.ctx, tt.resp, tt.err, maxWait); got != tt.want {
				t.Errorf("shouldRetry = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestRetryAfter(t *testing.T) {
	future := time.Now().Add(90 * time.Second).UTC().Format(http.TimeFormat)
	past := time.Now().Add(-time.Hour).UTC().Format(http.TimeFormat)
	tests := []struct {
		name    string
		resp    *http.Response
		min     time.Duration
		maxDiff time.Duration
	}{
		{"no response", nil, 0, 0},
		{"seconds", resp(429, "7"), 7 * time.Second, 0},
		{"zero", resp(429, "0"), 0, 0},
		{"negative", resp(429, "-3"), 0, 0},
		{"garbage", resp(429, "soon"), 0, 0},
		{"date", resp(503, future), 88 * time.Second, 3 * time.Second},
		{"date in the past", resp(503, past), 0, 0},
		{"ignored on a 500", resp(500, "7"), 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := retryAfter(tt.resp)
			if got < tt.min || got > tt.min+tt.maxDiff {
				t.Errorf("retryAfter = %v, want %v (+%v)", got, tt.min, tt.maxDiff)
			}
		})
	}
}

func TestBackoff(t *testing.T) {
	min, max := time.Second, 30*time.Second
	tests := []struct {
		name    string
		attempt int
		resp    *http.Response
		lo, hi  time.Duration
	}{
		{"first retry", 0, resp(500, ""), time.Second, 1200 * time.Millisecond},
		{"doubles", 2, resp(500, ""), 4 * time.Second, 4800 * time.Millisecond},
		{"capped", 10, nil, max, max},
		{"huge attempt does not overflow", 200, nil, max, max},
		{"Retry-After honoured exactly", 0, resp(429, "5"), 5 * time.Second, 5 * time.Second},
		{"Retry-After capped", 0, resp(503, "300"), max, max},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for range 50 {
				if got := backoff(min, max, tt.attempt, tt.resp); got < tt.lo || got > tt.hi {
					t.Fatalf("backoff = %v, want within [%v, %v]", got, tt.lo, tt.hi)
				}
			}
		})
	}
}
