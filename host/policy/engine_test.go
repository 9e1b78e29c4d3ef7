package policy

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/metal-ccm/cloud-provider-equinix-metal/host/location"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/sets"
)

func TestBuiltinPlacement(t *testing.T) {
	e := mustLoad(t, "", Options{})
	both := map[string]string{
		"metal.equinix.com/eip-metro":    "ny",
		"metal.equinix.com/eip-facility": "ny5",
	}
	tests := []struct {
		name     string
		config   PlacementConfig
		service  Service
		want     location.Location
		wantDeny []string // substrings of the one deny message
	}{
		{"global facility first", PlacementConfig{Facility: "da11", Metro: "da"}, serviceWith(both), location.Location{Facility: "da11"}, nil},
		{"global metro second", PlacementConfig{Metro: "da"}, serviceWith(both), location.Location{Metro: "da"}, nil},
		{"facility annotation third", PlacementConfig{}, serviceWith(both), location.Location{Facility: "ny5"}, nil},
		{"metro annotation fourth", PlacementConfig{}, serviceWith(map[string]string{"metal.equinix.com/eip-metro": "sv"}), location.Location{Metro: "sv"}, nil},
		{"empty annotation ignored", PlacementConfig{}, serviceWith(map[string]string{"metal.equinix.com/eip-facility": "", "metal.equinix.com/eip-metro": "sv"}), location.Location{Metro: "sv"}, nil},
		{"nothing set", PlacementConfig{}, Service{Namespace: "shop", Name: "web"}, location.Location{},
			[]string{"Service shop/web", "METAL_METRO_NAME", "--metal-facility", "metal.equinix.com/eip-metro=<metro>", "metal.equinix.com/eip-facility=<facility>"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := tt.config
			cfg.AnnotationEIPMetro, cfg.AnnotationEIPFacility = defaultConfig.AnnotationEIPMetro, defaultConfig.AnnotationEIPFacility
			got, err := e.Placement(context.Background(), PlacementInput{Service: tt.service, Config: cfg})
			if tt.wantDeny == nil {
				if err != nil || got != tt.want {
					t.Fatalf("Placement = %+v, %v; want %+v", got, err, tt.want)
				}
				return
			}
			var deny *denyError
			if !errors.As(err, &deny) || !errors.Is(err, errDenied) {
				t.Fatalf("Placement = %+v, %v; want a *DenyError", got, err)
			}
			if len(deny.Messages) != 1 || deny.Rule != "data.equinix.eip.deny" || deny.Source != "built-in" {
				t.Errorf("DenyError = %+v", deny)
			}
			for _, s := range tt.wantDeny {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q lacks %q", err, s)
				}
			}
			checkOneLine(t, err)
		})
	}
}

// TestBuiltinSelectionMatchesKubernetes checks the Rego label-selector
// against the Kubernetes implementation it reproduces, over every
// combination of a few labels, so that a node gets BGP exactly when the
// upstream CCM's labels.Selector.Matches would have said so.
func TestBuiltinSelectionMatchesKubernetes(t *testing.T) {
	var nodes []Node
	for _, bgp := range []string{"yes", "no", "-"} {
		for _, zone := range []string{"da11", "ny5", "-"} {
			for _, gpu := range []string{"", "-"} {
				for _, rack := range []string{"1", "5", "12", "007", "-3", "+4", "x", "1.5", "-"} {
					l := map[string]string{}
					for k, v := range map[string]string{"bgp": bgp, "zone": zone, "gpu": gpu, "rack": rack} {
						if v != "-" {
							l[k] = v
						}
					}
					nodes = append(nodes, Node{Name: fmt.Sprintf("n%d", len(nodes)), Labels: l})
				}
			}
		}
	}
	nodes = append(nodes, Node{Name: "no-labels"})
	e := mustLoad(t, "", Options{})
	for _, selector := range []string{
		"", "bgp=yes", "bgp==yes", "bgp!=yes", "zone in (da11,ny5)", "zone notin (da11)",
		"gpu", "!gpu", "rack>3", "rack<5", "rack>0", "bgp=yes,!gpu,rack>1", "zone in (da11),zone notin (ny5),bgp",
		"zone=", "zone!=",
	} {
		t.Run(selector, func(t *testing.T) {
			sel, err := labels.Parse(selector)
			if err != nil {
				t.Fatal(err)
			}
			want := sets.New[string]()
			for _, n := range nodes {
				if sel.Matches(labels.Set(n.Labels)) {
					want.Insert(n.Name)
				}
			}
			reqs, err := ParseSelector(selector)
			if err != nil {
				t.Fatal(err)
			}
			got, err := e.SelectNodes(context.Background(), SelectionInput{Nodes: nodes, BGPNodeSelector: reqs})
			if err != nil {
				t.Fatal(err)
			}
			if !got.Equal(want) {
				t.Errorf("policy selected %d nodes, Kubernetes %d; only policy: %v; only Kubernetes: %v",
					got.Len(), want.Len(), sets.List(got.Difference(want)), sets.List(want.Difference(got)))
			}
		})
	}
}

