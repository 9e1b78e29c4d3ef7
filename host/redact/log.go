package redact

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"

	"github.com/go-logr/logr"
	"k8s.io/klog/v2"
)

// Install puts set between klog and its output, for the rest of the
// process. Call it once, after the logging configuration has been applied
// (the cloud provider's constructor is the first code that runs then) and
// before controllers start.
//
// Two paths lead to the output, and both are covered: klog's own functions
// (klog.InfoS, klog.Infof, and every contextual logger when contextual
// logging is off) pass through a klog filter; contextual loggers
// (klog.FromContext, which client-go uses for its body dumps) use the global
// logger, which is replaced by a wrapper around it. contextual says whether
// the ContextualLogging feature is on, that is whether klog.Background is
// the configured logger itself rather than klog's forwarding one: wrapping
// the forwarding one would loop.
func Install(set *Set, contextual bool) {
	klog.SetLogFilter(filter{set})
	if !contextual {
		return
	}
	inner := klog.Background()
	wrapped := logr.New(newSink(set, inner.GetSink()))
	opts := []klog.LoggerOption{klog.ContextualLogger(true)}
	if w, ok := wrapped.GetSink().(interface{ WriteKlogBuffer([]byte) }); ok {
		opts = append(opts, klog.WriteKlogBuffer(w.WriteKlogBuffer))
	}
	klog.SetLoggerWithOptions(wrapped, opts...)
	// component-base routed log/slog (and with it the standard log package)
	// to the unwrapped logger; route it through the wrapper too.
	slog.SetDefault(slog.New(logr.ToSlogHandler(wrapped)))
}

// filter is klog's hook for its own functions.
type filter struct{ set *Set }

func (f filter) Filter(args []any) []any { return f.set.values(args) }

func (f filter) FilterF(format string, args []any) (string, []any) {
	msg := fmt.Sprintf(format, args...)
	if clean := f.set.String(msg); clean != msg {
		return "%s", []any{clean}
	}
	return format, args
}

func (f filter) FilterS(msg string, kv []any) (string, []any) {
	return f.set.String(msg), f.set.values(kv)
}

// sink wraps a logr sink and cleans the message, every value and the error
// before they reach it.
type sink struct {
	set   *Set
	inner logr.LogSink
}

func newSink(set *Set, inner logr.LogSink) logr.LogSink {
	// The wrapper adds one frame between the caller and the inner sink.
	if cd, ok := inner.(logr.CallDepthLogSink); ok {
		inner = cd.WithCallDepth(1)
	}
	s := sink{set: set, inner: inner}
	if _, ok := inner.(interface{ WriteKlogBuffer([]byte) }); ok {
		return bufferSink{s}
	}
	return s
}

// Init does not reach the inner sink: it was initialised by the logr.Logger
// it came from, with the same call depth, and sinks disagree on whether a
// second Init adds to the depth or sets it.
func (s sink) Init(logr.RuntimeInfo) {}

func (s sink) Enabled(level int) bool { return s.inner.Enabled(level) }

func (s sink) Info(level int, msg string, kv ...any) {
	s.inner.Info(level, s.set.String(msg), s.set.values(kv)...)
}

func (s sink) Error(err error, msg string, kv ...any) {
	s.inner.Error(s.set.err(err), s.set.String(msg), s.set.values(kv)...)
}

func (s sink) WithValues(kv ...any) logr.LogSink {
	return s.with(s.inner.WithValues(s.set.values(kv)...))
}

func (s sink) WithName(name string) logr.LogSink { return s.with(s.inner.WithName(name)) }

func (s sink) WithCallDepth(depth int) logr.LogSink {
	if cd, ok := s.inner.(logr.CallDepthLogSink); ok {
		return s.with(cd.WithCallDepth(depth))
	}
	return s
}

func (s sink) with(inner logr.LogSink) logr.LogSink {
	n := sink{set: s.set, inner: inner}
	if _, ok := inner.(interface{ WriteKlogBuffer([]byte) }); ok {
		return bufferSink{n}
	}
	return n
}

// bufferSink is a sink whose inner sink also takes klog's preformatted
// lines (klog.Infof and friends when a logger is set).
type bufferSink struct{ sink }

func (b bufferSink) WriteKlogBuffer(buf []byte) {
	b.inner.(interface{ WriteKlogBuffer([]byte) }).WriteKlogBuffer([]byte(b.set.String(string(buf))))
}

// values cleans the values of a key/value list (and keys, which are
// normally constants). A value is replaced by its cleaned text only when
// one of the ways a logger may print it (fmt's %+v, JSON, its error text or
// String) shows a secret; other values pass unchanged, so their formatting
// is the logger's as before.
func (s *Set) values(kv []any) []any {
	if s.current.Load() == nil || len(kv) == 0 {
		return kv
	}
	out := make([]any, len(kv))
	for i, v := range kv {
		out[i] = s.value(v)
	}
	return out
}

func (s *Set) value(v any) any {
	switch t := v.(type) {
	case nil, bool, int, int32, int64, uint, uint32, uint64, float64:
		return v
	case string:
		return s.String(t)
	case []byte:
		if c := s.String(string(t)); c != string(t) {
			return c
		}
		return v
	case error:
		return s.err(t)
	case logr.Marshaler:
		return s.value(t.MarshalLog())
	case fmt.Stringer:
		if txt := t.String(); s.Contains(txt) {
			return s.String(txt)
		}
	}
	if txt := fmt.Sprintf("%+v", v); s.Contains(txt) {
		return s.String(txt)
	}
	if b, err := json.Marshal(v); err == nil && s.Contains(string(b)) {
		return s.String(string(b))
	}
	return v
}

func (s *Set) err(err error) error {
	if err == nil {
		return nil
	}
	if msg := err.Error(); s.Contains(msg) {
		return errors.New(s.String(msg))
	}
	return err
}
