package e2e

import (
	"github.com/metal-ccm/cloud-provider-equinix-metal/test/dataplane"

	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"
)

// RouteState is what one prefix looks like at every router.
type RouteState struct {
	// NextHops per router address, sorted.
	NextHops map[string][]string
	// BadASPaths lists paths whose AS path is not the wanted one.
	BadASPaths []string
}

// Prefixes reads every router once: prefix -> router -> paths.
func (c *World) Prefixes(ctx context.Context) (map[string]map[string][]dataplane.Path, error) {
	return dataplane.Prefixes(ctx, c.Routers)
}

// RouteProblem says why prefix is not announced at every router with exactly
// one path from each of the wanted next hops, each with AS path [asn]; ""
// when it is. An empty want means the prefix must be withdrawn everywhere.
func (c *World) RouteProblem(ctx context.Context, prefix string, want []string, asn uint32) string {
	all, err := c.Prefixes(ctx)
	if err != nil {
		return err.Error()
	}
	want = slices.Sorted(slices.Values(want))
	var problems []string
	for _, r := range c.Routers {
		paths := all[prefix][r.Addr]
		var hops []string
		for _, p := range paths {
			hops = append(hops, p.NextHop)
			if len(want) > 0 && !slices.Equal(p.ASPath, []uint32{asn}) {
				problems = append(problems, fmt.Sprintf("%s: path %s has AS path %v, want [%d]", r.Name, p.NextHop, p.ASPath, asn))
			}
		}
		sort.Strings(hops)
		if !slices.Equal(hops, want) {
			problems = append(problems, fmt.Sprintf("%s holds %s via %v, want %v", r.Name, prefix, hops, want))
		}
	}
	return strings.Join(problems, "; ")
}

// WaitRoute polls the routers until RouteProblem is "" and returns how long
// that took, or the last problem after timeout.
func (c *World) WaitRoute(ctx context.Context, prefix string, want []string, asn uint32, timeout time.Duration) (time.Duration, error) {
	began := time.Now()
	var last string
	for {
		if last = c.RouteProblem(ctx, prefix, want, asn); last == "" {
			return time.Since(began), nil
		}
		if time.Since(began) > timeout {
			return 0, fmt.Errorf("after %s: %s", timeout, last)
		}
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}