func TestParseSelector(t *testing.T) {
	got, err := ParseSelector("b in (y,x),a,!c,d>3")
	if err != nil {
		t.Fatal(err)
	}
	want := []Requirement{
		{Key: "a", Operator: "exists", Values: []string{}},
		{Key: "b", Operator: "in", Values: []string{"x", "y"}},
		{Key: "c", Operator: "!", Values: []string{}},
		{Key: "d", Operator: "gt", Values: []string{"3"}},
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("ParseSelector = %+v, want %+v", got, want)
	}
	if got, err := ParseSelector(""); err != nil || len(got) != 0 {
		t.Errorf(`ParseSelector("") = %v, %v; want no requirements`, got, err)
	}
	_, err = ParseSelector("a in (")
	if err == nil || !strings.Contains(err.Error(), "bgpNodeSelector") {
		t.Errorf("ParseSelector of a bad selector: %v", err)
	}
}

func TestFromKubernetes(t *testing.T) {
	n := NodeFromKubernetes(&corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "w1", Labels: map[string]string{labelMetro: "da", labelFacility: "da11", "x": "y"}},
		Spec:       corev1.NodeSpec{ProviderID: "equinixmetal://abc"},
	})
	if n.Name != "w1" || n.Metro != "da" || n.Facility != "da11" || n.ProviderID != "equinixmetal://abc" || n.Labels["x"] != "y" {
		t.Errorf("NodeFromKubernetes = %+v", n)
	}
	s := ServiceFromKubernetes(&corev1.Service{ObjectMeta: metav1.ObjectMeta{
		Namespace: "shop", Name: "web", Labels: map[string]string{"a": "b"}, Annotations: map[string]string{"c": "d"}}})
	if s.Namespace != "shop" || s.Name != "web" || s.Labels["a"] != "b" || s.Annotations["c"] != "d" {
		t.Errorf("ServiceFromKubernetes = %+v", s)
	}
}

