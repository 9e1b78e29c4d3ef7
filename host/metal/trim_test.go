package metal

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
)

func TestDropNeighbourRoutes(t *testing.T) {
	tests := []struct {
		name, in, want string
		wantErr        bool
	}{
		{name: "routes dropped, the rest kept",
			in:   `{"bgp_neighbors":[{"address_family":4,"md5_password":"pw","peer_ips":["169.254.255.1"],"routes_in":[{"route":"147.75.9.9/32","exact":true}],"routes_out":[]}],"meta":1}`,
			want: `{"bgp_neighbors":[{"address_family":4,"md5_password":"pw","peer_ips":["169.254.255.1"]}],"meta":1}`},
		{name: "no neighbours", in: `{"bgp_neighbors":[]}`, want: `{"bgp_neighbors":[]}`},
		{name: "no bgp_neighbors member", in: `{"other":true}`, want: `{"other":true}`},
		{name: "not JSON", in: `<html>`, wantErr: true},
		{name: "neighbours not a list", in: `{"bgp_neighbors":{}}`, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := dropNeighbourRoutes([]byte(tt.in))
			if (err != nil) != tt.wantErr {
				t.Fatalf("error %v, want error %v", err, tt.wantErr)
			}
			if !tt.wantErr && string(got) != tt.want {
				t.Errorf("got  %s\nwant %s", got, tt.want)
			}
		})
	}
}

// neighboursWithRoutes answers like the API does for a project with n
// Elastic IPs: every one of them in routes_in.
func neighboursWithRoutes(n int) http.HandlerFunc {
	routes := make([]map[string]any, n)
	for i := range routes {
		routes[i] = map[string]any{"route": fmt.Sprintf("147.75.%d.%d/32", i/256%256, i%256), "exact": true}
	}
	body := map[string]any{"bgp_neighbors": []map[string]any{{
		"address_family": 4, "customer_as": 65000, "customer_ip": "10.0.0.2", "md5_password": "not-logged",
		"peer_as": 65530, "peer_ips": []string{"169.254.255.1", "169.254.255.2"},
		"routes_in": routes, "routes_out": []any{},
	}}}
	// Encoded once, so that a benchmark measures the client alone.
	enc, err := json.Marshal(body)
	if err != nil {
		panic(err)
	}
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(enc)
	}
}

// What the CCM reads arrives; the routes, which it never reads, do not.
// A trimmer on one request leaves every other answer alone.
func TestDeviceBGPNeighborsWithoutRoutes(t *testing.T) {
	f := newFakeAPI(t)
	f.handle("GET /devices/d1/bgp/neighbors", neighboursWithRoutes(10000))
	c := f.client()
	n, err := c.DeviceBGPNeighbors(context.Background(), "d1")
	if err != nil {
		t.Fatal(err)
	}
	if len(n) != 1 || n[0].GetPeerAs() != 65530 || len(n[0].PeerIps) != 2 || n[0].GetCustomerIp() != "10.0.0.2" ||
		n[0].GetCustomerAs() != 65000 || n[0].GetMd5Password() != "not-logged" {
		t.Errorf("neighbour data lost in the trim: %+v", n)
	}
	if len(n[0].RoutesIn) != 0 || len(n[0].RoutesOut) != 0 {
		t.Errorf("%d routes in and %d out reached the SDK's decoding, want none", len(n[0].RoutesIn), len(n[0].RoutesOut))
	}
	f.handle("GET /devices/d1/bgp/sessions", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, 200, map[string]any{"bgp_sessions": []map[string]any{{"id": "s1", "address_family": "ipv4"}}})
	})
	s, err := c.DeviceBGPSessions(context.Background(), "d1")
	if err != nil || len(s) != 1 || s[0].GetId() != "s1" {
		t.Errorf("DeviceBGPSessions = %+v, %v", s, err)
	}
}

// BenchmarkDeviceBGPNeighbors10kRoutes is one neighbours read in a project
// with 10,000 Elastic IPs; B/op is what the trim saves per node and refresh.
func BenchmarkDeviceBGPNeighbors10kRoutes(b *testing.B) {
	f := newFakeAPI(b)
	f.handle("GET /devices/d1/bgp/neighbors", neighboursWithRoutes(10000))
	c := f.client()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := c.DeviceBGPNeighbors(context.Background(), "d1"); err != nil {
			b.Fatal(err)
		}
	}
}
