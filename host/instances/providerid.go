package instances

import (
	"fmt"
	"strings"
)

// ProviderName is the provider ID scheme, as upstream.
const ProviderName = "equinixmetal"

// legacyProviderName is the scheme of clusters that started with the Packet CCM.
const legacyProviderName = "packet"

// providerID builds the provider ID of a device.
func providerID(deviceID string) string { return ProviderName + "://" + deviceID }

// DeviceID extracts the device UUID from a provider ID. Both schemes are
// accepted, with two or three slashes, because nodes registered by older
// CCMs keep their provider ID for life; so is a bare device UUID, which
// upstream accepts (a kubelet given --provider-id=<uuid> sets it). A bare
// value that is not a UUID is refused: it is another provider's.
func DeviceID(providerID string) (string, error) {
	scheme, rest, ok := strings.Cut(providerID, "://")
	if !ok && isUUID(providerID) {
		return strings.ToLower(providerID), nil
	}
	if !ok || (scheme != ProviderName && scheme != legacyProviderName) {
		return "", fmt.Errorf("provider ID %q is not of the form %s://<device-id>; the node was registered by another cloud provider", providerID, ProviderName)
	}
	id := strings.TrimLeft(rest, "/")
	if id == "" || strings.ContainsAny(id, "/ ") {
		return "", fmt.Errorf("provider ID %q has no device ID after %s://", providerID, scheme)
	}
	return id, nil
}

// isUUID: 8-4-4-4-12 hexadecimal digits, the form of Equinix Metal IDs.
func isUUID(s string) bool {
	if len(s) != 36 {
		return false
	}
	for i, r := range s {
		switch i {
		case 8, 13, 18, 23:
			if r != '-' {
				return false
			}
		default:
			if !strings.ContainsRune("0123456789abcdefABCDEF", r) {
				return false
			}
		}
	}
	return true
}