// TestLoadErrors covers policies that must not load, each with a one-line
// message naming what to fix.
func TestLoadErrors(t *testing.T) {
	eip := func(body string) map[string]string {
		return map[string]string{"eip.rego": "package equinix.eip\n\n" + body + "\n"}
	}
	tests := []struct {
		name    string
		files   map[string]string // changes to the defaults
		want    []string
		plainFS bool // dir holds exactly files, no defaults
	}{
		{name: "syntax error", files: eip(`placement := {"metro": `), want: []string{"do not load", "eip.rego:", "rego_parse_error"}},
		{name: "rego v0 syntax", files: eip(`placement = {"metro": "da"} { true }`), want: []string{"do not load", "rego_parse_error"}},
		{name: "http.send", files: eip(`placement := {"metro": http.send({"method": "GET", "url": "http://example.com"}).body}`),
			want: []string{"do not compile", "undefined function http.send", "http.send is not available to CCM policies: network, clock and random builtins are disabled"}},
		{name: "time.now_ns", files: eip(`placement := {"metro": sprintf("%d", [time.now_ns()])}`), want: []string{"undefined function time.now_ns", "time.now_ns is not available", "opa check --strict --capabilities opa-capabilities.json"}},
		{name: "rand.intn", files: eip(`placement := {"metro": sprintf("%d", [rand.intn("x", 3)])}`), want: []string{"undefined function rand.intn"}},
		{name: "net.lookup_ip_addr", files: eip(`placement := {"metro": x} if { some x in net.lookup_ip_addr("example.com") }`), want: []string{"undefined function net.lookup_ip_addr"}},
		{name: "opa.runtime", files: eip(`placement := {"metro": opa.runtime().env.METRO}`), want: []string{"undefined function opa.runtime"}},
		{name: "uuid.rfc4122", files: eip(`placement := {"metro": uuid.rfc4122("x")}`), want: []string{"undefined function uuid.rfc4122"}},
		{name: "placement missing", files: map[string]string{"eip.rego": ""},
			want: []string{"define no rule data.equinix.eip.placement", "package equinix.eip", "policies/eip.rego"}},
		{name: "package typo", files: map[string]string{"eip.rego": "package equinix.epi\n\nplacement := {\"metro\": \"da\"}\n"},
			want: []string{"define no rule data.equinix.eip.placement"}},
		{name: "selection missing", files: map[string]string{"bgp.rego": ""},
			want: []string{"define no rule data.equinix.bgp.selected_nodes", "policies/bgp.rego"}},
		{name: "placement is a function", files: eip(`placement(x) := {"metro": x}`), want: []string{"data.equinix.eip.placement at ", "eip.rego:3 is a function"}},
		{name: "bad data file", files: map[string]string{"settings.json": `{"a": `}, want: []string{"do not load", "settings.json"}},
		{name: "library missing", files: map[string]string{"labelselector.rego": ""}, want: []string{"do not compile", "bgp.rego:"}},
		{name: "no policy files", plainFS: true, files: map[string]string{"README.md": "hi"}, want: []string{"no .rego file found", "--metal-policy-dir"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			files := tt.files
			if !tt.plainFS {
				files = with(t, tt.files)
			}
			dir := plainDir(t, files)
			_, err := Load(context.Background(), dir, Options{})
			if err == nil {
				t.Fatal("Load succeeded; want an error")
			}
			checkOneLine(t, err)
			for _, s := range append(tt.want, dir) {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q lacks %q", err, s)
				}
			}
		})
	}

	t.Run("missing directory", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "nope")
		_, err := Load(context.Background(), dir, Options{})
		if err == nil || !strings.Contains(err.Error(), "cannot be read") || !strings.Contains(err.Error(), "unset --metal-policy-dir") {
			t.Errorf("Load = %v", err)
		}
	})
	t.Run("file instead of directory", func(t *testing.T) {
		dir := plainDir(t, map[string]string{"eip.rego": "package x"})
		_, err := Load(context.Background(), filepath.Join(dir, "eip.rego"), Options{})
		if err == nil || !strings.Contains(err.Error(), "is a file") {
			t.Errorf("Load = %v", err)
		}
	})
}

// TestLoadSkips checks what a policy directory may hold besides policies:
// tests, hidden files, other files; and that data files are loaded.
func TestLoadSkips(t *testing.T) {
	dir := plainDir(t, with(t, map[string]string{
		"broken_test.rego": "this is not rego",
		".hidden.rego":     "neither is this",
		"README.md":        "# notes",
		"eip.rego":         "package equinix.eip\n\nplacement := {\"metro\": data.site.metro}\n",
		"site/config.yaml": "metro: am\n",
	}))
	e := mustLoad(t, dir, Options{})
	got, err := e.Placement(context.Background(), PlacementInput{Service: serviceWith(nil), Config: defaultConfig})
	if err != nil || got != (location.Location{Metro: "am"}) {
		t.Errorf("Placement = %+v, %v; want metro am from site/config.yaml", got, err)
	}
	if e.Source() != "in "+dir || len(e.Digest()) != 64 {
		t.Errorf("Source = %q, Digest = %q", e.Source(), e.Digest())
	}
}

