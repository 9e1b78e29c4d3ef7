package policy

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestReadmeInput keeps the input document shown in policies/README.md
// true: it must decode into PlacementInput with no unknown field, and the
// encoded Go input must have the same fields.
func TestReadmeInput(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "policies", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	text := string(b)
	start := strings.Index(text, "```json\n")
	end := strings.Index(text[start+8:], "```")
	if start < 0 || end < 0 {
		t.Fatal("policies/README.md has no JSON input example")
	}
	doc := strings.ReplaceAll(text[start+8:start+8+end], "…", "")
	dec := json.NewDecoder(strings.NewReader(doc))
	dec.DisallowUnknownFields()
	var in PlacementInput
	if err := dec.Decode(&in); err != nil {
		t.Fatalf("README input does not decode into PlacementInput: %v", err)
	}
	if in.Service.Annotations[in.Config.AnnotationEIPMetro] != "da" || len(in.Nodes) != 1 || len(in.BGPNodeSelector) != 1 {
		t.Errorf("decoded README input = %+v", in)
	}
	// Every field of the Go types appears in the README example.
	encoded, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	var fromGo, fromDoc map[string]any
	if err := json.Unmarshal(encoded, &fromGo); err != nil {
		t.Fatal(err)
	}
	if err := json.NewDecoder(bytes.NewReader([]byte(doc))).Decode(&fromDoc); err != nil {
		t.Fatal(err)
	}
	if missing := missingKeys(fromGo, fromDoc, "input"); len(missing) > 0 {
		t.Errorf("policies/README.md input lacks %v", missing)
	}
}

func missingKeys(want, got any, path string) []string {
	var out []string
	switch w := want.(type) {
	case map[string]any:
		g, _ := got.(map[string]any)
		for k, v := range w {
			if _, ok := g[k]; !ok {
				out = append(out, path+"."+k)
				continue
			}
			if k == "labels" || k == "annotations" {
				continue // free-form maps
			}
			out = append(out, missingKeys(v, g[k], path+"."+k)...)
		}
	case []any:
		g, _ := got.([]any)
		if len(w) > 0 && len(g) > 0 {
			out = append(out, missingKeys(w[0], g[0], path+"[0]")...)
		}
	}
	return out
}
