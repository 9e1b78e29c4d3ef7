package config

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
)

// Secret holds a credential (the API key, the BGP password). Every way Go
// prints a value — fmt verbs, JSON, slog, klog's structured logging — goes
// through one of the methods below, so a Secret can sit in a struct that is
// logged whole (for example at --v=10) without leaking. The only way to get
// the value is Reveal, which makes each use greppable.
//
// Keep Secrets in exported fields: fmt cannot call methods on a value it
// reaches through an unexported field, so %+v of a struct with an
// unexported Secret field prints the value in clear.
type Secret string

const redacted = "[redacted]"

// Reveal returns the credential itself. Call it only where the value leaves
// the process for its intended recipient (the HTTP header, the BGP config).
func (s Secret) Reveal() string { return string(s) }

// String reports whether a value is set without showing it.
func (s Secret) String() string {
	if s == "" {
		return ""
	}
	return redacted
}

// GoString covers %#v.
func (s Secret) GoString() string { return fmt.Sprintf("config.Secret(%q)", s.String()) }

// Format covers every other verb (%v, %+v, %s, %q, %x …), which would
// otherwise print the underlying string for some of them.
func (s Secret) Format(f fmt.State, verb rune) {
	if verb == 'v' && f.Flag('#') {
		_, _ = io.WriteString(f, s.GoString())
		return
	}
	_, _ = io.WriteString(f, s.String())
}

// MarshalJSON keeps a marshalled Config safe to print.
func (s Secret) MarshalJSON() ([]byte, error) { return json.Marshal(s.String()) }

// MarshalText covers encoders that prefer TextMarshaler (YAML, logfmt).
func (s Secret) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// LogValue covers log/slog and logr's slog bridge.
func (s Secret) LogValue() slog.Value { return slog.StringValue(s.String()) }
