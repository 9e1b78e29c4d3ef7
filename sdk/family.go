package sdk

import "net/netip"

// IsIPv6 reports whether ip is an IPv6 address, which decides the family
// of a Service address, a Location and a Peer (ABI version 5). An
// IPv4-mapped address (::ffff:192.0.2.1) is IPv4, and anything that is not
// an address is not IPv6.
func IsIPv6(ip string) bool {
	a, err := netip.ParseAddr(ip)
	return err == nil && a.Is6() && !a.Is4In6()
}
