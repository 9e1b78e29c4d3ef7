//go:build linux

// Package faults is the fault-injection run of the CCM: the binary as it
// ships, two replicas with leader election against a real kube-apiserver
// (test/testenv) and the Equinix Metal emulator answering a share
// of requests with 429, 500, 503, a reset connection or an answer lost for
// a long time, while Services are created and deleted and the CCM is
// killed with SIGKILL (the leader too). It then stops the faults and checks
// the invariants of World.Problems: no leaked and no duplicate
// reservation, every Service converged, no stale MetalLB object.
//
// A short run is a test of `make test`; `make soak` runs a long one and
// prints the Report.
package faults

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/metal-ccm/cloud-provider-equinix-metal/test/emulator"
	"github.com/metal-ccm/cloud-provider-equinix-metal/test/sandbox"
	"github.com/metal-ccm/cloud-provider-equinix-metal/test/testenv"
)

// Options configure Run. Zero values take the defaults in brackets.
type Options struct {
	CCM string // the CCM binary (required)
	Dir string // logs, kubeconfig, cloud-config (required)
	// Cycles is how many Services are created and deleted [30]; Parallel
	// of them at once [4]. Keep more Services live through the whole run
	// [3], so that convergence is checked on Services that saw every fault.
	Cycles, Parallel, Keep int
	// FaultRate is the share of Equinix API requests that fail [0.1;
	// negative for none]: a
	// tenth of it answers lost for LostFor [35s], the rest split evenly
	// between 429, 500, 503 and reset connections.
	FaultRate float64
	LostFor   time.Duration
	// Kills is how many times a replica is killed with SIGKILL [2]; the
	// first, and every other one after it, is the leader.
	Kills int
	// EarlyDelete is the share of Services deleted before their address
	// could be assigned, at a random moment of the first second [0.2;
	// negative for none].
	EarlyDelete float64
	// IPTimeout bounds the wait for one Service's address [2m];
	// ConvergeTimeout the wait for convergence after the faults stop [3m].
	IPTimeout, ConvergeTimeout time.Duration
	Logf                       func(format string, args ...any)
}

func (o *Options) defaults() {
	def := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&o.Cycles, 30)
	def(&o.Parallel, 4)
	def(&o.Keep, 3)
	def(&o.Kills, 2)
	o.FaultRate = share(o.FaultRate, 0.1)
	o.EarlyDelete = share(o.EarlyDelete, 0.2)
	if o.LostFor <= 0 {
		o.LostFor = emulator.DefaultLostFor
	}
	if o.IPTimeout <= 0 {
		o.IPTimeout = 2 * time.Minute
	}
	if o.ConvergeTimeout <= 0 {
		o.ConvergeTimeout = 3 * time.Minute
	}
	if o.Logf == nil {
		o.Logf = func(string, ...any) {}
	}
}

// share is v, d when v is zero, none when v is negative.
func share(v, d float64) float64 {
	switch {
	case v == 0:
		return d
	case v < 0:
		return 0
	}
	return v
}

// devices are the project's worker machines (their Nodes get BGP).
var devices = []sandbox.Device{{Name: "worker-0", Metro: "da"}, {Name: "worker-1", Metro: "da"}, {Name: "worker-2", Metro: "da"}}

// Run starts everything, churns under faults and kills, stops the faults
// and waits for convergence. An error is a failure to run; what the CCM
// got wrong is in Report.Problems.
func Run(ctx context.Context, o Options) (*Report, error) {
	o.defaults()
	if _, err := os.Stat(o.CCM); err != nil {
		return nil, fmt.Errorf("no CCM binary at %s: run make build", o.CCM)
	}
	w, err := startWorld(ctx, o.Dir, o.Logf)
	if err != nil {
		return nil, err
	}
	defer w.stop()
	emu, env, kube, ns := w.emu, w.env, w.kube, w.ns
	reps, err := startReplicas(2, o.CCM, o.Dir, w.metalURL, env.KubeconfigPath, shortLeases)
	if err != nil {
		return nil, err
	}
	defer reps.stop()
	stopSupervise := make(chan struct{})
	defer close(stopSupervise)
	go reps.supervise(stopSupervise)

	obs := &observer{kube: kube, dyn: dynamic.NewForConfigOrDie(env.Config), emu: emu, clusterID: string(ns.UID), names: map[string]string{}}
	r := &run{o: o, kube: kube, emu: emu, reps: reps, obs: obs, rep: &Report{Options: o}}
	if err := r.warmUp(ctx); err != nil {
		return nil, err
	}
	if err := r.churn(ctx); err != nil {
		return nil, err
	}
	r.converge(ctx)
	r.rep.LeaseLosses, r.rep.Crashes = reps.exits()
	r.rep.Faults = emu.InjectedFaults()
	r.rep.Requests = emu.TotalRequests()
	r.rep.MaxReservationsPerService = obs.duplicatesSeen()
	return r.rep, nil
}

