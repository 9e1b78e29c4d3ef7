package emulator

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"sigs.k8s.io/yaml"
)

// Seed is the initial state of an emulator, written as Go values or loaded
// from a JSON or YAML file with LoadSeed (the field names below are the
// file's keys). Every ID is a UUID; a missing ID is generated. References
// between entities use IDs for projects and devices and codes for metros and
// facilities. Seed values are also accepted at run time by Emulator.Apply and
// the admin endpoint POST /_emulator/seed, which add to the existing state.
//
// New fills in what a seed leaves out from DefaultSeed (token, metros and
// facilities, project), so a seed may list just its devices.
type Seed struct {
	// Tokens are the accepted X-Auth-Token values. With none, DefaultToken
	// is accepted for every project.
	Tokens []TokenSeed `json:"tokens,omitempty"`
	// Metros, each with the address blocks its public, private and IPv6
	// addresses are drawn from (generated when empty).
	Metros []MetroSeed `json:"metros,omitempty"`
	// Facilities, each in a metro.
	Facilities []FacilitySeed `json:"facilities,omitempty"`
	// GlobalIPv4 is the block global_ipv4 reservations are drawn from
	// (default 198.19.0.0/20).
	GlobalIPv4 string `json:"global_ipv4,omitempty"`
	// Projects, optionally with their BGP configuration.
	Projects []ProjectSeed `json:"projects,omitempty"`
	// Devices, each in a project and a metro.
	Devices []DeviceSeed `json:"devices,omitempty"`
	// Reservations are IP reservations that exist before the test starts,
	// for example a control-plane Elastic IP carrying a user tag.
	Reservations []ReservationSeed `json:"reservations,omitempty"`
}

// TokenSeed is an API key.
type TokenSeed struct {
	Token string `json:"token"`
	// Projects the key may use; empty means every project. Anything in
	// another project answers 403.
	Projects []string `json:"projects,omitempty"`
	// ReadOnly keys get 403 on every POST and DELETE.
	ReadOnly bool `json:"read_only,omitempty"`
}

// MetroSeed is a metro and its address blocks.
type MetroSeed struct {
	ID      string `json:"id,omitempty"`
	Code    string `json:"code"`
	Name    string `json:"name,omitempty"`
	Country string `json:"country,omitempty"`
	// PublicIPv4 is the block Elastic IPs (public_ipv4) and the devices'
	// public /31s come from. Default: a /18 of 198.18.0.0/15 per metro.
	PublicIPv4 string `json:"public_ipv4,omitempty"`
	// PrivateIPv4 is the block the projects' private /25s come from; the
	// devices' private /31s come from those /25s. Default: 10.<n>.0.0/16.
	PrivateIPv4 string `json:"private_ipv4,omitempty"`
	// PublicIPv6 is the block the projects' /56s (and public_ipv6
	// reservations) come from; devices get a /127 of their project's /56.
	// Default: 2001:db8:<n>00::/40.
	PublicIPv6 string `json:"public_ipv6,omitempty"`
	// NoIPv6Reservations makes public_ipv6 requests in the metro fail with
	// 422, as a request the API cannot serve does (assumption: the sources
	// document no IPv6 Elastic IP request, so not its refusal either; a
	// 422 is how the API refuses any reservation it cannot make). Devices
	// still get their IPv6.
	NoIPv6Reservations bool `json:"no_ipv6_reservations,omitempty"`
}

// FacilitySeed is a facility (data centre) in a metro.
type FacilitySeed struct {
	ID    string `json:"id,omitempty"`
	Code  string `json:"code"`
	Name  string `json:"name,omitempty"`
	Metro string `json:"metro"`
}

