package testenv

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestLogTail(t *testing.T) {
	tests := []struct {
		name, log string
		lines     int
		want      string
	}{
		{"shorter than asked", "a\nb\n", 5, "a\nb"},
		{"last lines only", "1\n2\n3\n4\n", 2, "3\n4"},
		{"no final newline", "1\n2\n3", 2, "2\n3"},
		{"empty", "", 3, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "log")
			if err := os.WriteFile(p, []byte(tt.log), 0o644); err != nil {
				t.Fatal(err)
			}
			if got := string(LogTail(p, tt.lines)); got != tt.want {
				t.Fatalf("LogTail = %q, want %q", got, tt.want)
			}
		})
	}
	if got := string(LogTail(filepath.Join(t.TempDir(), "missing"), 3)); !strings.HasPrefix(got, "(no log: ") {
		t.Fatalf("LogTail of a missing file = %q", got)
	}
}

func TestFreePortsAreDistinct(t *testing.T) {
	ports, err := freePorts(3)
	if err != nil {
		t.Fatal(err)
	}
	if len(ports) != 3 || ports[0] == ports[1] || ports[1] == ports[2] || ports[0] == ports[2] {
		t.Fatalf("freePorts(3) = %v, want three distinct ports", ports)
	}
}
