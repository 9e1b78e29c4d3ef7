package watchcache_test

import (
	"context"
	"reflect"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/klog/v2"

	"github.com/metal-ccm/cloud-provider-equinix-metal/host/watchcache"
	"github.com/metal-ccm/cloud-provider-equinix-metal/test/testenv"
)

var configMaps = corev1.SchemeGroupVersion.WithResource("configmaps")

// eventually polls f until it holds, or fails the test saying what.
func eventually(t *testing.T, what string, f func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !f() {
		if time.Now().After(deadline) {
			t.Fatalf("after 20s: %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func metadataNames(c *watchcache.Cache, sel watchcache.Selection) ([]string, bool) {
	items, ok := c.Metadata(sel)
	if !ok {
		return nil, false
	}
	var out []string
	for _, m := range items {
		out = append(out, m.Name)
	}
	return out, true
}

func TestCache(t *testing.T) {
	if testing.Short() {
		t.Skip("watches a real kube-apiserver; run without -short")
	}
	env := testenv.New(t, testenv.Options{Users: []testenv.User{{Name: "lister"}}})
	kube := kubernetes.NewForConfigOrDie(env.Config)
	ctx := context.Background()
	if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "w"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	create := func(name string, labels map[string]string) {
		t.Helper()
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "w", Labels: labels, Annotations: map[string]string{"note": "big"}}, Data: map[string]string{"k": name}}
		if _, err := kube.CoreV1().ConfigMaps("w").Create(ctx, cm, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	mine := map[string]string{"owner": "ccm"}
	// A label unique to each object, as a pool's Service's is: not kept.
	create("b", map[string]string{"owner": "ccm", "service-b": "default"})
	create("a", map[string]string{"owner": "ccm", "service-a": "default"})
	create("other", nil)
	sel := watchcache.Selection{Resource: configMaps, Namespace: "w", LabelSelector: "owner=ccm"}
	newCache := func(t *testing.T) *watchcache.Cache {
		ctx, cancel := context.WithCancel(ctx)
		t.Cleanup(cancel)
		return watchcache.New(ctx, dynamic.NewForConfigOrDie(env.Config), metadata.NewForConfigOrDie(env.Config), klog.Background(), nil, "owner")
	}

	t.Run("metadata: served once synced, slim, and following changes", func(t *testing.T) {
		c := newCache(t)
		if _, ok := c.Metadata(sel); ok {
			t.Fatal("served on the first ask: the watch has only just started")
		}
		eventually(t, "the watch serves a and b", func() bool {
			names, ok := metadataNames(c, sel)
			return ok && reflect.DeepEqual(names, []string{"a", "b"})
		})
		items, _ := c.Metadata(sel)
		for _, m := range items {
			if m.ManagedFields != nil || m.Annotations != nil || m.UID == "" || m.ResourceVersion == "" || !reflect.DeepEqual(m.Labels, mine) {
				t.Errorf("%s: want name, UID, resourceVersion and the kept label only, got %+v", m.Name, m.ObjectMeta)
			}
		}
		// Equal kept labels are one map: 10,000 pools hold one.
		if len(items) == 2 && reflect.ValueOf(items[0].Labels).UnsafePointer() != reflect.ValueOf(items[1].Labels).UnsafePointer() {
			t.Error("a and b have the same kept labels in two maps: want one, shared")
		}
		create("c", mine)
		if err := kube.CoreV1().ConfigMaps("w").Delete(ctx, "a", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		eventually(t, "the watch follows a create and a delete", func() bool {
			names, ok := metadataNames(c, sel)
			return ok && reflect.DeepEqual(names, []string{"b", "c"})
		})
	})

	t.Run("objects: whole, without managed fields, copies", func(t *testing.T) {
		c := newCache(t)
		var objs []string
		eventually(t, "the watch serves b and c", func() bool {
			items, ok := c.Objects(sel)
			objs = nil
			for _, u := range items {
				objs = append(objs, u.GetName())
			}
			return ok && reflect.DeepEqual(objs, []string{"b", "c"})
		})
		items, _ := c.Objects(sel)
		if d, _, _ := unstructured.NestedString(items[0].Object, "data", "k"); d != "b" {
			t.Errorf("b's data: %q, want the whole object", d)
		}
		if items[0].GetManagedFields() != nil {
			t.Error("managedFields kept")
		}
		items[0].Object["data"] = nil // the caller's copy
		again, _ := c.Objects(sel)
		if d, _, _ := unstructured.NestedString(again[0].Object, "data", "k"); d != "b" {
			t.Error("a change to a served object reached the cache")
		}
	})

	t.Run("a deleted owned object is told, another is not", func(t *testing.T) {
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		var deletes atomic.Int32
		c := watchcache.New(ctx, nil, metadata.NewForConfigOrDie(env.Config), klog.Background(), func() { deletes.Add(1) }, "owner")
		all := watchcache.Selection{Resource: configMaps, Namespace: "w"} // as the sync's metadata lists: no selector
		create("mine", mine)
		create("theirs", nil)
		eventually(t, "the watch serves mine and theirs", func() bool {
			names, ok := metadataNames(c, all)
			return ok && slices.Contains(names, "mine") && slices.Contains(names, "theirs")
		})
		// One watch delivers its events in order: theirs is seen before
		// mine, so once mine is told, theirs was not.
		for _, name := range []string{"theirs", "mine"} {
			if err := kube.CoreV1().ConfigMaps("w").Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		eventually(t, "the owned object's delete is told", func() bool { return deletes.Load() > 0 })
		if n := deletes.Load(); n != 1 {
			t.Errorf("told %d deletes, want 1 (mine; theirs has no kept label)", n)
		}
	})

	t.Run("a resource whose watch is refused is never served", func(t *testing.T) {
		// lister may list ConfigMaps in w, not watch them (as the chart
		// lets the CCM list Secrets).
		role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "lister", Namespace: "w"},
			Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"list"}}}}
		if _, err := kube.RbacV1().Roles("w").Create(ctx, role, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		rb := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "lister", Namespace: "w"},
			RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: "lister"},
			Subjects: []rbacv1.Subject{{APIGroup: "rbac.authorization.k8s.io", Kind: "User", Name: "lister"}}}
		if _, err := kube.RbacV1().RoleBindings("w").Create(ctx, rb, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		cfg, err := env.UserConfig("lister")
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		c := watchcache.New(ctx, nil, metadata.NewForConfigOrDie(cfg), klog.Background(), nil)
		if _, ok := c.Metadata(sel); ok {
			t.Fatal("served on the first ask")
		}
		eventually(t, "the refused watch is dropped", func() bool { return c.Watching() == 0 })
		for range 5 {
			if _, ok := c.Metadata(sel); ok {
				t.Fatal("a refused watch served")
			}
			time.Sleep(50 * time.Millisecond)
		}
		if n := c.Watching(); n != 0 {
			t.Errorf("%d watches after asks for a refused resource: want none started again", n)
		}
		// Whole objects need the dynamic client, which this cache lacks.
		if _, ok := c.Objects(sel); ok {
			t.Error("whole objects served without a dynamic client")
		}
	})

	t.Run("sweep stops the watches no one asked for", func(t *testing.T) {
		c := newCache(t)
		other := watchcache.Selection{Resource: configMaps, Namespace: "w"}
		c.Metadata(sel)
		c.Metadata(other)
		c.Objects(sel)
		c.Sweep()
		if n := c.Watching(); n != 3 {
			t.Fatalf("%d watches, want 3 (two selections as metadata, one whole)", n)
		}
		c.Metadata(sel)
		c.Sweep()
		if n := c.Watching(); n != 1 {
			t.Fatalf("%d watches after a sweep, want the one asked for since", n)
		}
		eventually(t, "the kept watch serves", func() bool { _, ok := c.Metadata(sel); return ok })
	})

	t.Run("nothing is served once its context has ended", func(t *testing.T) {
		ctx, cancel := context.WithCancel(ctx)
		c := watchcache.New(ctx, nil, metadata.NewForConfigOrDie(env.Config), klog.Background(), nil)
		eventually(t, "served", func() bool { _, ok := c.Metadata(sel); return ok })
		cancel()
		if _, ok := c.Metadata(sel); ok {
			t.Error("served after its context ended: its watch no longer follows changes")
		}
	})
}
