package emulator

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"

	metalv1 "github.com/equinix/equinix-sdk-go/services/metalv1"
)

// TestEncodeMatchesSDK checks that the emulator's encoder gives the same
// JSON values as the SDK models' own MarshalJSON, on every kind of answer.
func TestEncodeMatchesSDK(t *testing.T) {
	seed := DefaultSeed()
	seed.Projects[0].BGP = &BGPConfigSeed{MD5: "Secret12345"}
	seed.Projects = append(seed.Projects, ProjectSeed{Name: "no-bgp"})
	seed.Devices = []DeviceSeed{
		{Hostname: "n0", Project: DefaultProjectID, Tags: []string{`odd "tag" <&> é`, "\u2028\x01"}, BGPSessions: []string{"ipv4", "ipv6"}},
		{Hostname: "n1", Project: DefaultProjectID, Metro: "sv", NoPublicIPv6: true},
	}
	seed.Reservations = []ReservationSeed{
		{Project: DefaultProjectID, Tags: []string{"cp"}, Details: "line\nbreak", Customdata: map[string]any{"k": []any{1.0, "v", nil, true}}},
		{Project: DefaultProjectID, Facility: "sv15", Quantity: 4},
		{Project: DefaultProjectID, Type: TypeGlobalIPv4},
	}
	e, err := New(seed, Options{RandSeed: 7})
	if err != nil {
		t.Fatal(err)
	}
	s := e.store
	p := s.projects[0]
	d := p.devices[0]
	if _, err := s.assign(d, s.reservations[findRes(t, s, "cp")].prefix.String()); err != nil {
		t.Fatal(err)
	}
	var values []any
	for _, inc := range []includes{{}, {"ip_addresses.parent_block": true, "project": true}} {
		for _, dv := range p.devices {
			values = append(values, s.renderDevice(dv, inc))
		}
		list := &metalv1.DeviceList{Meta: &metalv1.Meta{Total: int32p(2), CurrentPage: int32p(1), LastPage: int32p(1), First: &metalv1.Href{Href: "/x?page=1"}}}
		for _, dv := range p.devices {
			list.Devices = append(list.Devices, s.renderDevice(dv, inc))
		}
		values = append(values, list)
	}
	for _, inc := range []includes{{}, {"assignments": true, "project": true}} {
		rl := &metalv1.IPReservationList{}
		for _, r := range p.reservations {
			rl.IpAddresses = append(rl.IpAddresses, metalv1.IPReservationListIpAddressesInner{IPReservation: s.renderReservation(r, inc)})
			values = append(values, s.renderReservation(r, inc))
		}
		values = append(values, rl)
	}
	for _, a := range d.assignments {
		values = append(values, s.renderAssignment(a, nil, true), s.renderAssignment(a, nil, false))
	}
	sl := &metalv1.BgpSessionList{}
	for _, ss := range d.sessions {
		sl.BgpSessions = append(sl.BgpSessions, renderSession(ss, false))
		values = append(values, renderSession(ss, true))
	}
	values = append(values, sl, s.renderNeighbors(d), s.renderNeighbors(p.devices[1]),
		s.renderBGPConfig(p), s.renderBGPConfig(s.projects[1]), renderProject(p, true), renderProject(p, false),
		renderMetro(s.metros[0]), renderFacility(s.facilities[0]),
		&metalv1.Error{Errors: []string{"x"}}, &metalv1.Error{Error: ptr("y")},
		map[string]string{"status": "ok"})
	// A Nullable field set to null, and extra properties.
	cfg := s.renderBGPConfig(p)
	cfg.Md5 = *metalv1.NewNullableString(nil)
	cfg.AdditionalProperties = map[string]interface{}{"zz": 1.5, "aa": []int{1}}
	values = append(values, cfg)

	for i, v := range values {
		want, err := json.Marshal(v)
		if err != nil {
			t.Fatalf("%d %T: %v", i, v, err)
		}
		var buf bytes.Buffer
		if err := encodeJSON(&buf, v); err != nil {
			t.Fatalf("%d %T: %v", i, v, err)
		}
		var a, b any
		if err := json.Unmarshal(want, &a); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(buf.Bytes(), &b); err != nil {
			t.Fatalf("%d %T: invalid JSON %v:\n%s", i, v, err, buf.Bytes())
		}
		if !reflect.DeepEqual(a, b) {
			t.Errorf("%d %T differs:\nSDK:  %s\nours: %s", i, v, want, buf.Bytes())
		}
	}
}

func findRes(t *testing.T, s *store, tag string) string {
	for id, r := range s.reservations {
		for _, tg := range r.tags {
			if tg == tag {
				return id
			}
		}
	}
	t.Fatalf("no reservation tagged %s", tag)
	return ""
}

func BenchmarkEncodeList(b *testing.B) {
	e, _ := New(DefaultSeed(), Options{RandSeed: 1})
	if _, err := e.AddReservations(50, ReservationSeed{Metro: "da", Tags: []string{"a", "b"}}, nil); err != nil {
		b.Fatal(err)
	}
	s := e.store
	out := &metalv1.IPReservationList{}
	for _, r := range s.projects[0].reservations {
		out.IpAddresses = append(out.IpAddresses, metalv1.IPReservationListIpAddressesInner{IPReservation: s.renderReservation(r, includes{})})
	}
	b.Run("sdk", func(b *testing.B) {
		for b.Loop() {
			_, _ = json.Marshal(out)
		}
	})
	b.Run("emulator", func(b *testing.B) {
		var buf bytes.Buffer
		for b.Loop() {
			buf.Reset()
			_ = encodeJSON(&buf, out)
		}
	})
}