// ProjectSeed is a project.
type ProjectSeed struct {
	ID   string `json:"id,omitempty"`
	Name string `json:"name,omitempty"`
	// BGP, when set, is the project's BGP configuration, as if enabled
	// before the test. Unset, GET bgp-config answers {} as the real API does.
	BGP *BGPConfigSeed `json:"bgp,omitempty"`
	// ApprovalThreshold is the largest quantity a reservation request may
	// ask for without review; 0 means no review ever. A larger request
	// answers 422 with fail_on_approval_required, and otherwise stays
	// pending until Emulator.ApproveReservation.
	ApprovalThreshold int `json:"approval_threshold,omitempty"`
}

// BGPConfigSeed is a project's BGP configuration.
type BGPConfigSeed struct {
	ID             string `json:"id,omitempty"`
	ASN            int64  `json:"asn,omitempty"`             // default 65000
	MD5            string `json:"md5,omitempty"`             // empty: no password
	DeploymentType string `json:"deployment_type,omitempty"` // local (default) or global
	Status         string `json:"status,omitempty"`          // enabled (default), requested or disabled
	MaxPrefix      int    `json:"max_prefix,omitempty"`      // default 10
}

// DeviceSeed is a device (server). Its addresses are drawn from its metro's
// blocks unless given; the private IPv4 is inside a /25 of its project, the
// IPv6 inside a /56 of its project.
type DeviceSeed struct {
	ID       string   `json:"id,omitempty"`
	Hostname string   `json:"hostname"`
	Project  string   `json:"project,omitempty"`  // project ID; may be omitted when there is one project
	Metro    string   `json:"metro,omitempty"`    // metro code; default: the facility's metro, or the first metro
	Facility string   `json:"facility,omitempty"` // facility code; default: the first facility of the metro
	Plan     string   `json:"plan,omitempty"`     // plan slug; default c3.small.x86
	State    string   `json:"state,omitempty"`    // default active
	Tags     []string `json:"tags,omitempty"`

	// Explicit addresses (without prefix length); drawn from the pools
	// when empty.
	PublicIPv4  string `json:"public_ipv4,omitempty"`
	PrivateIPv4 string `json:"private_ipv4,omitempty"`
	PublicIPv6  string `json:"public_ipv6,omitempty"`
	// Leave an address family out entirely.
	NoPublicIPv4  bool `json:"no_public_ipv4,omitempty"`
	NoPrivateIPv4 bool `json:"no_private_ipv4,omitempty"`
	NoPublicIPv6  bool `json:"no_public_ipv6,omitempty"`

	// BGPSessions are the address families ("ipv4", "ipv6") that already
	// have a BGP session, as if created before the test.
	BGPSessions []string `json:"bgp_sessions,omitempty"`
	// BGPNeighbors replaces the derived neighbour data. Neighbours are only
	// reported for address families that have a session, as on the real
	// API. Zero fields take the derived values: peer_ips
	// 169.254.255.1/169.254.255.2 (IPv4) or fc00::e/fc00::f (IPv6), peer_as
	// 65530, customer_as the project's ASN, customer_ip the device's private
	// IPv4 (or public IPv6).
	BGPNeighbors []BGPNeighborSeed `json:"bgp_neighbors,omitempty"`
}

// BGPNeighborSeed is the BGP neighbour data of one address family.
type BGPNeighborSeed struct {
	AddressFamily int      `json:"address_family"` // 4 or 6
	CustomerAS    int      `json:"customer_as,omitempty"`
	CustomerIP    string   `json:"customer_ip,omitempty"`
	PeerAS        int      `json:"peer_as,omitempty"`
	PeerIPs       []string `json:"peer_ips,omitempty"`
	MD5Password   string   `json:"md5_password,omitempty"`
	Multihop      *bool    `json:"multihop,omitempty"`
}

