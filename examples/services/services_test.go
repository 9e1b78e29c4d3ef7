package services_test

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	kjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"

	"github.com/metal-ccm/cloud-provider-equinix-metal/host/eip"
	"github.com/metal-ccm/cloud-provider-equinix-metal/host/lbsnapshot"
	"github.com/metal-ccm/cloud-provider-equinix-metal/sdk"
)

// decode splits a multi-document YAML file and decodes every document
// strictly into a v1.Service, the way the API server does: field names match
// case-sensitively, and an unknown or misspelt field (loadBalancerIp) or a
// duplicate key is an error. sigs.k8s.io/yaml's UnmarshalStrict alone is not
// enough: encoding/json matches field names case-insensitively, so it would
// accept loadBalancerIp as loadBalancerIP.
func decode(raw []byte) ([]v1.Service, error) {
	var out []v1.Service
	for i, doc := range bytes.Split(append([]byte("\n"), raw...), []byte("\n---\n")) {
		if len(bytes.TrimSpace(doc)) == 0 {
			continue
		}
		js, err := yaml.YAMLToJSONStrict(doc)
		if err != nil {
			return nil, fmt.Errorf("document %d: %w", i+1, err)
		}
		var svc v1.Service
		strict, err := kjson.UnmarshalStrict(js, &svc)
		if err != nil {
			return nil, fmt.Errorf("document %d: %w", i+1, err)
		}
		if len(strict) > 0 {
			return nil, fmt.Errorf("document %d: %w", i+1, errors.Join(strict...))
		}
		if svc.APIVersion != "v1" || svc.Kind != "Service" {
			return nil, fmt.Errorf("document %d is %s %s, want v1 Service", i+1, svc.APIVersion, svc.Kind)
		}
		out = append(out, svc)
	}
	return out, nil
}

// want is what a sample must say, in the terms the CCM reads.
type want struct {
	name, ip, metro, sharingKey string
	protocols                   []v1.Protocol
}

func TestSamples(t *testing.T) {
	cases := map[string][]want{
		"plain-metro.yaml":       {{name: "shop-web", metro: "da", protocols: []v1.Protocol{v1.ProtocolTCP}}},
		"bring-your-own-ip.yaml": {{name: "byo-api", ip: "145.40.91.10", protocols: []v1.Protocol{v1.ProtocolTCP}}},
		"shared-eip-web.yaml": {
			{name: "web-http", metro: "da", sharingKey: "web", protocols: []v1.Protocol{v1.ProtocolTCP}},
			{name: "web-https", metro: "da", sharingKey: "web", protocols: []v1.Protocol{v1.ProtocolTCP}},
		},
		"shared-ip-dns.yaml": {
			{name: "dns-tcp", ip: "145.40.91.20", sharingKey: "dns", protocols: []v1.Protocol{v1.ProtocolTCP}},
			{name: "dns-udp", ip: "145.40.91.20", sharingKey: "dns", protocols: []v1.Protocol{v1.ProtocolUDP}},
		},
	}
	files, err := filepath.Glob("*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(files)
	var names []string
	for n := range cases {
		names = append(names, n)
	}
	sort.Strings(names)
	if !reflect.DeepEqual(files, names) {
		t.Fatalf("sample files %v, but the test knows %v; add the new sample to the table", files, names)
	}

	for _, file := range files {
		t.Run(file, func(t *testing.T) {
			raw, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			svcs, err := decode(raw)
			if err != nil {
				t.Fatal(err)
			}
			wants := cases[file]
			if len(svcs) != len(wants) {
				t.Fatalf("%d Services, want %d", len(svcs), len(wants))
			}
			for i, w := range wants {
				svc := svcs[i]
				if svc.Name != w.name || svc.Namespace != "default" || svc.Spec.Type != v1.ServiceTypeLoadBalancer {
					t.Fatalf("Service %d is %s/%s of type %s, want default/%s LoadBalancer", i, svc.Namespace, svc.Name, svc.Spec.Type, w.name)
				}
				if got := svc.Spec.LoadBalancerIP; got != w.ip { //nolint:staticcheck // the sample shows the deprecated field on purpose
					t.Errorf("%s: loadBalancerIP %q, want %q", w.name, got, w.ip)
				}
				if got := svc.Annotations["metal.equinix.com/eip-metro"]; got != w.metro {
					t.Errorf("%s: metro annotation %q, want %q", w.name, got, w.metro)
				}
				var protos []v1.Protocol
				for _, p := range svc.Spec.Ports {
					protos = append(protos, p.Protocol)
				}
				if !reflect.DeepEqual(protos, w.protocols) {
					t.Errorf("%s: protocols %v, want %v", w.name, protos, w.protocols)
				}

				if got := lbsnapshot.SharingKey(&svc); got != w.sharingKey {
					t.Errorf("%s: sharing key %q, want %q", w.name, got, w.sharingKey)
				}
				if i > 0 && w.sharingKey != "" {
					if why := eip.Clash(&svcs[0], &svc); why != "" {
						t.Errorf("%s cannot share with %s: %s", w.name, svcs[0].Name, why)
					}
				}

				// What a load-balancer module will see once the Service
				// has its address: the bring-your-own ones have it from
				// the manifest, the plain one once the CCM reserved it.
				// A bring-your-own address enters the module's view once the CCM
				// finds the project holds its reservation, as the samples require.
				s, ok := heldView(&svc)
				if ok != (w.ip != "") {
					t.Fatalf("%s: in the module snapshot before the CCM assigns anything = %v, want %v", w.name, ok, w.ip != "")
				}
				if ok && (!reflect.DeepEqual(s.IPs, []string{w.ip}) || s.SharingKey != w.sharingKey) {
					t.Errorf("%s: the module sees IPs %v and sharing key %q, want [%s] and %q", w.name, s.IPs, s.SharingKey, w.ip, w.sharingKey)
				}
			}
		})
	}
}

// TestDecodeIsStrict proves the decoder refuses what a lenient one would
// take: a field in the wrong case, an unknown field, a duplicate key.
func TestDecodeIsStrict(t *testing.T) {
	for _, tc := range []struct{ name, doc, wantErr string }{
		{"wrong case", "apiVersion: v1\nkind: Service\nmetadata:\n  name: x\nspec:\n  loadBalancerIp: 1.2.3.4\n", `unknown field "spec.loadBalancerIp"`},
		{"unknown field", "apiVersion: v1\nkind: Service\nmetadata:\n  name: x\n  annotation: {}\n", `unknown field "metadata.annotation"`},
		{"duplicate key", "apiVersion: v1\nkind: Service\nmetadata:\n  name: x\n  name: y\n", "already set in map"},
		{"second document", "apiVersion: v1\nkind: Service\nmetadata:\n  name: x\n---\napiVersion: v1\nkind: ConfigMap\n", "document 2 is v1 ConfigMap, want v1 Service"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := decode([]byte(tc.doc))
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("decode error = %v, want one containing %q", err, tc.wantErr)
			}
		})
	}
}

// heldView is the module's view of svc when the project holds every
// address (lbsnapshot.Build with OwnAddressServed always true).
func heldView(svc *v1.Service) (sdk.Service, bool) {
	req := lbsnapshot.Build(lbsnapshot.Input{Services: []*v1.Service{svc}, OwnAddressServed: func(*v1.Service, string) bool { return true }})
	if len(req.Services) != 1 {
		return sdk.Service{}, false
	}
	return req.Services[0], true
}
