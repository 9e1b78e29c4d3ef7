package lbmodule

import (
	"context"

	"golang.org/x/sync/errgroup"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/metal-ccm/cloud-provider-equinix-metal/host/watchcache"
	"github.com/metal-ccm/cloud-provider-equinix-metal/sdk"
)

// readAndList makes a sync's round trips before the module's call at
// once: the module's declared reads, and the lists of every kind the sync
// may apply or prune (the kinds the module declares, and those the record
// holds: pruneKinds). Apply and prune then list nothing more in a sync
// that is as the last one left things: under a burst's load each of the
// three phases' round trips (read, apply's list, prune's list) took
// 0.2-0.9 s, one after the other, and a Service staged meanwhile waited
// for all of them before its own sync could begin.
//
// A kind that cannot be listed here (its mapping unknown, a failed list)
// is listed again where it is needed, and its error told there, as
// before: a kind only prune needs never keeps the module's objects from
// being written.
//
// Under Run, what a watch has whole comes from it (host/watchcache:
// fromWatch, and watched for the reads) and only the rest makes a round
// trip: in the MetalLB module's sync, the Secrets alone once the watches
// have synced. A Service staged while a sync makes its round trips waits
// for the next sync, so the fewer there are, the sooner its pool is
// written.
func (r *Reconciler) readAndList(ctx context.Context, d sdk.Description) ([]sdk.Object, *listed, error) {
	reads, err := r.readJobs(d)
	if err != nil {
		return nil, nil, err
	}
	var lists []listJob
	l := newListed()
	// Without the record (a failed read of it), apply's recordKinds
	// reads it again and says what is wrong.
	if record, err := r.loadRecord(ctx); err == nil {
		lists = r.fromWatch(l, r.knownListJobs(pruneKinds(record, d)))
		if r.watch != nil {
			r.watch.Sweep() // every selection a sync reads has been asked for
		}
	}
	var existing []sdk.Object
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error {
		var err error
		existing, err = runReads(gctx, reads)
		return err
	})
	g.Go(func() error {
		l.run(gctx, r, lists) // what failed is listed again where needed
		return nil
	})
	if err := g.Wait(); err != nil {
		return nil, nil, err
	}
	return existing, l, nil
}

// knownListJobs are the jobs for the kinds whose mapping is known without
// asking the API server again (mapping refreshes discovery on a kind it
// does not know: prune does that, once a sync, for a kind whose CRD is
// gone) and that can be listed where they are recorded.
func (r *Reconciler) knownListJobs(keys []kindKey) []listJob {
	var jobs []listJob
	for _, k := range keys {
		gvk := k.gvk()
		m, ok := r.mappings[gvk]
		if !ok {
			var err error
			if m, err = r.mapper.RESTMapping(gvk.GroupKind(), gvk.Version); err != nil {
				continue
			}
			r.mappings[gvk] = m
		}
		if (m.Scope.Name() == meta.RESTScopeNameNamespace) != (k.Namespace != "") {
			continue // apply and prune refuse it, with the fix
		}
		jobs = append(jobs, listJob{k, m})
	}
	return jobs
}

// fromWatch puts into l the kinds of jobs that r.watch has whole, and
// returns the jobs left to list. The watch's copy may lag the last sync's
// own writes by a moment: an object it wrote and the copy lacks is written
// again (the same body: no change), one it deleted and the copy still has
// is deleted again (a NotFound, which prune tolerates), and
// version.unchanged tells the copy's older generation of an object from
// another writer's change.
func (r *Reconciler) fromWatch(l *listed, jobs []listJob) []listJob {
	if r.watch == nil {
		return jobs
	}
	var rest []listJob
	for _, j := range jobs {
		if j.m.Resource == secrets {
			rest = append(rest, j)
			continue
		}
		items, ok := r.watch.Metadata(watchcache.Selection{Resource: j.m.Resource, Namespace: j.k.Namespace})
		if !ok {
			rest = append(rest, j)
			continue
		}
		live := make([]liveObject, len(items))
		for i, o := range items {
			live[i] = newLiveObject(o)
		}
		l.add(j.k, live)
	}
	return rest
}

// secrets are never watched: the chart lets the CCM list and write the
// Secrets of the BGP password in its load balancer's namespace, not watch
// them (a watch would be sent every Secret there as it changes), so each
// sync lists them.
var secrets = schema.GroupVersionResource{Version: "v1", Resource: "secrets"}
