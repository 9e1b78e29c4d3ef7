package instances

import (
	"fmt"
	"strings"
)

// ProviderName is the provider ID scheme, as upstream.
const ProviderName = "equinixmetal"

// legacyProviderName is the scheme of clusters that started with the Packet CCM.
const legacyProviderName = "packet"

// ProviderID builds the provider ID of a device.
func ProviderID(deviceID string) string { return ProviderName + "://" + deviceID }

// DeviceID extracts the device UUID from a provider ID. Both schemes are
// accepted, with two or three slashes, because nodes registered by older
// CCMs keep their provider ID for life.
func DeviceID(providerID string) (string, error) {
	scheme, rest, ok := strings.Cut(providerID, "://")
	if !ok || (scheme != ProviderName && scheme != legacyProviderName) {
		return "", fmt.Errorf("provider ID %q is not of the form %s://<device-id>; the node was registered by another cloud provider", providerID, ProviderName)
	}
	id := strings.TrimLeft(rest, "/")
	if id == "" || strings.ContainsAny(id, "/ ") {
		return "", fmt.Errorf("provider ID %q has no device ID after %s://", providerID, scheme)
	}
	return id, nil
}
