package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
)

// PolicyMount is a policy directory laid out as the kubelet mounts a
// ConfigMap: the files are symlinks through "..data" to a timestamped
// directory, and an update swaps "..data" atomically. The defaults are the
// repository's policies/ files; Update replaces some of them.
type PolicyMount struct {
	Dir      string
	defaults map[string]string
	n        atomic.Int64
}

// NewPolicyMount reads the default policies (not their tests) from
// defaultsDir.
func NewPolicyMount(dir, defaultsDir string) (*PolicyMount, error) {
	files, err := filepath.Glob(filepath.Join(defaultsDir, "*.rego"))
	if err != nil {
		return nil, err
	}
	m := &PolicyMount{Dir: dir, defaults: map[string]string{}}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.rego") {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		m.defaults[filepath.Base(f)] = string(b)
	}
	return m, os.MkdirAll(dir, 0o755)
}

// Update makes the mount hold the defaults with these files replaced, as a
// ConfigMap update does: new directory, "..data" swapped by rename, file
// symlinks added for new keys.
func (m *PolicyMount) Update(replace map[string]string) error {
	files := map[string]string{}
	for k, v := range m.defaults {
		files[k] = v
	}
	for k, v := range replace {
		files[k] = v
	}
	ts := fmt.Sprintf("..2026_01_01_00_00_%02d.%d", m.n.Add(1), os.Getpid())
	if err := os.Mkdir(filepath.Join(m.Dir, ts), 0o755); err != nil {
		return err
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(m.Dir, ts, name), []byte(content), 0o644); err != nil {
			return err
		}
	}
	tmp := filepath.Join(m.Dir, "..data_tmp")
	_ = os.Remove(tmp)
	if err := os.Symlink(ts, tmp); err != nil {
		return err
	}
	if err := os.Rename(tmp, filepath.Join(m.Dir, "..data")); err != nil {
		return err
	}
	for name := range files {
		link := filepath.Join(m.Dir, name)
		if _, err := os.Lstat(link); err == nil {
			continue
		}
		if err := os.Symlink(filepath.Join("..data", name), link); err != nil {
			return err
		}
	}
	return nil
}

// ReplaceFile replaces one file by a plain write-and-rename, as an editor or
// a configuration-management tool does on a host path mount.
func (m *PolicyMount) ReplaceFile(name, content string) error {
	tmp := filepath.Join(m.Dir, "."+name+".tmp")
	if err := os.WriteFile(tmp, []byte(content), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Join(m.Dir, name))
}
