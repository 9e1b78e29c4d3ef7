package main

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/metal-ccm/cloud-provider-equinix-metal/sdk/wasmhost"
	"github.com/metal-ccm/cloud-provider-equinix-metal/test/emulator"
	"github.com/metal-ccm/cloud-provider-equinix-metal/test/testenv"
)

// phase is one measured step.
type phase struct {
	name     string
	wall     time.Duration
	calls    map[emulator.Route]int64
	generate *ccmMetrics
	// writes by the CCM's user, by "verb resource[/subresource]"
	writes map[string]int
}

type report struct {
	o                                   options
	nodesReady, servicesReady, fillWall time.Duration
	// nodesUntainted: from the CCM's start until every node lost the
	// uninitialized taint, to the informer event.
	nodesUntainted                   time.Duration
	fill, quiet, oneService, oneNode phase
	peakRSSKiB, rssAfterFillKiB      int64
	peakAnonKiB                      int64 // sampled every second
	// cgroup: the CCM ran in a memory cgroup with the limit; its peak
	// charge (bytes, page cache included) and the OOM kills in it.
	cgroup        bool
	cgroupPeak    int64
	oomKills      int
	moduleApplied bool
	lease         leaseWatch
	// settled is how long after the fill the CCM's writes stopped.
	settled time.Duration
	module  *moduleResult
}

// writeVerbs are the verbs that change the cluster.
var writeVerbs = map[string]bool{"create": true, "update": true, "patch": true, "delete": true, "deletecollection": true}

func writesOf(calls []testenv.APICall) map[string]int {
	out := map[string]int{}
	for _, c := range calls {
		if !writeVerbs[c.Verb] || c.Resource == "" {
			continue
		}
		r := c.Resource
		if c.Subresource != "" {
			r += "/" + c.Subresource
		}
		out[c.Verb+" "+r]++
	}
	return out
}

func (p phase) totalCalls() int64 {
	var n int64
	for _, v := range p.calls {
		n += v
	}
	return n
}

func (p phase) totalWrites(skip ...string) int {
	n := 0
outer:
	for k, v := range p.writes {
		for _, s := range skip {
			if strings.HasSuffix(k, " "+s) {
				continue outer
			}
		}
		n += v
	}
	return n
}

func (r *report) String() string {
	var b strings.Builder
	o := r.o
	fmt.Fprintf(&b, "\n=== scale bench: %d LoadBalancer Services on %d nodes (2 BGP peers each), %s Equinix API latency, CCM %s\n",
		o.services, o.nodes, o.latency, o.ccm)
	if r.fill.name == "" {
		b.WriteString("\nThe fill did not finish: see the progress lines above.\n")
		if r.cgroup {
			fmt.Fprintf(&b, "Memory cgroup (%d MiB): peak charge %.1f MiB, OOM kills %d\n", o.memoryLimit>>20, float64(r.cgroupPeak)/(1<<20), r.oomKills)
		}
		fmt.Fprintf(&b, "%s\n", r.lease.String())
		return b.String()
	}
	fmt.Fprintf(&b, "\nFrom empty (CCM start) to every Service with its ingress:\n")
	fmt.Fprintf(&b, "  nodes untainted (initialised)     %s\n", r.nodesUntainted.Round(time.Millisecond))
	fmt.Fprintf(&b, "  nodes initialised with BGP peers  %s\n", r.nodesReady.Round(time.Millisecond))
	fmt.Fprintf(&b, "  Services with ingress             %s\n", r.servicesReady.Round(time.Millisecond))
	if r.moduleApplied {
		fmt.Fprintf(&b, "  module objects all applied        %s\n", r.fillWall.Round(time.Millisecond))
	} else {
		fmt.Fprintf(&b, "  module objects all applied        NEVER (gave up %s after the last ingress, at %s; see the sync results)\n", o.moduleWait, r.fillWall.Round(time.Millisecond))
	}
	r.writePhase(&b, r.fill, o.services)
	limit := "no memory limit (GOMEMLIMIT unset)"
	if o.memoryLimit > 0 {
		limit = fmt.Sprintf("as under a %d MiB container limit (GOMEMLIMIT %d MiB)", o.memoryLimit>>20, goMemoryLimit(o.memoryLimit)>>20)
		if r.cgroup {
			limit = fmt.Sprintf("under a %d MiB memory cgroup limit (GOMEMLIMIT %d MiB, as in a pod)", o.memoryLimit>>20, goMemoryLimit(o.memoryLimit)>>20)
		}
	}
	fmt.Fprintf(&b, "\nCCM memory, %s: peak RSS (VmHWM) %.1f MiB, of which anonymous at most %.1f MiB (sampled every second; the rest is mostly the binary's own pages); RSS right after the fill %.1f MiB\n",
		limit, float64(r.peakRSSKiB)/1024, float64(r.peakAnonKiB)/1024, float64(r.rssAfterFillKiB)/1024)
	if r.cgroup {
		fmt.Fprintf(&b, "Memory cgroup: peak charge %.1f MiB (page cache included, which the kernel reclaims before it kills), OOM kills %d\n",
			float64(r.cgroupPeak)/(1<<20), r.oomKills)
	}
	fmt.Fprintf(&b, "%s\n", r.lease.String())
	fmt.Fprintf(&b, "The CCM's writes stopped %s after the fill (the service controller's queue drained).\n", r.settled.Round(time.Second))
	if r.quiet.name != "" {
		fmt.Fprintf(&b, "\nNothing changing, for %s (the periodic re-reads that also run during the two steps below):\n", r.quiet.wall.Round(time.Second))
		r.writePhase(&b, r.quiet, 0)
	}
	if r.oneService.name == "" {
		b.WriteString("\nOne more Service: not measured (an earlier step failed).\n")
		return b.String() + r.moduleString()
	}
	what := map[bool]string{true: "ingress and its pool applied", false: "ingress (the module is not converging)"}[r.moduleApplied]
	fmt.Fprintf(&b, "\nOne more Service at that size: %s after %s\n", what, r.oneService.wall.Round(time.Millisecond))
	r.writePhase(&b, r.oneService, 1)
	if r.oneNode.name == "" {
		b.WriteString("\nOne node joining: not measured (an earlier step failed).\n")
		return b.String() + r.moduleString()
	}
	what = map[bool]string{true: "initialised, annotated and its BGPPeers applied", false: "initialised and annotated (the module is not converging)"}[r.moduleApplied]
	fmt.Fprintf(&b, "\nOne node joining at that size: %s after %s\n", what, r.oneNode.wall.Round(time.Millisecond))
	r.writePhase(&b, r.oneNode, 0)
	b.WriteString(r.moduleString())
	return b.String()
}

