package testenv

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
)

const crdA = `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.example.com
spec:
  group: example.com
  names: {kind: Widget, plural: widgets}
  scope: Namespaced
  versions:
  - {name: v1, served: true, storage: true, schema: {openAPIV3Schema: {type: object}}}
  - {name: v0, served: false, storage: false, schema: {openAPIV3Schema: {type: object}}}
`

const crdB = `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: gadgets.example.com
spec:
  group: example.com
  names: {kind: Gadget, plural: gadgets}
  scope: Cluster
  versions:
  - {name: v1, served: true, storage: true, schema: {openAPIV3Schema: {type: object}}}
`

func TestDecodeCRDs(t *testing.T) {
	tests := []struct {
		name      string
		in        string
		wantNames []string
		wantErr   string
	}{
		{"one", crdA, []string{"widgets.example.com"}, ""},
		{"two with empty documents", "---\n" + crdA + "---\n---\n" + crdB, []string{"widgets.example.com", "gadgets.example.com"}, ""},
		{"json", `{"apiVersion":"apiextensions.k8s.io/v1","kind":"CustomResourceDefinition","metadata":{"name":"x.example.com"}}`, []string{"x.example.com"}, ""},
		{"not a CRD", crdA + "---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\n", nil, "document 2 is v1 ConfigMap"},
		{"old CRD version", "apiVersion: apiextensions.k8s.io/v1beta1\nkind: CustomResourceDefinition\nmetadata: {name: y}\n", nil, "not an apiextensions.k8s.io/v1"},
		{"broken yaml", "apiVersion: [", nil, "document 1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			crds, err := decodeCRDs([]byte(tt.in))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want it to contain %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, c := range crds {
				names = append(names, c.Name)
			}
			if !reflect.DeepEqual(names, tt.wantNames) {
				t.Fatalf("names = %v, want %v", names, tt.wantNames)
			}
		})
	}
}

func TestReadCRDsFromFilesAndDirectories(t *testing.T) {
	dir := t.TempDir()
	write := func(name, data string) string {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	write("crds/b.yaml", crdB)
	write("crds/a.yml", crdA)
	write("crds/README.md", "not a CRD, and not read")
	single := write("single.yaml", crdA)
	write("empty/notes.txt", "x")

	crds, err := readCRDs([]string{filepath.Join(dir, "crds"), single})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, c := range crds {
		names = append(names, c.Name)
	}
	want := []string{"widgets.example.com", "gadgets.example.com", "widgets.example.com"} // a.yml, b.yaml, then the file
	if !reflect.DeepEqual(names, want) {
		t.Fatalf("names = %v, want %v", names, want)
	}

	for _, bad := range []struct{ path, wantErr string }{
		{filepath.Join(dir, "missing"), "no such file"},
		{filepath.Join(dir, "empty"), "has no .yaml, .yml or .json file"},
	} {
		if _, err := readCRDs([]string{bad.path}); err == nil || !strings.Contains(err.Error(), bad.wantErr) {
			t.Errorf("readCRDs(%s) err = %v, want %q", bad.path, err, bad.wantErr)
		}
	}
}

func TestWantedDiscovery(t *testing.T) {
	crds, err := decodeCRDs([]byte(crdA + "---\n" + crdB))
	if err != nil {
		t.Fatal(err)
	}
	got := wantedDiscovery(crds)
	for _, v := range got {
		sort.Strings(v)
	}
	want := map[string][]string{"example.com/v1": {"gadgets", "widgets"}} // v0 is not served
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("wantedDiscovery = %v, want %v", got, want)
	}
}

// The CRD bases of the pinned MetalLB are installable as they are: every
// kind MetalLB configures is there, and BGPPeer serves v1beta1 and v1beta2
// without the conversion webhook that only MetalLB's kustomize overlay adds
// (which would need a running MetalLB webhook service).
func TestMetalLBCRDBasesAreUsableAsTheyAre(t *testing.T) {
	dir, err := MetalLBCRDDir(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(dir, "go.universe.tf/metallb@") {
		t.Errorf("CRD dir %s is not in the module cache copy of %s", dir, MetalLBModule)
	}
	crds, err := readCRDs([]string{dir})
	if err != nil {
		t.Fatal(err)
	}
	byKind := map[string]*apiextensionsv1.CustomResourceDefinition{}
	for _, c := range crds {
		if c.Spec.Group != "metallb.io" {
			t.Errorf("CRD %s is in group %s, want metallb.io", c.Name, c.Spec.Group)
		}
		byKind[c.Spec.Names.Kind] = c
	}
	for _, kind := range []string{"IPAddressPool", "BGPPeer", "BGPAdvertisement", "L2Advertisement", "BFDProfile", "Community"} {
		if byKind[kind] == nil {
			t.Errorf("MetalLB CRDs lack %s", kind)
		}
	}
	peer := byKind["BGPPeer"]
	if peer == nil {
		t.FailNow()
	}
	if conv := peer.Spec.Conversion; conv != nil && conv.Strategy == apiextensionsv1.WebhookConverter {
		t.Errorf("BGPPeer CRD base asks for a conversion webhook; it cannot be installed without MetalLB running")
	}
	served := map[string]bool{}
	storage := ""
	for _, v := range peer.Spec.Versions {
		served[v.Name] = v.Served
		if v.Storage {
			storage = v.Name
		}
	}
	if !served["v1beta1"] || !served["v1beta2"] || storage != "v1beta2" {
		t.Errorf("BGPPeer versions: served %v, storage %q; want v1beta1 and v1beta2 served, v1beta2 stored", served, storage)
	}
}
