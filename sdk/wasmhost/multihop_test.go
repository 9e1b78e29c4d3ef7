package wasmhost_test

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/metal-ccm/cloud-provider-equinix-metal/sdk"
	"github.com/metal-ccm/cloud-provider-equinix-metal/sdk/wasmhost"
)

// multihop is dualStack with every peer multihop, as Equinix reports them.
func multihop() sdk.GenerateRequest {
	req := dualStack()
	for i := range req.Nodes {
		peers := make([]sdk.Peer, len(req.Nodes[i].Peers))
		for j, p := range req.Nodes[i].Peers {
			p.Multihop = true
			peers[j] = p
		}
		req.Nodes[i].Peers = peers
	}
	return req
}

// TestOlderModulesGetTheRequestWithoutMultihop: a module of ABI version 1
// to 5 gets, where Equinix says multihop, byte for byte what it got before
// the field existed; one of version 6 gets it on every peer, and the
// caller's request is left as it was.
func TestOlderModulesGetTheRequestWithoutMultihop(t *testing.T) {
	for abi := uint32(sdk.MinABIVersion); abi < 6; abi++ {
		want, err := wasmhost.EncodeRequest(abi, dualStack())
		if err != nil {
			t.Fatal(err)
		}
		got, err := wasmhost.EncodeRequest(abi, multihop())
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("ABI version %d:\n got %q\nwant %q", abi, got, want)
		}
		if abi == 1 && bytes.Contains(got, []byte("multihop")) {
			t.Errorf("ABI version 1 JSON names multihop: %s", got)
		}
	}
	in := multihop()
	before, _ := json.Marshal(in)
	b, err := wasmhost.EncodeRequest(sdk.ABIVersion, in)
	if err != nil {
		t.Fatal(err)
	}
	if after, _ := json.Marshal(in); !bytes.Equal(before, after) {
		t.Errorf("the caller's request changed:\n%s\n%s", before, after)
	}
	got, err := sdk.DecodeGenerateRequest(b)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range got.Nodes {
		for _, p := range n.Peers {
			if !p.Multihop {
				t.Errorf("ABI version %d: node %s peer %s arrived without multihop", sdk.ABIVersion, n.Name, p.IP)
			}
		}
	}
}