// world is what the replicas run against: the emulator with the project's
// devices, a kube-apiserver with their Nodes.
type world struct {
	emu      *emulator.Emulator
	metalURL string
	env      *testenv.Env
	kube     kubernetes.Interface
	ns       *v1.Namespace // kube-system, whose UID is the cluster's ID
}

func startWorld(ctx context.Context, dir string, logf func(string, ...any)) (_ *world, err error) {
	w := &world{}
	defer func() {
		if err != nil {
			w.stop()
		}
	}()
	if w.emu, err = emulator.New(sandbox.Seed(devices, false), emulator.Options{}); err != nil {
		return nil, err
	}
	if w.metalURL, err = w.emu.Listen("127.0.0.1:0"); err != nil {
		return nil, err
	}
	if w.env, err = testenv.Start(ctx, testenv.Options{Dir: filepath.Join(dir, "cluster"), KeepDir: true, Logf: logf}); err != nil {
		return nil, err
	}
	w.kube = kubernetes.NewForConfigOrDie(w.env.Config)
	if w.ns, err = w.kube.CoreV1().Namespaces().Get(ctx, metav1.NamespaceSystem, metav1.GetOptions{}); err != nil {
		return nil, err
	}
	return w, sandbox.RegisterNodes(ctx, w.kube, devices)
}

func (w *world) stop() {
	if w.env != nil {
		w.env.Stop()
	}
	if w.emu != nil {
		w.emu.Close()
	}
}

type run struct {
	o    Options
	kube kubernetes.Interface
	emu  *emulator.Emulator
	reps *replicas
	obs  *observer
	rep  *Report
	mu   sync.Mutex // guards rep's slices during the churn
}

// warmUp waits for a leader and initialised nodes, and creates the Services
// kept through the run, before any fault: what is measured is the CCM
// under faults, not its first start.
func (r *run) warmUp(ctx context.Context) error {
	if _, err := r.reps.waitLeader(time.Minute); err != nil {
		return err
	}
	for i := range r.o.Keep {
		if err := r.create(ctx, fmt.Sprintf("keep-%d", i)); err != nil {
			return err
		}
	}
	deadline := time.Now().Add(2 * time.Minute)
	for {
		w, err := r.obs.world(ctx)
		if err == nil && len(w.Problems()) == 0 && len(w.Services) == r.o.Keep {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the CCM did not serve %d Services within 2 minutes, before any fault (%v %s); logs in %s",
				r.o.Keep, err, Summary(w.Problems(), 5), r.o.Dir)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

func (r *run) create(ctx context.Context, name string) error {
	svc := &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: metav1.NamespaceDefault, Name: name},
		Spec: v1.ServiceSpec{Type: v1.ServiceTypeLoadBalancer, Selector: map[string]string{"app": name},
			Ports: []v1.ServicePort{{Name: "http", Protocol: v1.ProtocolTCP, Port: 80}}},
	}
	r.obs.created(svc.Namespace, svc.Name)
	_, err := r.kube.CoreV1().Services(svc.Namespace).Create(ctx, svc, metav1.CreateOptions{})
	return err
}

