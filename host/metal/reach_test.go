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

// TestAnswersAgain: the hooks run when an answer ends a streak of failures
// that lasted answersAgainAfter or more, once per streak; a shorter streak,
// an answer with no streak, and what says nothing of reachability (a
// rejected key, the caller's own cancellation) run nothing. A probe is due
// only while calls fail and none was made for the idle time.
func TestAnswersAgain(t *testing.T) {
	now := time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC)
	r := newReachState()
	r.now = func() time.Time { return now }
	ran := make(chan struct{}, 10)
	r.onAnswersAgain(func() { ran <- struct{}{} })
	ctx := context.Background()
	ok := &http.Response{StatusCode: 200}
	notFound := &http.Response{StatusCode: 404}
	reset := errors.New("read: connection reset by peer")
	steps := []struct {
		name      string
		after     time.Duration
		resp      *http.Response
		err       error
		ctx       context.Context
		wantRun   bool
		probeIdle time.Duration
		wantProbe bool
	}{
		{"an answer, no streak", 0, ok, nil, ctx, false, 0, false},
		{"a failure starts a streak", time.Second, nil, reset, ctx, false, time.Second, false},
		{"no call for 3 s: a probe is due", 3 * time.Second, nil, nil, nil, false, 3 * time.Second, true},
		{"an answer 4 s into the streak", time.Second, ok, nil, ctx, false, 0, false},
		{"a new streak", time.Second, nil, reset, ctx, false, time.Second, false},
		{"the caller's own cancellation", 2 * time.Second, nil, context.Canceled, canceled(), false, 3 * time.Second, false},
		{"a rejected key", time.Second, nil, errKeyRejected, ctx, false, 3 * time.Second, true},
		{"a 503", 2 * time.Second, &http.Response{StatusCode: 503}, nil, ctx, false, time.Second, false},
		{"a 404 6 s into the streak", time.Second, notFound, nil, ctx, true, 0, false},
		{"an answer after it", time.Minute, ok, nil, ctx, false, 0, false},
	}
	for _, s := range steps {
		now = now.Add(s.after)
		if s.ctx != nil {
			r.observe(s.ctx, s.resp, s.err)
		}
		select {
		case <-ran:
			if !s.wantRun {
				t.Errorf("%s: the hooks ran", s.name)
			}
		case <-time.After(100 * time.Millisecond):
			if s.wantRun {
				t.Errorf("%s: the hooks did not run", s.name)
			}
		}
		if got := r.probeDue(s.probeIdle); got != s.wantProbe {
			t.Errorf("%s: probeDue(%s) = %v, want %v", s.name, s.probeIdle, got, s.wantProbe)
		}
	}
}
