package metal

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestReachability: failed calls (no answer, 5xx) make the API unreachable
// only after UnreachableAfter of nothing but failures; any answer below 500
// ends it; a rejected key and a caller's own cancellation say nothing.
func TestReachability(t *testing.T) {
	now := time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC)
	r := newReachState()
	r.now = func() time.Time { return now }
	ctx := context.Background()
	answer := func(code int) *http.Response { return &http.Response{StatusCode: code, Status: http.StatusText(code)} }
	reset := errors.New("read: connection reset by peer")
	steps := []struct {
		after  time.Duration
		resp   *http.Response
		err    error
		ctx    context.Context
		wantOK bool
		reason string
	}{
		{0, answer(200), nil, ctx, true, ""},
		{time.Second, nil, reset, ctx, true, ""},
		{10 * time.Second, answer(503), nil, ctx, true, ""},
		{UnreachableAfter, nil, reset, ctx, false, "has not answered since 2026-01-01T10:00:01Z (3 calls failed; the last: read: connection reset by peer)"},
		{time.Second, nil, errKeyRejected, ctx, false, "(3 calls failed"},
		{time.Second, nil, context.Canceled, canceled(), false, "(3 calls failed"},
		{time.Second, answer(404), nil, ctx, true, ""},
		{time.Second, answer(500), nil, ctx, true, ""},
	}
	for i, s := range steps {
		now = now.Add(s.after)
		r.observe(s.ctx, s.resp, s.err)
		ok, why := r.status()
		if ok != s.wantOK || !strings.Contains(why, s.reason) {
			t.Errorf("step %d: status %v %q, want %v %q", i, ok, why, s.wantOK, s.reason)
		}
	}
}

func canceled() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return ctx
}