func (r *run) delete(ctx context.Context, name string) error {
	err := r.kube.CoreV1().Services(metav1.NamespaceDefault).Delete(ctx, name, metav1.DeleteOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// faults is the standing fault of every route for the run's FaultRate.
func (r *run) faults() emulator.Fault {
	lost := r.o.FaultRate / 10
	each := (r.o.FaultRate - lost) / 4
	return emulator.Fault{RateLimitShare: each, ServerErrorShare: each, UnavailableShare: each, ResetShare: each,
		LostShare: lost, LostFor: emulator.Duration(r.o.LostFor)}
}

// churn turns the faults on, runs the cycles (Parallel workers) and the
// kills, and turns the faults off.
func (r *run) churn(ctx context.Context) error {
	r.emu.SetFault(emulator.AllRoutes, r.faults())
	// Whatever the draws, the calls that matter most meet each kind of
	// fault at least once: a reservation created whose answer is lost (the
	// CCM must find it by its tags, not create another), a release reset.
	lostFor := emulator.Duration(r.o.LostFor)
	r.emu.FailNext(emulator.RouteRequestIPReservation, 1, emulator.Failure{Lost: true, LostFor: lostFor})
	r.emu.FailNext(emulator.RouteRequestIPReservation, 1, emulator.Failure{Status: 503})
	r.emu.FailNext(emulator.RouteListIPReservations, 1, emulator.Failure{Status: 429})
	r.emu.FailNext(emulator.RouteDeleteIP, 1, emulator.Failure{Reset: true})
	r.emu.FailNext(emulator.RouteDeleteIP, 1, emulator.Failure{Status: 500})
	r.o.Logf("faults on (%.0f%% of Equinix API requests); %d cycles, %d at once; %d kills", r.o.FaultRate*100, r.o.Cycles, r.o.Parallel, r.o.Kills)
	start := time.Now()
	var next, done atomic.Int64
	errs := make(chan error, r.o.Parallel+1)
	var wg sync.WaitGroup
	for range r.o.Parallel {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				c := next.Add(1)
				if c > int64(r.o.Cycles) || ctx.Err() != nil {
					return
				}
				if err := r.cycle(ctx, int(c)); err != nil {
					errs <- err
					return
				}
				done.Add(1)
			}
		}()
	}
	stopSample := make(chan struct{})
	go r.sampleDuplicates(stopSample)
	r.killer(ctx, &done, errs)
	wg.Wait()
	close(stopSample)
	r.emu.ClearFaults()
	r.rep.ChurnDuration = time.Since(start)
	r.o.Logf("faults off after %v", r.rep.ChurnDuration.Round(time.Millisecond))
	select {
	case err := <-errs:
		return err
	default:
		return nil
	}
}

// cycle creates one Service, waits for its address (or deletes it early),
// and deletes it.
func (r *run) cycle(ctx context.Context, c int) error {
	name := fmt.Sprintf("churn-%04d", c)
	created := time.Now()
	if err := r.create(ctx, name); err != nil {
		return fmt.Errorf("creating %s: %w", name, err)
	}
	if rand.Float64() < r.o.EarlyDelete {
		time.Sleep(time.Duration(rand.Int64N(int64(time.Second))))
		r.mu.Lock()
		r.rep.EarlyDeletes++
		r.mu.Unlock()
		return r.delete(ctx, name)
	}
	for {
		s, err := r.kube.CoreV1().Services(metav1.NamespaceDefault).Get(ctx, name, metav1.GetOptions{})
		if err == nil && len(s.Status.LoadBalancer.Ingress) > 0 {
			r.mu.Lock()
			r.rep.TimesToIP = append(r.rep.TimesToIP, time.Since(created))
			r.mu.Unlock()
			break
		}
		if time.Since(created) > r.o.IPTimeout {
			r.mu.Lock()
			r.rep.IPTimeouts = append(r.rep.IPTimeouts, name)
			r.mu.Unlock()
			break
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		time.Sleep(100 * time.Millisecond)
	}
	return r.delete(ctx, name)
}

// killer kills a replica each time another share of the cycles is done:
// the leader first, then alternately a follower and the leader.
func (r *run) killer(ctx context.Context, done *atomic.Int64, errs chan<- error) {
	for k := range r.o.Kills {
		at := int64((k + 1) * r.o.Cycles / (r.o.Kills + 1))
		for done.Load() < at {
			if ctx.Err() != nil {
				return
			}
			time.Sleep(50 * time.Millisecond)
		}
		leader, err := r.reps.waitLeader(time.Minute)
		if err != nil {
			errs <- err
			return
		}
		victim, what := leader, "leader"
		if k%2 == 1 {
			victim, what = 1-leader, "follower"
		} else {
			r.rep.LeaderKills++
		}
		r.o.Logf("kill -9 of replica %d (%s) after %d cycles", victim, what, done.Load())
		if err := r.reps.kill(victim, time.Second); err != nil {
			errs <- err
			return
		}
		r.rep.Kills++
	}
}

// sampleDuplicates reads the reservations four times a second, so that two
// reservations for one Service count even if one is later released.
func (r *run) sampleDuplicates(stop <-chan struct{}) {
	t := time.NewTicker(250 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
			r.obs.reservations()
		}
	}
}

// converge waits, the faults off, until the world has no problem, and
// records how long that took (or the problems left at the timeout).
func (r *run) converge(ctx context.Context) {
	start := time.Now()
	for {
		w, err := r.obs.world(ctx)
		var problems []string
		if err != nil {
			problems = []string{err.Error()}
		} else {
			problems = w.Problems()
			r.rep.LiveServices, r.rep.Reservations = len(w.Services), len(w.Reservations)
		}
		if len(problems) == 0 {
			r.rep.ConvergedAfter = time.Since(start)
			r.rep.Converged = true
			return
		}
		if time.Since(start) > r.o.ConvergeTimeout || ctx.Err() != nil {
			r.rep.Problems = problems
			r.rep.ConvergedAfter = time.Since(start)
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
}
