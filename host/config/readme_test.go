package config

import (
	"os"
	"strings"
	"testing"
)

// TestREADMEListsEveryOption keeps the README's configuration table true.
func TestREADMEListsEveryOption(t *testing.T) {
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	readme := string(b)
	for _, o := range options {
		for _, want := range []string{"`" + o.key + "`", "`" + o.env + "`"} {
			if !strings.Contains(readme, want) {
				t.Errorf("README.md does not mention %s (option %s)", want, o.key)
			}
		}
		if o.flag != "" && !strings.Contains(readme, "`--"+o.flag+"`") {
			t.Errorf("README.md does not mention --%s", o.flag)
		}
		if o.flag != "" && o.secret {
			t.Errorf("secret option %s has a flag", o.key)
		}
	}
}
