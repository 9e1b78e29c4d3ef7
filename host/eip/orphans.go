package eip

import (
	"slices"
	"strings"
	"time"

	"github.com/equinix/equinix-sdk-go/services/metalv1"
	v1 "k8s.io/api/core/v1"
)

// An Orphan is a Service reservation of this cluster whose Service no
// longer exists: its finalizer was removed by hand, its namespace was
// force-deleted, or the CCM crashed between deleting and releasing.
type Orphan struct {
	ID      string    `json:"id"`
	Address string    `json:"address"`
	Owner   string    `json:"owner"` // the owner tag, e.g. service=<hash>
	Created time.Time `json:"created"`
}

// ClusterReservations are the reservations this CCM (or upstream's) made
// for the Services of one cluster: the usage tag and the cluster's tag.
// The control-plane EIP (it carries the user's eipTag, not the usage tag)
// and bring-your-own addresses (never reserved by the CCM) are not among
// them, and neither is anything of another cluster.
func ClusterReservations(all []metalv1.IPReservation, clusterID string) []metalv1.IPReservation {
	if clusterID == "" {
		return nil // an empty ID would match "cluster=", never ours
	}
	var out []metalv1.IPReservation
	for _, r := range all {
		if slices.Contains(r.Tags, UsageTag) && slices.Contains(r.Tags, ClusterTag(clusterID)) {
			out = append(out, r)
		}
	}
	return out
}

// ownerTags are the owner tags a cluster's live Services account for: one
// per Service of type LoadBalancer (a Service being deleted still counts:
// its own release is under way).
func ownerTags(services []*v1.Service) map[string]bool {
	out := make(map[string]bool, len(services))
	for _, s := range services {
		if s.Spec.Type == v1.ServiceTypeLoadBalancer {
			out[ServiceTag(s.Namespace, s.Name)] = true
		}
	}
	return out
}

// ownedBy is the one rule of who owns a cluster reservation, kept in one
// place so that a reservation shared by several Services (a sharing-key tag)
// can be accounted for here alone: a reservation is owned while one of its
// owner tags belongs to a live Service. One with no owner tag at all was
// not made for a Service by this CCM and is left alone (never an orphan).
func ownedBy(r metalv1.IPReservation, live map[string]bool) (owner string, owned bool) {
	for _, t := range r.Tags {
		if strings.HasPrefix(t, "service=") {
			if live[t] {
				return t, true
			}
			owner = t
		}
	}
	return owner, owner == ""
}

// FindOrphans returns, oldest first, the reservations of cluster clusterID
// in all that no Service in services owns. services must be every Service
// of the cluster (a partial list would make orphans of the rest).
func FindOrphans(all []metalv1.IPReservation, clusterID string, services []*v1.Service) []Orphan {
	live := ownerTags(services)
	var out []Orphan
	for _, r := range ClusterReservations(all, clusterID) {
		owner, owned := ownedBy(r, live)
		if owned {
			continue
		}
		out = append(out, Orphan{ID: r.GetId(), Address: r.GetAddress(), Owner: owner, Created: r.GetCreatedAt()})
	}
	return out
}
