package redact

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/go-logr/logr"
	"k8s.io/klog/v2/textlogger"
)

const (
	pass = "DoNotPrint1234"
	key  = "fake-api-key-0123456789abcdef"
)

func newSet() *Set {
	s := &Set{}
	s.Add(pass, key, "", "short")
	return s
}

func TestString(t *testing.T) {
	b64 := base64.StdEncoding.EncodeToString([]byte(pass))
	// The password inside a longer base64 text, at each alignment.
	embedded := func(prefix string) string {
		return base64.StdEncoding.EncodeToString([]byte(prefix + pass + "-and-more"))
	}
	for _, tc := range []struct{ name, in string }{
		{"plain", "password: " + pass},
		{"api key in a header dump", "X-Auth-Token: " + key},
		{"base64, as in a node annotation", `"metal.equinix.com/bgp-peers-0-bgp-pass":"` + b64 + `"`},
		{"base64 without padding", strings.TrimRight(b64, "=")},
		{"url-safe base64", base64.URLEncoding.EncodeToString([]byte(pass))},
		{"base64 of the annotation's base64", base64.StdEncoding.EncodeToString([]byte(b64))},
		{"inside longer base64, offset 0", embedded("")},
		{"inside longer base64, offset 1", embedded("x")},
		{"inside longer base64, offset 2", embedded("xy")},
		{"hex", hex.EncodeToString([]byte(pass))},
		{"url query", "token=" + key},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newSet()
			out := s.String(tc.in)
			if out == tc.in || !s.Contains(tc.in) {
				t.Fatalf("not redacted: %q", out)
			}
			for _, secret := range []string{pass, key, b64} {
				if strings.Contains(out, secret) {
					t.Errorf("%q still in %q", secret, out)
				}
			}
		})
	}
}

func TestStringLeavesOtherTextAlone(t *testing.T) {
	s := newSet()
	for _, in := range []string{"", "short and sweet", "GET /apis/metallb.io/v1beta2 200 OK", "00000000  01 02 03  |...|"} {
		if out := s.String(in); out != in {
			t.Errorf("%q changed to %q", in, out)
		}
	}
	if s.Len() != 2 {
		t.Errorf("Len = %d, want 2 (empty and short values are not kept)", s.Len())
	}
	if out := (&Set{}).String(pass); out != pass {
		t.Errorf("an empty set changed the text: %q", out)
	}
}

// client-go logs a protobuf body as hex.Dump; the password is split across
// the rows of the printable column there, so only decoding finds it.
func TestHexDump(t *testing.T) {
	body := append([]byte{0x6b, 0x38, 0x73, 0x00, 0x0a, 0x0c, 0x0a, 0x02}, []byte("v1/Secret\x12\x08password\x1a\x0e"+pass+" and the rest of a long protobuf body")...)
	dump := hex.Dump(body)
	if strings.Contains(dump, pass) {
		t.Fatal("fixture: the dump should split the password")
	}
	s := newSet()
	for name, line := range map[string]string{
		"text logger": `"Request Body" body=<` + "\n\t" + strings.ReplaceAll(dump, "\n", "\n\t") + " >\n",
		"json logger": func() string {
			b, _ := json.Marshal(map[string]string{"msg": "Response Body", "body": dump})
			return string(b)
		}(),
	} {
		t.Run(name, func(t *testing.T) {
			out := s.String(line)
			if out == line {
				t.Fatalf("dump not redacted:\n%s", out)
			}
			if strings.Contains(out, "pass") || strings.Contains(out, "1234") {
				t.Errorf("a part of the password survived:\n%s", out)
			}
			if !strings.Contains(out, "00000000  "+marker) {
				t.Errorf("rows should keep their offsets:\n%s", out)
			}
		})
	}
	// A dump without a secret stays.
	other := hex.Dump([]byte("\x00\x01 an ordinary protobuf body, nothing to hide here"))
	if out := s.String(other); out != other {
		t.Errorf("an innocent dump changed:\n%s", out)
	}
}

type stringer struct{}

func (stringer) String() string { return "key=" + key }

type holder struct{ Token string }

func TestSink(t *testing.T) {
	s := newSet()
	var buf bytes.Buffer
	inner := textlogger.NewLogger(textlogger.NewConfig(textlogger.Verbosity(10), textlogger.Output(&buf)))
	log := logr.New(newSink(s, inner.GetSink()))

	log.V(8).Info("Request Body", "body", []byte(`{"data":{"password":"`+base64.StdEncoding.EncodeToString([]byte(pass))+`"}}`))
	log.WithValues("token", key).Info("with values " + pass)
	log.Error(fmt.Errorf("rejected %s", key), "failed", "obj", holder{Token: key}, "s", stringer{})
	log.WithName("x").V(2).Info("ordinary", "n", 3, "err", errors.New("plain"))
	log.V(11).Info("not enabled " + pass)
	bufferSink := log.GetSink().(interface{ WriteKlogBuffer([]byte) })
	bufferSink.WriteKlogBuffer([]byte("I1124 legacy klog.Infof line " + pass + "\n"))

	out := buf.String()
	for _, secret := range encodings(pass) {
		if strings.Contains(out, secret) {
			t.Errorf("%q in output:\n%s", secret, out)
		}
	}
	if strings.Contains(out, key) {
		t.Errorf("key in output:\n%s", out)
	}
	for _, want := range []string{`"Request Body"`, `"with values [redacted]"`, `"failed" err="rejected [redacted]"`, `"ordinary" logger="x" n=3 err="plain"`, "legacy klog.Infof line [redacted]", "redact_test.go:"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "not enabled") {
		t.Errorf("verbosity not honoured:\n%s", out)
	}
}
