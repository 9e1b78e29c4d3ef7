package policy

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// fixedEIP is a placement policy that always answers metro.
func fixedEIP(metro string) map[string]string {
	return map[string]string{"eip.rego": "package equinix.eip\n\nplacement := {\"metro\": \"" + metro + "\"}\n"}
}

func placeMetro(t *testing.T, e *Engine) string {
	t.Helper()
	p, err := e.Placement(context.Background(), PlacementInput{Service: serviceWith(nil), Config: defaultConfig})
	if err != nil {
		t.Fatalf("Placement: %v", err)
	}
	return p.Metro
}

// TestReload walks a mounted ConfigMap through good, bad and fixed
// updates: a bad one keeps the previous policies and says why.
func TestReload(t *testing.T) {
	cm := newConfigMapDir(t, with(t, fixedEIP("da")))
	e := mustLoad(t, cm.dir, Options{})
	if got := placeMetro(t, e); got != "da" {
		t.Fatalf("metro = %q, want da", got)
	}
	digest := e.Digest()

	steps := []struct {
		name        string
		files       map[string]string
		wantChanged bool
		wantErr     []string // substrings; nil = success
		wantMetro   string
	}{
		{"unchanged", with(t, fixedEIP("da")), false, nil, "da"},
		{"new policy", with(t, fixedEIP("ny")), true, nil, "ny"},
		{"syntax error keeps previous", with(t, map[string]string{"eip.rego": "package equinix.eip\n\nplacement := {\n"}), true,
			[]string{"reload failed, still using the previous policies", "do not load", filepath.Join(cm.dir, "eip.rego") + ":"}, "ny"},
		{"http.send keeps previous", with(t, map[string]string{"eip.rego": "package equinix.eip\n\nplacement := http.send({\"method\": \"GET\", \"url\": \"http://x\"}).body\n"}), true,
			[]string{"still using the previous policies", "undefined function http.send"}, "ny"},
		{"missing rule keeps previous", with(t, map[string]string{"eip.rego": ""}), true,
			[]string{"still using the previous policies", "define no rule data.equinix.eip.placement"}, "ny"},
		{"same bad files again", with(t, map[string]string{"eip.rego": ""}), false,
			[]string{"still using the previous policies", "define no rule data.equinix.eip.placement"}, "ny"},
		{"back to the files in use", with(t, fixedEIP("ny")), true, nil, "ny"},
		{"fixed", with(t, fixedEIP("sv")), true, nil, "sv"},
		{"added data file", with(t, map[string]string{"eip.rego": "package equinix.eip\n\nplacement := {\"metro\": data.site.metro}\n", "site.json": `{"site": {"metro": "am"}}`}), true, nil, "am"},
	}
	for _, s := range steps {
		t.Run(s.name, func(t *testing.T) {
			success, failure, _ := reloadCounts(t)
			cm.update(s.files)
			changed, err := e.Reload(context.Background())
			if changed != s.wantChanged {
				t.Errorf("changed = %v, want %v", changed, s.wantChanged)
			}
			newSuccess, newFailure, failing := reloadCounts(t)
			switch {
			case s.wantErr == nil && err != nil:
				t.Fatalf("Reload: %v", err)
			case s.wantErr == nil:
				if e.LastReloadError() != nil || failing != 0 {
					t.Errorf("after a good reload: LastReloadError = %v, reload_failing = %v", e.LastReloadError(), failing)
				}
				if s.wantChanged && (newSuccess != success+1 || (e.Digest() == digest) != (s.name == "back to the files in use")) {
					t.Errorf("reloads_total{success} %v -> %v, digest %s -> %s", success, newSuccess, digest, e.Digest())
				}
			default:
				if err == nil {
					t.Fatal("Reload succeeded; want an error")
				}
				checkOneLine(t, err)
				for _, w := range s.wantErr {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("error %q lacks %q", err, w)
					}
				}
				wantFailures := failure + 1
				if !s.wantChanged { // already refused: not counted again
					wantFailures = failure
				}
				if !errors.Is(e.LastReloadError(), err) || failing != 1 || newFailure != wantFailures || e.Digest() != digest {
					t.Errorf("after a failed reload: LastReloadError = %v, reload_failing = %v, failures %v -> %v, digest changed = %v",
						e.LastReloadError(), failing, failure, newFailure, e.Digest() != digest)
				}
			}
			if got := placeMetro(t, e); got != s.wantMetro {
				t.Errorf("metro = %q, want %q", got, s.wantMetro)
			}
			digest = e.Digest()
		})
	}
}

func TestReloadBuiltinIsNoop(t *testing.T) {
	e := mustLoad(t, "", Options{})
	if changed, err := e.Reload(context.Background()); changed || err != nil {
		t.Errorf("Reload of the built-ins = %v, %v", changed, err)
	}
	if err := e.Watch(context.Background()); err != nil {
		t.Errorf("Watch of the built-ins = %v", err)
	}
}

