package lbmodule_test

import (
	"math/rand/v2"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/metal-ccm/cloud-provider-equinix-metal/sdk/kubenames"
)

// sdk/kubenames re-implements apimachinery's name, label and selector
// checks so that the SDK module needs no k8s.io; these tests hold the copy
// to the original (accept exactly what apimachinery accepts).

var nameSamples = []string{
	"", "a", "A", "-", "a-", "-a", "a-b", "a.b", "a..b", ".a", "a.", "a_b", "_a", "a/b", "/b", "a/", "a//b", "a/b/c",
	"example.com/x", "Example.com/x", "example.com/X_y.z", "exa_mple.com/x", "1", "1a", "a1", "in", "notin",
	strings.Repeat("a", 63), strings.Repeat("a", 64), strings.Repeat("a", 253), strings.Repeat("a", 254),
	strings.Repeat("a.", 126) + "a", strings.Repeat("a", 63) + "." + strings.Repeat("b", 63),
	strings.Repeat("a", 250) + "/" + "x", "example.com/" + strings.Repeat("x", 64), "a b", "a\x00", "é", "a\n",
}

func checkNames(t *testing.T, s string) {
	t.Helper()
	for _, c := range []struct {
		name string
		ours error
		k8s  []string
	}{
		{"DNS1123Label", kubenames.ValidateDNS1123Label(s), validation.IsDNS1123Label(s)},
		{"DNS1123Subdomain", kubenames.ValidateDNS1123Subdomain(s), validation.IsDNS1123Subdomain(s)},
		{"QualifiedName", kubenames.ValidateQualifiedName(s), validation.IsQualifiedName(s)},
		{"LabelValue", kubenames.ValidateLabelValue(s), validation.IsValidLabelValue(s)},
	} {
		if (c.ours == nil) != (len(c.k8s) == 0) {
			t.Errorf("%s(%q): kubenames says %v, apimachinery says %v", c.name, s, c.ours, c.k8s)
		}
	}
}

func checkSelector(t *testing.T, s string) {
	t.Helper()
	_, k8s := labels.Parse(s)
	if ours := kubenames.ValidateSelector(s); (ours == nil) != (k8s == nil) {
		t.Errorf("ValidateSelector(%q): kubenames says %v, apimachinery says %v", s, ours, k8s)
	}
}

func TestKubenamesMatchesApimachinery(t *testing.T) {
	for _, s := range nameSamples {
		checkNames(t, s)
	}
}

var selectorSamples = []string{
	"", " ", "a", "!a", "! a", "a,b", "a,", ",a", "a,,b", "a=b", "a==b", "a!=b", "a=", "a==", "a!=", "a=,b", "a = b ",
	"a=b=c", "a in (b)", "a in (b,c)", "a in ()", "a in (,)", "a in (b,)", "a in (,b)", "a in (b,,c)", "a in b", "a in (b",
	"a notin (b)", "a notin ()", "in in (in)", "notin", "a in (in,notin)", "a = in", "a>1", "a<1", "a>b", "a>-1", "a>+1",
	"a>01", "a > 1", "a>", "a in (b c)", "!a=b", "!a,b", "!!a", "a!", "a(", "a)", "(a)", "a=(b)", "a==b,c!=d,e in (f),!g,h",
	"example.com/a=b", "a/b/c=d", "a=b c", "a=b\x00c", "a\x00b", "a \x00b", "a=\x00b", "a\x00=b", "\x00", "a,\x00",
	"a\tin\n(b)", "a=" + strings.Repeat("b", 64), "a>9223372036854775808", "a<9223372036854775807",
}

func TestKubenamesSelectorMatchesApimachinery(t *testing.T) {
	for _, s := range selectorSamples {
		checkSelector(t, s)
	}
	// Random selectors from the grammar's pieces reach the corner cases a
	// table misses; the seed is fixed so that a failure reproduces.
	pieces := []string{"a", "b", "x.y/z", "in", "notin", "1", "-1", "", " ", "!", "=", "==", "!=", ">", "<", "(", ")", ",", "\x00", "_", "-", "."}
	r := rand.New(rand.NewPCG(1, 2))
	for range 20000 {
		var b strings.Builder
		for range r.IntN(8) {
			b.WriteString(pieces[r.IntN(len(pieces))])
		}
		checkSelector(t, b.String())
		checkNames(t, b.String())
	}
}

func FuzzKubenamesSelector(f *testing.F) {
	for _, s := range selectorSamples {
		f.Add(s)
	}
	f.Fuzz(checkSelector)
}

func FuzzKubenamesNames(f *testing.F) {
	for _, s := range nameSamples {
		f.Add(s)
	}
	f.Fuzz(checkNames)
}
