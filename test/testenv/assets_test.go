package testenv

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/mod/modfile"
	"golang.org/x/mod/semver"
)

// requiredVersion returns the version a go.mod file requires of module.
func requiredVersion(t *testing.T, gomod, module string) string {
	t.Helper()
	data, err := os.ReadFile(gomod)
	if err != nil {
		t.Fatal(err)
	}
	f, err := modfile.ParseLax(gomod, data, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range f.Require {
		if r.Mod.Path == module {
			return r.Mod.Version
		}
	}
	t.Fatalf("%s does not require %s", gomod, module)
	return ""
}

// minor returns "v1.37" for "v1.37.1" and "v0.37" for "v0.37.1".
func minorOf(v string) string { return semver.MajorMinor(v) }

func TestKubernetesVersionIsWhatMakeBuilds(t *testing.T) {
	got := requiredVersion(t, filepath.Join("k8sbins", "go.mod"), "k8s.io/kubernetes")
	if got != KubernetesVersion {
		t.Fatalf("k8sbins/go.mod requires k8s.io/kubernetes %s but KubernetesVersion is %s: change the constant together with the go.mod", got, KubernetesVersion)
	}
}

func TestKubernetesMinorMatchesClientLibraries(t *testing.T) {
	client := requiredVersion(t, filepath.Join("..", "..", "go.mod"), "k8s.io/client-go")
	// Staging libraries are v0.MINOR.PATCH for Kubernetes v1.MINOR.PATCH.
	want := strings.Replace(minorOf(client), "v0.", "v1.", 1)
	if got := minorOf(KubernetesVersion); got != want {
		t.Fatalf("kube-apiserver %s (minor %s) but go.mod has k8s.io/client-go %s (minor %s): keep them on one minor", KubernetesVersion, got, client, want)
	}
}

func TestAssetsDir(t *testing.T) {
	sub := filepath.Join("cloud-provider-equinix-metal", "k8s", KubernetesVersion)
	tests := []struct {
		name    string
		env     map[string]string
		want    string
		wantErr string
	}{
		{"explicit variable wins", map[string]string{AssetsEnv: "/opt/k8s", "XDG_CACHE_HOME": "/x", "HOME": "/h"}, "/opt/k8s", ""},
		{"XDG cache", map[string]string{"XDG_CACHE_HOME": "/x", "HOME": "/h"}, filepath.Join("/x", sub), ""},
		{"home cache", map[string]string{"HOME": "/h"}, filepath.Join("/h", ".cache", sub), ""},
		{"nothing set", map[string]string{}, "", "set " + AssetsEnv},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := assetsDir(func(k string) string { return tt.env[k] })
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want it to contain %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("assetsDir = %q, %v; want %q", got, err, tt.want)
			}
		})
	}
}

func TestFindBinaries(t *testing.T) {
	tests := []struct {
		name    string
		files   map[string]os.FileMode
		wantErr string // "" = found
	}{
		{"both present", map[string]os.FileMode{"kube-apiserver": 0o755, "etcd": 0o755}, ""},
		{"empty dir", nil, "kube-apiserver not found in "},
		{"no etcd", map[string]os.FileMode{"kube-apiserver": 0o755}, "etcd not found in "},
		{"not executable", map[string]os.FileMode{"kube-apiserver": 0o644, "etcd": 0o755}, "kube-apiserver not found in "},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			for name, mode := range tt.files {
				if err := os.WriteFile(filepath.Join(dir, name), []byte("#!/bin/true\n"), mode); err != nil {
					t.Fatal(err)
				}
			}
			api, etcd, err := findBinaries(dir)
			if tt.wantErr == "" {
				if err != nil || api != filepath.Join(dir, "kube-apiserver") || etcd != filepath.Join(dir, "etcd") {
					t.Fatalf("findBinaries = %q, %q, %v", api, etcd, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr+dir+": run make k8s-bins") || !errors.Is(err, ErrBinaryMissing) {
				t.Fatalf("err = %v, want %q...%q wrapping ErrBinaryMissing", err, tt.wantErr+dir, ": run make k8s-bins")
			}
		})
	}
}