// TestPlacementErrors covers custom placement policies whose decision is
// unusable: each is an error of the right kind, never a default.
func TestPlacementErrors(t *testing.T) {
	tests := []struct {
		name     string
		eip      string
		kind     error
		want     []string
		denyMsgs []string
		timeout  time.Duration
	}{
		{name: "undefined", eip: `placement := {"metro": "da"} if input.service.name == "other"`, kind: errUndefined,
			want: []string{"gave no decision for Service shop/web", "data.equinix.eip.placement is undefined", `{"metro": "<metro>"}`}},
		{name: "string", eip: `placement := "da"`, kind: ErrInvalidDecision, want: []string{`data.equinix.eip.placement = "da"`, `it must be {"metro": "<metro>"} or {"facility": "<facility>"}`}},
		{name: "number", eip: `placement := {"metro": 5}`, kind: ErrInvalidDecision, want: []string{`{"metro":5}`, "non-empty string"}},
		{name: "empty", eip: `placement := {"metro": ""}`, kind: ErrInvalidDecision, want: []string{"non-empty string"}},
		{name: "both keys", eip: `placement := {"metro": "da", "facility": "da11"}`, kind: ErrInvalidDecision, want: []string{`it must be`}},
		{name: "key typo", eip: `placement := {"Metro": "da"}`, kind: ErrInvalidDecision, want: []string{`{"Metro":"da"}`}},
		{name: "conflicting rules", eip: "placement := {\"metro\": \"da\"}\n\nplacement := {\"metro\": input.service.name}",
			kind: ErrEvaluation, want: []string{"failed for Service shop/web", "eip.rego:", "opa test"}},
		{name: "builtin error", eip: `placement := {"metro": sprintf("%d", [to_number(input.service.name)])}`,
			kind: ErrEvaluation, want: []string{"failed for Service shop/web", "to_number"}},
		{name: "deny wins over placement", eip: "placement := {\"metro\": \"da\"}\n\ndeny contains \"b: no\"\n\ndeny contains \"a: never\"",
			kind: errDenied, denyMsgs: []string{"a: never", "b: no"}, want: []string{"EIP placement policy (in ", ") denied Service shop/web: a: never; b: no"}},
		{name: "deny object message", eip: "placement := {\"metro\": \"da\"}\n\ndeny contains {\"msg\": \"no\"}",
			kind: errDenied, denyMsgs: []string{`{"msg":"no"}`}},
		{name: "deny not a set", eip: "placement := {\"metro\": \"da\"}\n\ndeny := \"no\"", kind: ErrInvalidDecision,
			want: []string{"invalid data.equinix.eip.deny", "set of messages"}},
		{name: "timeout", timeout: 50 * time.Millisecond, kind: ErrTimeout,
			eip:  "placement := {\"metro\": \"da\"} if {\n\tsome i in numbers.range(1, 5000)\n\tsome j in numbers.range(1, 5000)\n\ti * j < 0\n}",
			want: []string{"did not finish within 50ms", "opa bench"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := plainDir(t, with(t, map[string]string{"eip.rego": "package equinix.eip\n\n" + tt.eip + "\n"}))
			e := mustLoad(t, dir, Options{Timeout: tt.timeout})
			before := counters(decisionPlacement)
			got, err := e.Placement(context.Background(), PlacementInput{Service: serviceWith(nil), Config: defaultConfig})
			if err == nil {
				t.Fatalf("Placement = %+v; want an error", got)
			}
			if !errors.Is(err, tt.kind) {
				t.Errorf("error %q is not %v", err, tt.kind)
			}
			checkOneLine(t, err)
			for _, s := range tt.want {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q lacks %q", err, s)
				}
			}
			var deny *denyError
			if errors.As(err, &deny) && !slices.Equal(deny.Messages, tt.denyMsgs) {
				t.Errorf("deny messages = %q, want %q", deny.Messages, tt.denyMsgs)
			}
			after := counters(decisionPlacement)
			wantDelta := metricCounts{decisions: 1}
			if tt.kind == errDenied {
				wantDelta.denials = 1
			} else {
				wantDelta.errors = map[string]float64{errorReason(tt.kind): 1}
			}
			if d := after.minus(before); !d.equal(wantDelta) {
				t.Errorf("metrics changed by %+v, want %+v", d, wantDelta)
			}
		})
	}

	t.Run("cancelled context", func(t *testing.T) {
		e := mustLoad(t, "", Options{})
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		_, err := e.Placement(ctx, PlacementInput{Service: serviceWith(nil), Config: defaultConfig})
		if !errors.Is(err, ErrEvaluation) || !errors.Is(err, context.Canceled) {
			t.Errorf("Placement with a cancelled context = %v", err)
		}
	})
}

