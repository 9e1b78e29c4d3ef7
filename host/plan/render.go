package plan

import (
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/metal-ccm/cloud-provider-equinix-metal/host/lbmodule"
	"github.com/metal-ccm/cloud-provider-equinix-metal/host/redact"
)

// NothingToChange is the text output's line for an empty plan.
const NothingToChange = "nothing to change"

// WriteJSON writes the result as one indented JSON document. Secrets the
// process knows (the API key, BGP passwords read from Equinix) are
// redacted, in case a module put one into an object.
func WriteJSON(w io.Writer, r *Result, secrets *redact.Set) error {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	_, err = io.WriteString(w, secrets.String(string(b))+"\n")
	return err
}

// WriteText writes the result for a person, one section per kind of change.
func WriteText(w io.Writer, r *Result, secrets *redact.Set) error {
	var b strings.Builder
	section := func(title string, n int) bool {
		if n == 0 {
			return false
		}
		fmt.Fprintf(&b, "\n%s (%d):\n", title, n)
		return true
	}
	fmt.Fprintf(&b, "Cluster %s (orphanEIPs=%s)\n", r.ClusterUID, r.OrphanMode)
	if section("Elastic IPs", len(r.EIPs)) {
		for _, e := range r.EIPs {
			fmt.Fprintf(&b, "  %-18s %s", e.Action, e.Service)
			if e.Address != "" {
				fmt.Fprintf(&b, " %s", e.Address)
			}
			if e.Family != "" {
				fmt.Fprintf(&b, " %s", e.Family)
			}
			if e.Location != "" {
				fmt.Fprintf(&b, " in %s", e.Location)
			}
			fmt.Fprintf(&b, ": %s\n", e.Reason)
		}
	}
	if section("Placement differs from the existing Elastic IP (not moved; a recreated Service would land in the new place)", len(r.Placement)) {
		for _, p := range r.Placement {
			fmt.Fprintf(&b, "  %s %s: %s -> %s\n", p.Service, p.Address, p.From, p.To)
		}
	}
	if section("Orphaned Elastic IPs (this cluster's, no Service)", len(r.Orphans)) {
		verb := "reported only (orphanEIPs=report)"
		if r.OrphanMode == "release" {
			verb = "released once orphaned for orphanEIPGrace"
		}
		for _, o := range r.Orphans {
			fmt.Fprintf(&b, "  %s (reservation %s, %s): %s\n", o.Address, o.ID, o.Owner, verb)
		}
	}
	if r.ProjectBGP != "" {
		fmt.Fprintf(&b, "\nProject BGP:\n  %s\n", r.ProjectBGP)
	}
	if section("BGP sessions to create", len(r.BGPSessions)) {
		for _, s := range r.BGPSessions {
			fmt.Fprintf(&b, "  node %s (device %s), %s\n", s.Node, s.Device, s.Family)
		}
	}
	if section("Node annotations", len(r.Annotations)) {
		for _, a := range r.Annotations {
			writeAnnotations(&b, a)
		}
	}
	if section("Load-balancer objects", len(r.Objects)) {
		for _, o := range r.Objects {
			writeObject(&b, o)
		}
	}
	if section("Known only after this sync (run plan again then)", len(r.Later)) {
		for _, l := range r.Later {
			fmt.Fprintf(&b, "  %s\n", l)
		}
	}
	if section("Warnings", len(r.Warnings)) {
		for _, w := range r.Warnings {
			fmt.Fprintf(&b, "  %s\n", w)
		}
	}
	if r.Changes() {
		b.WriteString("\nA sync would change the above.\n")
	} else {
		b.WriteString("\n" + NothingToChange + "\n")
	}
	_, err := io.WriteString(w, secrets.String(b.String()))
	return err
}

func writeAnnotations(b *strings.Builder, a nodeAnnotationChange) {
	fmt.Fprintf(b, "  node %s:\n", a.Node)
	keys := make([]string, 0, len(a.Set))
	for k := range a.Set {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Fprintf(b, "    set    %s=%s\n", k, a.Set[k])
	}
	for _, k := range a.Remove {
		fmt.Fprintf(b, "    remove %s\n", k)
	}
}

func writeObject(b *strings.Builder, o lbmodule.Change) {
	name := o.Name
	if o.Namespace != "" {
		name = o.Namespace + "/" + o.Name
	}
	fmt.Fprintf(b, "  %-8s %s %s\n", o.Action, o.Kind, name)
	for _, f := range o.Fields {
		switch {
		case o.Action == "annotate" && f.To == nil:
			fmt.Fprintf(b, "      - %s\n", f.Path)
		case isText(f.From) && isText(f.To):
			fmt.Fprintf(b, "      ~ %s:\n", f.Path)
			for _, l := range lineDiff(f.From.(string), f.To.(string)) {
				fmt.Fprintf(b, "          %s\n", l)
			}
		case f.From == nil:
			fmt.Fprintf(b, "      + %s: %s\n", f.Path, compact(f.To))
		default:
			fmt.Fprintf(b, "      ~ %s: %s -> %s\n", f.Path, compact(f.From), compact(f.To))
		}
	}
}

// compact renders a value on one line, clipped: a diff names the field;
// the whole value is in -o json.
func compact(v any) string {
	s, ok := v.(string)
	if !ok {
		b, _ := json.Marshal(v)
		s = string(b)
	}
	s = strings.ReplaceAll(s, "\n", `\n`)
	if len(s) > 120 {
		s = s[:117] + "..."
	}
	return s
}

// isText is a multi-line string (a ConfigMap's embedded configuration),
// shown as a line diff rather than clipped.
func isText(v any) bool {
	s, ok := v.(string)
	return ok && strings.Contains(s, "\n")
}

// lineDiff lists the lines only in from ("- ") and only in to ("+ "), in
// order, as a longest-common-subsequence diff of the two texts.
func lineDiff(from, to string) []string {
	a, b := strings.Split(from, "\n"), strings.Split(to, "\n")
	// lcs[i][j] is the length of the LCS of a[i:] and b[j:].
	lcs := make([][]int, len(a)+1)
	for i := range lcs {
		lcs[i] = make([]int, len(b)+1)
	}
	for i := len(a) - 1; i >= 0; i-- {
		for j := len(b) - 1; j >= 0; j-- {
			if a[i] == b[j] {
				lcs[i][j] = lcs[i+1][j+1] + 1
			} else {
				lcs[i][j] = max(lcs[i+1][j], lcs[i][j+1])
			}
		}
	}
	var out []string
	i, j := 0, 0
	for i < len(a) || j < len(b) {
		switch {
		case i < len(a) && j < len(b) && a[i] == b[j]:
			i, j = i+1, j+1
		case j < len(b) && (i == len(a) || lcs[i][j+1] >= lcs[i+1][j]):
			out = append(out, "+ "+b[j])
			j++
		default:
			out = append(out, "- "+a[i])
			i++
		}
	}
	return out
}
