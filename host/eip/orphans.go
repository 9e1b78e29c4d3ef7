package eip

import (
	"slices"
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

// ownedBy applies the one ownership rule (OwnerTag, ownerTags): a cluster
// reservation is owned while its owner tag belongs to a live Service. One
// with no owner tag was not made for a Service and is never an orphan.
func ownedBy(r metalv1.IPReservation, live map[string]bool) (owner string, owned bool) {
	owner = OwnerTag(r.Tags)
	return owner, owner == "" || live[owner]
}

// FindOrphans returns, oldest first, the reservations of cluster clusterID
// in all that no Service in services owns. services must be every Service
// of the cluster (a partial list would make orphans of the rest).
func FindOrphans(all []metalv1.IPReservation, clusterID string, services []*v1.Service) []Orphan {
	live := ownerTagSet(services)
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
