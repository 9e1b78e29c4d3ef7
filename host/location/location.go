// Package location names where an Equinix Metal Elastic IP is reserved. It
// is the one type on the way from the placement policy (which decides it)
// through the EIP lifecycle (which reports it in Events) to the reservation
// request (which sends it to Equinix), so no layer translates it.
//
// Like every package under host/, it belongs to this repository alone:
// its API carries no compatibility promise to code outside it.
package location

import "fmt"

// Location is a metro or a facility: exactly one of the two is set.
type Location struct {
	Metro    string
	Facility string
}

// String is "metro da" or "facility da11", for logs and Events.
func (l Location) String() string {
	if l.Facility != "" {
		return "facility " + l.Facility
	}
	return "metro " + l.Metro
}

// Validate says whether exactly one of Metro and Facility is set, which is
// what the Equinix Metal API accepts.
func (l Location) Validate() error {
	if (l.Metro == "") == (l.Facility == "") {
		return fmt.Errorf("set exactly one of metro (%q) and facility (%q)", l.Metro, l.Facility)
	}
	return nil
}
