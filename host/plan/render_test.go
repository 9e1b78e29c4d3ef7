package plan

import (
	"bytes"
	"reflect"
	"strings"
	"testing"

	"github.com/metal-ccm/cloud-provider-equinix-metal/host/eip"
	"github.com/metal-ccm/cloud-provider-equinix-metal/host/lbmodule"
	"github.com/metal-ccm/cloud-provider-equinix-metal/host/redact"
)

func TestLineDiff(t *testing.T) {
	for _, tc := range []struct {
		from, to string
		want     []string
	}{
		{"a\nb\nc", "a\nb\nc", nil},
		{"a\nb\nc", "a\nx\nc", []string{"+ x", "- b"}},
		{"a\nc", "a\nb\nc", []string{"+ b"}},
		{"a\nb\nc", "a\nc", []string{"- b"}},
	} {
		if got := lineDiff(tc.from, tc.to); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("lineDiff(%q, %q) = %q, want %q", tc.from, tc.to, got, tc.want)
		}
	}
}

func TestExitCode(t *testing.T) {
	for _, tc := range []struct {
		name string
		res  Result
		want int
	}{
		{"empty", Result{}, ExitNoChanges},
		{"refused and waiting change nothing", Result{EIPs: []eipChange{{Action: actionRefuse}, {Action: ActionWait}}}, ExitNoChanges},
		{"reserve", Result{EIPs: []eipChange{{Action: ActionReserve}}}, ExitChanges},
		{"orphan reported", Result{OrphanMode: "report", Orphans: []eip.Orphan{{ID: "x"}}}, ExitNoChanges},
		{"orphan released", Result{OrphanMode: "release", Orphans: []eip.Orphan{{ID: "x"}}}, ExitChanges},
		{"placement", Result{Placement: []placement{{Service: "a/b"}}}, ExitChanges},
		{"object", Result{Objects: []lbmodule.Change{{Action: "prune"}}}, ExitChanges},
		{"session", Result{BGPSessions: []bgpSession{{Node: "n"}}}, ExitChanges},
	} {
		if got := tc.res.ExitCode(); got != tc.want {
			t.Errorf("%s: exit code %d, want %d", tc.name, got, tc.want)
		}
	}
}

// A secret the process knows never reaches the output, whatever carries it.
func TestWriteRedacts(t *testing.T) {
	secrets := &redact.Set{}
	secrets.Add("s3cretBGPpass")
	res := &Result{Annotations: []nodeAnnotationChange{{Node: "n", Set: map[string]string{"pass": "s3cretBGPpass"}}}}
	for name, write := range map[string]func(*bytes.Buffer) error{
		"text": func(b *bytes.Buffer) error { return WriteText(b, res, secrets) },
		"json": func(b *bytes.Buffer) error { return WriteJSON(b, res, secrets) },
	} {
		var b bytes.Buffer
		if err := write(&b); err != nil {
			t.Fatal(err)
		}
		if strings.Contains(b.String(), "s3cretBGPpass") {
			t.Errorf("%s output shows the secret:\n%s", name, b.String())
		}
	}
}
