//go:build linux && system

package faults

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
)

// TestHandOver stops the leader of two replicas run with the chart's
// leader-election timings (the CCM's defaults: a 15 s Lease, 2 s retries),
// once as kubelet stops a pod (SIGTERM) and once with kill -9, and
// measures what a user waits for: the other replica leading, and a
// Service created at that moment getting its address. On SIGTERM the
// leader releases its Lease, so the other replica must lead before that
// Lease would have run out; after kill -9 it can only wait for it.
func TestHandOver(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the CCM and starts a kube-apiserver; run without -short")
	}
	ccm := os.Getenv("METAL_CCM_FAULTS_CCM")
	if ccm == "" {
		ccm = buildCCM(t)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	dir := t.TempDir()
	w, err := startWorld(ctx, dir, t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	defer w.stop()
	reps, err := startReplicas(2, ccm, dir, w.metalURL, w.env.KubeconfigPath, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer reps.stop()
	defer func() {
		if t.Failed() {
			t.Logf("logs kept in %s", keep(dir))
		}
	}()
	if _, err := reps.waitLeader(time.Minute); err != nil {
		t.Fatal(err)
	}
	// The first Service: the leader is warm (module loaded, informers
	// synced) before anything is measured.
	if _, err := createAndWait(ctx, w.kube, "warm", 2*time.Minute); err != nil {
		t.Fatal(err)
	}

	var table strings.Builder
	fmt.Fprintf(&table, "%-8s %-22s %-26s %s\n", "stop", "other replica leads", "new Service has address", "Lease left at hand-over")
	for _, stop := range []string{"SIGTERM", "SIGKILL"} {
		old, err := reps.waitLeader(time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		lease, err := w.kube.CoordinationV1().Leases("kube-system").Get(ctx, "cloud-controller-manager", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		expiry := lease.Spec.RenewTime.Add(time.Duration(*lease.Spec.LeaseDurationSeconds) * time.Second)
		p := reps.procs[old]
		stopped := time.Now()
		name := "after-" + strings.ToLower(stop)
		created := make(chan error, 1)
		var toIP time.Duration
		go func() {
			d, err := createAndWait(ctx, w.kube, name, 2*time.Minute)
			toIP = d
			created <- err
		}()
		if stop == "SIGTERM" {
			p.Stop() // SIGTERM, SIGKILL after 5 s
		} else {
			p.Kill()
		}
		next, lead, err := waitOtherLeader(reps, old, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		toLead := lead.Sub(stopped)
		if err := <-created; err != nil {
			t.Fatalf("%s: %v", stop, err)
		}
		left := expiry.Sub(lead)
		fmt.Fprintf(&table, "%-8s %-22s %-26s %s\n", stop, toLead.Round(100*time.Millisecond), toIP.Round(100*time.Millisecond), left.Round(100*time.Millisecond))

		if stop == "SIGTERM" {
			if exited, err := p.Exited(); !exited || err != nil {
				t.Errorf("SIGTERM: the old leader exited %v with %v, want a clean exit within the 5 s grace", exited, err)
			}
			if b, _ := os.ReadFile(p.Log); !bytes.Contains(b, []byte("released the Lease for the next leader")) {
				t.Errorf("SIGTERM: the old leader's log (%s) does not say it released the Lease", p.Log)
			}
			if !lead.Before(expiry) {
				t.Errorf("SIGTERM: replica %d led only after the released Lease would have run out (%v after)", next, -left)
			}
		}
		// Kubelet starts the container again.
		reps.mu.Lock()
		err = reps.start(old)
		reps.mu.Unlock()
		if err != nil {
			t.Fatal(err)
		}
	}
	t.Log("leader stopped → (chart's lease timings: 15 s duration, 2 s retry)\n" + table.String())
}

// waitOtherLeader waits for a replica other than old to lead and returns
// it with the time its log says it acquired the Lease (polled: the time
// is when the poll saw it, at most 100 ms late).
func waitOtherLeader(reps *replicas, old int, timeout time.Duration) (int, time.Time, error) {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if i := reps.leader(); i >= 0 && i != old {
			return i, time.Now(), nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return -1, time.Time{}, fmt.Errorf("no other replica led within %v; logs in %s", timeout, reps.dir)
}

// createAndWait creates a LoadBalancer Service and returns how long it
// took to get an address.
func createAndWait(ctx context.Context, kube kubernetes.Interface, name string, timeout time.Duration) (time.Duration, error) {
	svc := &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: metav1.NamespaceDefault, Name: name},
		Spec: v1.ServiceSpec{Type: v1.ServiceTypeLoadBalancer, Selector: map[string]string{"app": name},
			Ports: []v1.ServicePort{{Name: "http", Protocol: v1.ProtocolTCP, Port: 80}}},
	}
	start := time.Now()
	if _, err := kube.CoreV1().Services(svc.Namespace).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		return 0, err
	}
	err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		s, err := kube.CoreV1().Services(svc.Namespace).Get(ctx, name, metav1.GetOptions{})
		return err == nil && len(s.Status.LoadBalancer.Ingress) > 0, nil
	})
	if err != nil {
		return 0, fmt.Errorf("Service %s has no address after %v", name, timeout)
	}
	return time.Since(start), nil
}
