package metal

import (
	"context"
	"testing"
	"time"

	"github.com/metal-ccm/cloud-provider-equinix-metal/test/emulator"
)

// TestReservationHolding: which reservation of the project holds an
// address (a bring-your-own spec.loadBalancerIP), answered from the cache:
// a /32 Elastic IP, an address inside a larger block, and nothing for an
// address the project does not hold or for a device's management address,
// which is no Elastic IP.
func TestReservationHolding(t *testing.T) {
	e, c := startEmulator(t)
	ctx := context.Background()
	one, err := e.AddReservation(emulator.ReservationSeed{Metro: "da", Address: "198.18.0.200"})
	if err != nil {
		t.Fatal(err)
	}
	block, err := e.AddReservation(emulator.ReservationSeed{Metro: "sv", Quantity: 8})
	if err != nil {
		t.Fatal(err)
	}
	dev, err := e.AddDevice(emulator.DeviceSeed{Hostname: "node-0", Metro: "da"})
	if err != nil {
		t.Fatal(err)
	}
	addr, ok := dev.Address(emulator.TypePublicIPv4)
	if !ok {
		t.Fatal("the device has no public IPv4 management address")
	}
	mgmt := addr.String()
	inBlock := block.Prefix.Addr().Next().Next().String()

	for _, tc := range []struct {
		addr, wantID string
	}{
		{"198.18.0.200", one.ID},
		{inBlock, block.ID},
		{block.Prefix.Addr().String(), block.ID},
		{"198.18.0.201", ""},
		{"145.60.80.60", ""},
		{mgmt, ""},
		{"not-an-ip", ""},
	} {
		got, err := c.ReservationHolding(ctx, tc.addr)
		if err != nil {
			t.Fatalf("ReservationHolding(%s): %v", tc.addr, err)
		}
		if gotID := got.GetId(); gotID != tc.wantID {
			t.Errorf("ReservationHolding(%s) = %q, want %q", tc.addr, gotID, tc.wantID)
		}
	}
	// One listing filled the cache; every lookup after it is free.
	if n := e.Count(emulator.RouteListIPReservations); n != 1 {
		t.Errorf("%d listings for 7 lookups, want 1", n)
	}
	if got := c.ProjectID(); got != emulator.DefaultProjectID {
		t.Errorf("ProjectID() = %q", got)
	}
}

// TestReservationHoldingAfterListing: an address reserved after the cache's
// listing (reserve, then create the Service) is found once the listing is
// older than holdingMissRelist, with one more listing; before that a miss
// lists nothing.
func TestReservationHoldingAfterListing(t *testing.T) {
	e, c := startEmulator(t)
	ctx := context.Background()
	start := time.Now()
	c.reservations.now = func() time.Time { return start }
	if got, err := c.ReservationHolding(ctx, "198.18.0.210"); err != nil || got != nil {
		t.Fatalf("before the reservation: %v, %v", got, err)
	}
	r, err := e.AddReservation(emulator.ReservationSeed{Metro: "da", Address: "198.18.0.210"})
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := c.ReservationHolding(ctx, "198.18.0.210"); got != nil {
		t.Fatalf("within %s of the listing: %q, want the cache's answer (none)", holdingMissRelist, got.GetId())
	}
	if n := e.Count(emulator.RouteListIPReservations); n != 1 {
		t.Fatalf("%d listings within %s, want 1", n, holdingMissRelist)
	}
	c.reservations.now = func() time.Time { return start.Add(holdingMissRelist + time.Second) }
	if got, err := c.ReservationHolding(ctx, "198.18.0.210"); err != nil || got.GetId() != r.ID {
		t.Fatalf("after %s: %v (%v), want %s", holdingMissRelist, got.GetId(), err, r.ID)
	}
	if n := e.Count(emulator.RouteListIPReservations); n != 2 {
		t.Errorf("%d listings, want 2", n)
	}
}
