package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/metal-ccm/cloud-provider-equinix-metal/host/lbsnapshot"
	"github.com/metal-ccm/cloud-provider-equinix-metal/sdk"
)

// TestSampleServices runs the sample Services of examples/services through
// the host's snapshot code and this module, as the sandbox does: the plain
// Service gets the Elastic IP the CCM would have reserved, the pair with a
// sharing key and no address one Elastic IP for both, the others bring
// their own, and each pair that shares an address is one route.
// (examples/services decodes the samples strictly; here they are inputs.)
func TestSampleServices(t *testing.T) {
	files, err := filepath.Glob("../../services/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no sample Services in ../../services (%v)", err)
	}
	var req sdk.GenerateRequest
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, doc := range bytes.Split(raw, []byte("\n---\n")) {
			var svc v1.Service
			if err := yaml.Unmarshal(doc, &svc); err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			if svc.Spec.LoadBalancerIP == "" { //nolint:staticcheck // what the samples use
				// The Elastic IP the CCM would reserve: the Service's own,
				// or its sharing key's, one for all Services of the key.
				ip := "145.40.1.5"
				if lbsnapshot.SharingKey(&svc) != "" {
					ip = "145.40.1.6"
				}
				svc.Status.LoadBalancer.Ingress = []v1.LoadBalancerIngress{{IP: ip}}
			}
			// A bring-your-own address enters the module's view once the CCM
			// finds the project holds its reservation, as the samples require.
			s, ok := heldView(&svc)
			if !ok {
				t.Fatalf("%s: %s/%s has no address", f, svc.Namespace, svc.Name)
			}
			req.Services = append(req.Services, s)
		}
	}
	req.Nodes = fixtureNodes()
	lbsnapshot.SortSnapshot(&req)
	req.Options = birdOptions
	resp, err := generate(req)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Warnings) != 0 {
		t.Errorf("warnings: %q", resp.Warnings)
	}
	got := configMapData(t, resp)[ServicesKey]
	var routes []string
	for _, line := range strings.Split(got, "\n") {
		if strings.HasPrefix(line, "\troute ") {
			routes = append(routes, line)
		}
	}
	want := []string{
		"\troute 145.40.1.5/32 blackhole; # default/shop-web",
		"\troute 145.40.1.6/32 blackhole; # default/web-http, default/web-https",
		"\troute 145.40.91.10/32 blackhole; # default/byo-api",
		"\troute 145.40.91.20/32 blackhole; # default/dns-tcp, default/dns-udp",
	}
	if strings.Join(routes, "\n") != strings.Join(want, "\n") {
		t.Fatalf("routes:\n%s\nwant:\n%s", strings.Join(routes, "\n"), strings.Join(want, "\n"))
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