func TestSelectionErrors(t *testing.T) {
	nodes := []Node{{Name: "a"}, {Name: "b"}}
	tests := []struct {
		name string
		bgp  string
		kind error
		want []string
	}{
		{name: "undefined", bgp: `selected_nodes := {"a"} if input.nothing`, kind: errUndefined,
			want: []string{"gave no decision for the selection of 2 nodes", "data.equinix.bgp.selected_nodes is undefined", "set of node names"}},
		{name: "not a set", bgp: `selected_nodes := "a"`, kind: ErrInvalidDecision, want: []string{`data.equinix.bgp.selected_nodes = "a"`, "set of node names"}},
		{name: "not strings", bgp: `selected_nodes := {1}`, kind: ErrInvalidDecision, want: []string{"selected 1, which is not the name of a node"}},
		{name: "unknown node", bgp: `selected_nodes := {"a", "ghost"}`, kind: ErrInvalidDecision, want: []string{`selected "ghost", which is not the name of a node in input.nodes`}},
		{name: "deny", bgp: "selected_nodes := {\"a\"}\n\ndeny contains \"maintenance\"", kind: errDenied, want: []string{"BGP selection policy (in ", "denied the selection of 2 nodes: maintenance"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := plainDir(t, with(t, map[string]string{"bgp.rego": "package equinix.bgp\n\n" + tt.bgp + "\n"}))
			e := mustLoad(t, dir, Options{})
			before := counters(decisionSelection)
			got, err := e.SelectNodes(context.Background(), SelectionInput{Nodes: nodes})
			if err == nil {
				t.Fatalf("SelectNodes = %v; want an error", got)
			}
			if !errors.Is(err, tt.kind) {
				t.Errorf("error %q is not %v", err, tt.kind)
			}
			checkOneLine(t, err)
			for _, s := range tt.want {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q lacks %q", err, s)
				}
			}
			if d := counters(decisionSelection).minus(before); d.decisions != 1 || d.denials+sum(d.errors) != 1 {
				t.Errorf("metrics changed by %+v; want one decision and one denial or error", d)
			}
		})
	}

	t.Run("array and empty set are decisions", func(t *testing.T) {
		for bgp, want := range map[string][]string{
			`selected_nodes := ["b", "a", "b"]`: {"a", "b"},
			`selected_nodes := set()`:           {},
		} {
			dir := plainDir(t, with(t, map[string]string{"bgp.rego": "package equinix.bgp\n\n" + bgp + "\n"}))
			got, err := mustLoad(t, dir, Options{}).SelectNodes(context.Background(), SelectionInput{Nodes: nodes})
			if err != nil || !got.Equal(sets.New(want...)) {
				t.Errorf("%s: SelectNodes = %v, %v; want %v", bgp, sets.List(got), err, want)
			}
		}
	})
}