// ReservationSeed is an IP reservation.
type ReservationSeed struct {
	ID       string `json:"id,omitempty"`
	Project  string `json:"project,omitempty"` // project ID; may be omitted when there is one project
	Type     string `json:"type,omitempty"`    // public_ipv4 (default), global_ipv4 or public_ipv6
	Metro    string `json:"metro,omitempty"`   // metro code (not for global_ipv4); default: the facility's or the first metro
	Facility string `json:"facility,omitempty"`
	// Address is the block ("198.18.0.8/29" or "198.18.0.8" for a /32);
	// drawn from the metro's (or global) block when empty.
	Address string `json:"address,omitempty"`
	// Quantity is the number of addresses (a power of two) when Address
	// is empty; default 1.
	Quantity   int            `json:"quantity,omitempty"`
	Tags       []string       `json:"tags,omitempty"`
	Details    string         `json:"details,omitempty"`
	Customdata map[string]any `json:"customdata,omitempty"`
	// Pending keeps the reservation in state "pending" until
	// Emulator.ApproveReservation.
	Pending bool `json:"pending,omitempty"`
	// AssignedTo lists devices the whole block is assigned to, as
	// POST /devices/{id}/ips would.
	AssignedTo []string `json:"assigned_to,omitempty"`
}

// The defaults of DefaultSeed.
const (
	DefaultToken     = "emulator-token"
	DefaultProjectID = "0b2f34b8-54a4-4d2a-9b8e-6a1d8f1f2a01"
)

// DefaultSeed is one project (DefaultProjectID), the token DefaultToken, and
// four metros (da, sv, ny, am) with one facility each. It has no devices.
func DefaultSeed() *Seed {
	return &Seed{
		Tokens: []TokenSeed{{Token: DefaultToken}},
		Metros: []MetroSeed{
			{ID: "108b2cfb-246b-45e3-885a-bf3e82fce1a0", Code: "da", Name: "Dallas", Country: "US"},
			{ID: "2991b022-b8c4-497e-8db7-5a407c3a209b", Code: "sv", Name: "Silicon Valley", Country: "US"},
			{ID: "96a57a1d-fb92-4f7f-b1d4-9a0b5b8e7d3c", Code: "ny", Name: "New York", Country: "US"},
			{ID: "d2b7ea5e-2c6f-4b9a-8c3e-4b1f0a9e6c11", Code: "am", Name: "Amsterdam", Country: "NL"},
		},
		Facilities: []FacilitySeed{
			{ID: "1d4a3f5e-6b7c-4d8e-9f00-a1b2c3d4e5f6", Code: "da11", Name: "Dallas DA11", Metro: "da"},
			{ID: "2e5b4a6f-7c8d-4e9f-a011-b2c3d4e5f607", Code: "sv15", Name: "Silicon Valley SV15", Metro: "sv"},
			{ID: "3f6c5b70-8d9e-4fa0-b122-c3d4e5f60718", Code: "ny5", Name: "New York NY5", Metro: "ny"},
			{ID: "407d6c81-9eaf-4b01-8233-d4e5f6071829", Code: "am6", Name: "Amsterdam AM6", Metro: "am"},
		},
		Projects: []ProjectSeed{{ID: DefaultProjectID, Name: "ccm-emulator"}},
	}
}

// LoadSeed reads a seed file: YAML when the name ends in .yaml or .yml,
// JSON otherwise. Unknown keys are errors, so a typo does not silently
// produce an empty seed.
func LoadSeed(path string) (*Seed, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return ParseSeed(b, filepath.Ext(path))
}

// ParseSeed parses a seed; ext is ".yaml"/".yml" for YAML, anything else
// for JSON.
func ParseSeed(b []byte, ext string) (*Seed, error) {
	var s Seed
	switch strings.ToLower(ext) {
	case ".yaml", ".yml":
		if err := yaml.UnmarshalStrict(b, &s); err != nil {
			return nil, fmt.Errorf("seed: %w", err)
		}
	default:
		dec := json.NewDecoder(strings.NewReader(string(b)))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&s); err != nil {
			return nil, fmt.Errorf("seed: %w", err)
		}
	}
	return &s, nil
}
