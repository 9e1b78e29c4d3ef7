package testenv

import (
	"context"
	"testing"
)

// New starts an Env for a test with the given options (at most one; none
// means the defaults), logs its progress to the test, and stops it when the
// test ends. A missing binary or any start-up failure fails the test (with
// "run make k8s-bins" when the binaries are missing): it never skips, so a
// run without the server cannot look green. When the test failed, the work
// directory with the etcd, kube-apiserver and audit logs is kept and named.
func New(t testing.TB, opts ...Options) *Env {
	t.Helper()
	var o Options
	switch len(opts) {
	case 0:
	case 1:
		o = opts[0]
	default:
		t.Fatalf("testenv.New: give at most one Options, got %d", len(opts))
	}
	if o.Logf == nil {
		o.Logf = t.Logf
	}
	env, err := Start(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() && env.removeDir {
			env.removeDir = false
			t.Logf("testenv: test failed; logs kept in %s", env.Dir)
		}
		env.Stop()
	})
	return env
}