// moduleString is the in-process module measurement, if any.
func (r *report) moduleString() string {
	m, o := r.module, r.o
	if m == nil {
		return ""
	}
	var b strings.Builder
	fmt.Fprintf(&b, "\nThe metallb-crd module in process at %d x %d (request %.1f MiB):\n", o.services, o.nodes, float64(m.requestBytes)/(1<<20))
	if m.defaultErr != nil {
		fmt.Fprintf(&b, "  with the defaults (%d MiB, %s): FAILS after %s: %v\n", wasmhost.DefaultMemoryLimitMiB, wasmhost.DefaultTimeout, m.defaultTime.Round(time.Millisecond), m.defaultErr)
		if m.longErr != nil {
			fmt.Fprintf(&b, "  with %d MiB and a 5m deadline: FAILS after %s: %v\n", wasmhost.DefaultMemoryLimitMiB, m.longTime.Round(time.Millisecond), m.longErr)
		} else {
			fmt.Fprintf(&b, "  with %d MiB and a 5m deadline: generate %s\n", wasmhost.DefaultMemoryLimitMiB, m.longTime.Round(time.Millisecond))
		}
	} else {
		fmt.Fprintf(&b, "  with the defaults (%d MiB, %s): generate %s (the median of %d calls)\n", wasmhost.DefaultMemoryLimitMiB, wasmhost.DefaultTimeout, m.defaultTime.Round(time.Millisecond), defaultCalls)
	}
	for _, l := range m.byLimit {
		if l.err != nil {
			fmt.Fprintf(&b, "  with %d MiB and a 5m deadline: FAILS after %s: %v\n", l.mib, l.time.Round(time.Millisecond), l.err)
		} else {
			fmt.Fprintf(&b, "  with %d MiB and a 5m deadline: generate %s\n", l.mib, l.time.Round(time.Millisecond))
		}
	}
	fmt.Fprintf(&b, "  smallest memory limit that works (the guest memory it needs): %d MiB (generate %s)\n", m.minMiB, m.minTime.Round(time.Millisecond))
	return b.String()
}

func (r *report) writePhase(b *strings.Builder, p phase, services int) {
	var routes []string
	for rt, n := range p.calls {
		routes = append(routes, fmt.Sprintf("%s=%d", rt, n))
	}
	sort.Strings(routes)
	fmt.Fprintf(b, "  Equinix calls: %d: %s\n", p.totalCalls(), strings.Join(routes, ", "))
	if g := p.generate; g != nil && g.generateCount > 0 {
		fmt.Fprintf(b, "  module generate calls (CCM metric): %.0f, mean %s, slowest <= %gs\n",
			g.generateCount, time.Duration(g.generateSum/g.generateCount*float64(time.Second)).Round(time.Millisecond), g.maxBound())
	} else {
		fmt.Fprintf(b, "  module generate calls (CCM metric): 0\n")
	}
	if g := p.generate; g != nil && len(g.syncs) > 0 {
		var parts []string
		for k, v := range g.syncs {
			parts = append(parts, fmt.Sprintf("%s=%.0f", k, v))
		}
		sort.Strings(parts)
		fmt.Fprintf(b, "  module syncs by result: %s\n", strings.Join(parts, ", "))
	}
	var keys []string
	for k := range p.writes {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s=%d", k, p.writes[k]))
	}
	total := p.totalWrites()
	fmt.Fprintf(b, "  apiserver writes by the CCM: %d: %s\n", total, strings.Join(parts, ", "))
	if services > 0 {
		core := p.totalWrites("events", "leases")
		fmt.Fprintf(b, "  apiserver writes per Service: %.2f (%.2f without events and leases)\n",
			float64(total)/float64(services), float64(core)/float64(services))
	}
}