// TestWatch checks that Watch picks up ConfigMap swaps and in-place edits
// by itself. It waits for the OnReload callback, with a generous bound
// that only turns a hang into a failure.
func TestWatch(t *testing.T) {
	reloads := make(chan error, 10)
	wait := func(t *testing.T) error {
		t.Helper()
		select {
		case err := <-reloads:
			return err
		case <-time.After(30 * time.Second):
			t.Fatal("no reload within 30s")
			return nil
		}
	}
	opts := Options{ReloadDelay: 50 * time.Millisecond, OnReload: func(err error) { reloads <- err }}
	start := func(t *testing.T, e *Engine) {
		ctx, cancel := context.WithCancel(context.Background())
		ready, done := make(chan struct{}), make(chan error)
		go func() { done <- e.watch(ctx, ready) }()
		<-ready
		t.Cleanup(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("Watch = %v", err)
			}
		})
	}

	t.Run("configmap", func(t *testing.T) {
		cm := newConfigMapDir(t, with(t, fixedEIP("da")))
		e := mustLoad(t, cm.dir, opts)
		start(t, e)
		steps := []struct {
			files     map[string]string
			wantErr   string
			wantMetro string
		}{
			{with(t, fixedEIP("ny")), "", "ny"},
			{with(t, map[string]string{"eip.rego": "package equinix.eip\n\nplacement := {\n"}), "still using the previous policies", "ny"},
			{with(t, fixedEIP("sv")), "", "sv"},
			{with(t, map[string]string{"eip.rego": "package equinix.eip\n\nplacement := {\"metro\": data.site.metro}\n", "site.json": `{"site": {"metro": "am"}}`}), "", "am"},
		}
		for i, s := range steps {
			cm.update(s.files)
			err := wait(t)
			if (s.wantErr == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), s.wantErr)) {
				t.Errorf("step %d: OnReload got %v, want an error containing %q", i, err, s.wantErr)
			}
			if got := placeMetro(t, e); got != s.wantMetro {
				t.Errorf("step %d: metro = %q, want %q", i, got, s.wantMetro)
			}
		}
	})

	// The watch runs on the leader only: a replica that takes the lead
	// must not decide with policies that changed while it followed until
	// the next resync (a minute), so the watch re-reads at once.
	t.Run("changed before the watch started", func(t *testing.T) {
		cm := newConfigMapDir(t, with(t, fixedEIP("da")))
		e := mustLoad(t, cm.dir, opts)
		cm.update(with(t, fixedEIP("ny")))
		start(t, e)
		if err := wait(t); err != nil {
			t.Fatal(err)
		}
		if got := placeMetro(t, e); got != "ny" {
			t.Errorf("metro = %q, want ny", got)
		}
	})

	t.Run("plain directory edited by rename", func(t *testing.T) {
		dir := plainDir(t, with(t, fixedEIP("da")))
		e := mustLoad(t, dir, opts)
		start(t, e)
		tmp := filepath.Join(dir, "eip.rego.tmp") // ignored: not a policy file name
		if err := os.WriteFile(tmp, []byte(fixedEIP("ny")["eip.rego"]), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, filepath.Join(dir, "eip.rego")); err != nil {
			t.Fatal(err)
		}
		if err := wait(t); err != nil {
			t.Fatal(err)
		}
		if got := placeMetro(t, e); got != "ny" {
			t.Errorf("metro = %q, want ny", got)
		}
	})
}

// TestConcurrentUse evaluates from many goroutines while policies are
// reloaded: every answer comes from one of the two policies, never from a
// half-swapped engine. Run with -race to check the swap itself.
func TestConcurrentUse(t *testing.T) {
	cm := newConfigMapDir(t, with(t, fixedEIP("da")))
	e := mustLoad(t, cm.dir, Options{})
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				p, err := e.Placement(ctx, PlacementInput{Service: serviceWith(nil), Config: defaultConfig})
				if ctx.Err() != nil {
					return
				}
				if err != nil || (p.Metro != "da" && p.Metro != "ny") {
					errs <- errors.Join(err, errors.New("unexpected placement "+p.String()))
					return
				}
				if _, err := e.SelectNodes(ctx, SelectionInput{Nodes: []Node{{Name: "a"}}}); err != nil && ctx.Err() == nil {
					errs <- err
					return
				}
			}
		}()
	}
	for i := range 20 {
		cm.update(with(t, fixedEIP([]string{"ny", "da"}[i%2])))
		if _, err := e.Reload(ctx); err != nil {
			t.Fatal(err)
		}
	}
	cancel()
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// TestRemovedKey checks a ConfigMap update that removes a key: the data
// file goes away with it, and a dangling symlink left for a moment by the
// kubelet is not an error.
func TestRemovedKey(t *testing.T) {
	files := with(t, map[string]string{
		"eip.rego":  "package equinix.eip\n\ndefault metro := \"da\"\n\nmetro := data.site.metro\n\nplacement := {\"metro\": metro}\n",
		"site.json": `{"site": {"metro": "am"}}`,
	})
	cm := newConfigMapDir(t, files)
	e := mustLoad(t, cm.dir, Options{})
	if got := placeMetro(t, e); got != "am" {
		t.Fatalf("metro = %q, want am", got)
	}
	if err := os.Symlink(filepath.Join("..data", "gone.rego"), filepath.Join(cm.dir, "gone.rego")); err != nil {
		t.Fatal(err)
	}
	delete(files, "site.json")
	cm.update(files)
	if changed, err := e.Reload(context.Background()); !changed || err != nil {
		t.Fatalf("Reload = %v, %v", changed, err)
	}
	if got := placeMetro(t, e); got != "da" {
		t.Errorf("metro = %q after site.json was removed, want da", got)
	}
}
