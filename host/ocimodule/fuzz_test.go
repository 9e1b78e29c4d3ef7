package ocimodule_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"

	"github.com/metal-ccm/cloud-provider-equinix-metal/host/config"
	"github.com/metal-ccm/cloud-provider-equinix-metal/host/ocimodule"
)

// offline is a transport that reaches no registry: Fetch fails at its first
// request, after parsing the reference, without a retry or a wait.
type offline struct{}

var errOffline = errors.New("offline")

func (offline) RoundTrip(*http.Request) (*http.Response, error) { return nil, errOffline }

// FuzzModuleReference fuzzes the module reference of the loadbalancer
// setting (what follows wasm+oci://) through its two parsers: the config's
// (config.ParseLoadBalancer, at start, where a mistake is a one-line error
// naming the setting) and the Fetcher's (go-containerregistry's, when the
// module is pulled). Nothing panics; a reference the config accepts is one
// the Fetcher parses, pinned by the same digest, so a mistake is never
// found only when the CCM pulls; and its canonical form parses back to the
// same setting.
func FuzzModuleReference(f *testing.F) {
	digest := "sha256:" + strings.Repeat("0123456789abcdef", 4)
	for _, s := range []string{
		"registry.example/team/module@" + digest,
		"registry.example:5000/team/module@" + digest + "?namespace=bird",
		"127.0.0.1:5000/m@" + strings.ToUpper(digest[7:]),
		"registry.example/team/module:v1",
		"registry.example/team/module:v1@" + digest,
		"registry.example/Team/Module@" + digest,
		"registry.example/team//module@" + digest,
		"registry.example/team/module@sha256:abc",
		"registry.example/team/module@sha512:" + strings.Repeat("ab", 64),
		"user:pass@registry.example/m@" + digest,
		"[::1]:5000/m@" + digest,
		"registry.example/m@" + digest + "?sha256=" + digest[7:],
		"registry.example/m@" + digest + "#frag",
		"registry.example",
		"/m@" + digest,
		"",
	} {
		f.Add(s)
	}
	fetcher := &ocimodule.Fetcher{Transport: offline{}, Keychain: authn.NewMultiKeychain()}
	f.Fuzz(func(t *testing.T, ref string) {
		raw := "wasm+oci://" + ref
		lb, err := config.ParseLoadBalancer(raw)
		if err != nil {
			if strings.ContainsAny(err.Error(), "\n\r") {
				t.Fatalf("%q: the error spans lines: %q", raw, err)
			}
			return
		}
		if lb.Kind != config.LBWasm || lb.OCIRef == "" || lb.Path != "" || lb.SHA256 != "" {
			t.Fatalf("%q parses to %#v, want a wasm module by OCI reference", raw, lb)
		}
		d, err := name.NewDigest(lb.OCIRef)
		if err != nil {
			t.Fatalf("%q is accepted as %q, which the Fetcher refuses: %v", raw, lb.OCIRef, err)
		}
		if want := lb.OCIRef[strings.LastIndex(lb.OCIRef, "@")+1:]; d.DigestStr() != want {
			t.Fatalf("%q: the Fetcher pins %s, the config %s", raw, d.DigestStr(), want)
		}
		// The Fetcher's own entry point gets past the reference too: it
		// fails at the (offline) registry, not at parsing.
		if _, _, err := fetcher.Fetch(context.Background(), lb.OCIRef); !errors.Is(err, errOffline) {
			t.Fatalf("Fetch(%q) = %v, want the offline transport's error", lb.OCIRef, err)
		}
		again, err := config.ParseLoadBalancer(lb.String())
		if err != nil || again.OCIRef != lb.OCIRef || len(again.Options) != len(lb.Options) {
			t.Fatalf("%q -> %q -> %#v, %v", raw, lb.String(), again, err)
		}
		for k, v := range lb.Options {
			if again.Options[k] != v {
				t.Fatalf("%q -> %q: option %q is %q, was %q", raw, lb.String(), k, again.Options[k], v)
			}
		}
	})
}
