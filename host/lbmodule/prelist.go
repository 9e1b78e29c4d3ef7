package lbmodule

import (
	"context"

	"golang.org/x/sync/errgroup"

	"k8s.io/apimachinery/pkg/api/meta"

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
func (r *Reconciler) readAndList(ctx context.Context, d sdk.Description) ([]sdk.Object, *listed, error) {
	reads, err := r.readJobs(d)
	if err != nil {
		return nil, nil, err
	}
	var lists []listJob
	// Without the record (a failed read of it), apply's recordKinds
	// reads it again and says what is wrong.
	if record, err := r.loadRecord(ctx); err == nil {
		lists = r.knownListJobs(pruneKinds(record, d))
	}
	l := newListed()
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