// TestExamples mounts each example as its README says (the default files
// it does not replace, plus its own) and checks one decision through the
// engine, as the CCM will make it.
func TestExamples(t *testing.T) {
	load := func(t *testing.T, example string) *Engine {
		dir := filepath.Join("..", "..", "examples", "policies", example)
		entries, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		files := defaultFiles(t)
		for _, e := range entries {
			b, err := os.ReadFile(filepath.Join(dir, e.Name()))
			if err != nil {
				t.Fatal(err)
			}
			files[e.Name()] = string(b)
		}
		return mustLoad(t, newConfigMapDir(t, files).dir, Options{})
	}
	nodes := []Node{
		{Name: "cp", Metro: "sv", Labels: map[string]string{"node-role.kubernetes.io/control-plane": ""}},
		{Name: "w1", Metro: "da", Labels: map[string]string{"pool": "edge"}},
		{Name: "w2", Metro: "da", Labels: map[string]string{"pool": "edge"}},
		{Name: "w3", Metro: "ny", Labels: map[string]string{"pool": "batch"}},
	}

	t.Run("eip-majority-metro", func(t *testing.T) {
		e := load(t, "eip-majority-metro")
		got, err := e.Placement(context.Background(), PlacementInput{Service: serviceWith(nil), Config: defaultConfig, Nodes: nodes})
		if err != nil || got != (location.Location{Metro: "da"}) {
			t.Errorf("Placement = %+v, %v; want metro da", got, err)
		}
		edge, _ := ParseSelector("pool=batch")
		got, err = e.Placement(context.Background(), PlacementInput{Service: serviceWith(nil), Config: defaultConfig, Nodes: nodes, BGPNodeSelector: edge})
		if err != nil || got != (location.Location{Metro: "ny"}) {
			t.Errorf("Placement with selector pool=batch = %+v, %v; want metro ny", got, err)
		}
	})
	t.Run("bgp-no-control-plane", func(t *testing.T) {
		got, err := load(t, "bgp-no-control-plane").SelectNodes(context.Background(), SelectionInput{Nodes: nodes})
		if err != nil || !got.Equal(sets.New("w1", "w2", "w3")) {
			t.Errorf("SelectNodes = %v, %v; want the workers", sets.List(got), err)
		}
	})
	t.Run("eip-refuse-namespaces", func(t *testing.T) {
		e := load(t, "eip-refuse-namespaces")
		cfg := defaultConfig
		cfg.Metro = "da"
		_, err := e.Placement(context.Background(), PlacementInput{Service: Service{Namespace: "sandbox", Name: "x"}, Config: cfg})
		if !errors.Is(err, errDenied) || !strings.Contains(err.Error(), `namespace "sandbox"`) {
			t.Errorf("Placement in sandbox = %v; want denied", err)
		}
		got, err := e.Placement(context.Background(), PlacementInput{Service: serviceWith(nil), Config: cfg})
		if err != nil || got != (location.Location{Metro: "da"}) {
			t.Errorf("Placement in shop = %+v, %v; want metro da", got, err)
		}
	})
}

// TestNodeCacheNeverStale changes nodes between decisions in every way a
// caller can (in place, reordered, removed, duplicated): each decision must
// see the nodes as passed, never the cached AST of an earlier call.
func TestNodeCacheNeverStale(t *testing.T) {
	e := mustLoad(t, "", Options{})
	reqs, err := ParseSelector("bgp=yes")
	if err != nil {
		t.Fatal(err)
	}
	labelsA := map[string]string{"bgp": "yes"}
	nodes := []Node{{Name: "a", Labels: labelsA}, {Name: "b", Labels: map[string]string{"bgp": "no"}}}
	steps := []struct {
		name   string
		change func()
		want   []string
	}{
		{"first", func() {}, []string{"a"}},
		{"same again", func() {}, []string{"a"}},
		{"label changed in place", func() { labelsA["bgp"] = "no" }, nil},
		{"other node changed", func() { nodes[1] = Node{Name: "b", Labels: map[string]string{"bgp": "yes"}} }, []string{"b"}},
		{"reordered", func() { nodes[0], nodes[1] = nodes[1], nodes[0] }, []string{"b"}},
		{"node added", func() { nodes = append(nodes, Node{Name: "c", Labels: map[string]string{"bgp": "yes"}}) }, []string{"b", "c"}},
		{"duplicate name", func() { nodes = append(nodes, Node{Name: "c", Labels: map[string]string{"bgp": "no"}}) }, []string{"b", "c"}},
		{"node removed", func() { nodes = nodes[1:2] }, nil},
	}
	for _, s := range steps {
		s.change()
		got, err := e.SelectNodes(context.Background(), SelectionInput{Nodes: nodes, BGPNodeSelector: reqs})
		if err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		if !got.Equal(sets.New(s.want...)) {
			t.Errorf("%s: selected %v, want %v", s.name, sets.List(got), s.want)
		}
	}
}
