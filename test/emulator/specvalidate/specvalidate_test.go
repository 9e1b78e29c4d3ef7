package specvalidate_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	metalv1 "github.com/equinix/equinix-sdk-go/services/metalv1"

	"github.com/metal-ccm/cloud-provider-equinix-metal/test/emulator"
	"github.com/metal-ccm/cloud-provider-equinix-metal/test/emulator/specvalidate"
)

const dev = "d0000000-0000-4000-8000-000000000001"

// exchange performs a request against a fresh emulator and returns the
// request, its body and the response parts.
func exchange(t *testing.T, method, path, body string) (*http.Request, []byte, int, http.Header, []byte) {
	t.Helper()
	seed := emulator.DefaultSeed()
	seed.Devices = []emulator.DeviceSeed{{ID: dev, Hostname: "n0"}}
	seed.Reservations = []emulator.ReservationSeed{{Tags: []string{"t"}}}
	e := emulator.StartForTest(t, seed, emulator.Options{RandSeed: 1})
	req, err := http.NewRequest(method, e.URL()+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-Auth-Token", emulator.DefaultToken)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return req, []byte(body), resp.StatusCode, resp.Header, b
}

func load(t *testing.T, opts specvalidate.Options) *specvalidate.Validator {
	t.Helper()
	v, err := specvalidate.Load(opts)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// edit decodes a JSON object, lets f change it, and encodes it again.
func edit(t *testing.T, b []byte, f func(m map[string]any)) []byte {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	f(m)
	out, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestCatchesDrift shows what the strict check adds: fields the SDK
// decodes without complaint but the spec does not have are refused.
func TestCatchesDrift(t *testing.T) {
	strict, lenient := load(t, specvalidate.Options{}), load(t, specvalidate.Options{Lenient: true})
	req, rb, status, hdr, body := exchange(t, "GET", "/devices/"+dev+"?include=ip_addresses.parent_block", "")
	if status != 200 {
		t.Fatalf("status %d: %s", status, body)
	}
	if err := strict.Check(req, rb, status, hdr, body); err != nil {
		t.Fatalf("the emulator's own answer fails: %v", err)
	}

	for name, tc := range map[string]struct {
		f          func(map[string]any)
		sdkDecodes bool
		want       string
	}{
		"unknown top-level field": {func(m map[string]any) { m["favourite_colour"] = "blue" }, true, "favourite_colour"},
		"unknown nested field": {func(m map[string]any) {
			m["ip_addresses"].([]any)[0].(map[string]any)["vlan"] = 7
		}, true, "vlan"},
		"unknown field in the metro": {func(m map[string]any) { m["metro"].(map[string]any)["href"] = "/metal/v1/locations/metros/x" }, true, "href"},
		"wrong type":                 {func(m map[string]any) { m["hostname"] = 42 }, false, "hostname"},
		"value outside the enum":     {func(m map[string]any) { m["state"] = "running" }, false, "state"},
		"malformed date-time":        {func(m map[string]any) { m["created_at"] = "yesterday" }, false, "created_at"},
	} {
		t.Run(name, func(t *testing.T) {
			drifted := edit(t, body, tc.f)
			var d metalv1.Device
			if err := json.Unmarshal(drifted, &d); (err == nil) != tc.sdkDecodes {
				t.Errorf("SDK decode error %v; expected it to decode: %v", err, tc.sdkDecodes)
			}
			err := strict.Check(req, rb, status, hdr, drifted)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("strict check: %v, want an error naming %q", err, tc.want)
			}
			if tc.sdkDecodes {
				if err := lenient.Check(req, rb, status, hdr, drifted); err != nil {
					t.Errorf("the spec itself allows extra fields here, yet: %v", err)
				}
			}
		})
	}
}

func TestReservationShape(t *testing.T) {
	v := load(t, specvalidate.Options{})
	req, rb, status, hdr, body := exchange(t, "GET", "/projects/"+emulator.DefaultProjectID+"/ips?include=assignments", "")
	if err := v.Check(req, rb, status, hdr, body); err != nil {
		t.Fatalf("the emulator's own answer fails: %v", err)
	}
	drifted := edit(t, body, func(m map[string]any) {
		delete(m["ip_addresses"].([]any)[0].(map[string]any), "type")
	})
	if err := v.Check(req, rb, status, hdr, drifted); err == nil {
		t.Error("a reservation without its required type passes")
	}
}

func TestStatusesAndErrors(t *testing.T) {
	v := load(t, specvalidate.Options{})
	req, rb, _, hdr, _ := exchange(t, "GET", "/devices/"+dev, "")
	errBody := []byte(`{"errors":["Not found"]}`)
	for _, tc := range []struct {
		name   string
		status int
		body   []byte
		ok     bool
	}{
		{"declared 404 with an Error body", 404, errBody, true},
		{"undeclared 422 with an Error body", 422, errBody, true},
		{"429 with an Error body", 429, errBody, true},
		{"503 with an Error body", 503, errBody, true},
		{"404 with another body", 404, []byte(`{"message":"nope"}`), false},
		{"503 with HTML", 503, []byte(`<html>bad gateway</html>`), false},
		{"undeclared 201", 201, []byte(`{}`), false},
		{"204 where 200 is declared", 204, nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := hdr.Clone()
			h.Set("Content-Type", "application/json; charset=utf-8")
			err := v.Check(req, rb, tc.status, h, tc.body)
			if (err == nil) != tc.ok {
				t.Errorf("check: %v, want ok=%v", err, tc.ok)
			}
		})
	}
}

func TestRequests(t *testing.T) {
	v := load(t, specvalidate.Options{})
	check := func(method, path, body string) error {
		req, err := http.NewRequest(method, "http://127.0.0.1:1/metal/v1"+path, bytes.NewReader([]byte(body)))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		return v.Check(req, []byte(body), 204, http.Header{}, nil)
	}
	p := "/projects/" + emulator.DefaultProjectID + "/bgp-configs"
	// The md5 pattern uses lookaheads, which Go's regexp lacks; they are
	// rewritten, not ignored.
	if err := check("POST", p, `{"asn":65000,"deployment_type":"local","md5":"Secret12345"}`); err != nil {
		t.Errorf("valid request: %v", err)
	}
	for body, want := range map[string]string{
		`{"asn":65000,"deployment_type":"local","md5":"secret12345"}`: "md5", // no upper-case letter
		`{"asn":65000,"deployment_type":"local","md5":"Secret!2345"}`: "md5",
		`{"asn":65000}`: "deployment_type",
		`{"asn":65000,"deployment_type":"regional"}`: "deployment_type",
	} {
		if err := check("POST", p, body); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want an error naming %q", body, err, want)
		}
	}
	if err := check("GET", "/devices/not-a-uuid", ""); err == nil || !strings.Contains(err.Error(), "uuid") {
		t.Errorf("malformed path ID: %v", err)
	}
	if err := check("GET", "/devices/"+dev+"/traffic", ""); err == nil || !strings.Contains(err.Error(), "not in the spec") {
		t.Errorf("a path outside the loaded ones: %v", err)
	}
}

// TestAllPathsAgree loads the whole spec (slow) and checks that the cut-down
// default gives the same verdicts.
func TestAllPathsAgree(t *testing.T) {
	if testing.Short() {
		t.Skip("loads the whole spec; run without -short")
	}
	all, cut := load(t, specvalidate.Options{AllPaths: true}), load(t, specvalidate.Options{})
	req, rb, status, hdr, body := exchange(t, "GET", "/projects/"+emulator.DefaultProjectID+"/devices?per_page=5", "")
	for _, b := range [][]byte{body, edit(t, body, func(m map[string]any) { m["extra"] = true })} {
		e1, e2 := all.Check(req, rb, status, hdr, b), cut.Check(req, rb, status, hdr, b)
		if (e1 == nil) != (e2 == nil) {
			t.Errorf("whole spec says %v, cut spec says %v", e1, e2)
		}
	}
}
