// Package eip gives each Service of type LoadBalancer an Equinix Metal
// Elastic IP: it finds the reservation tagged for the Service, adopts it or
// requests one where placement says, and releases it with the Service.
//
// The tags are the record: no state is kept in the CCM, so a restart (or a
// crash between reserving and writing the Service) finds the same
// reservation again instead of reserving a second one. They are upstream's
// tags, so reservations made by the upstream CCM are adopted as they are.
//
// Like every package under host/, it belongs to this repository alone:
// its API carries no compatibility promise to code outside it.
package eip

import (
	"crypto/sha256"
	"encoding/base64"
	"strings"

	v1 "k8s.io/api/core/v1"

	"github.com/metal-ccm/cloud-provider-equinix-metal/host/lbsnapshot"
)

const (
	// UsageTag marks every reservation this CCM (or upstream) created for a Service.
	UsageTag = "usage=cloud-provider-equinix-metal-auto"
	// Details is the reservation's description in the Equinix console.
	Details = "Equinix Metal Kubernetes CCM auto-generated for Load Balancer"
)

// ServiceTag identifies the Service: base64 (standard, padded) of the
// SHA-256 of "<namespace>/<name>".
func ServiceTag(namespace, name string) string {
	sum := sha256.Sum256([]byte(namespace + "/" + name))
	return "service=" + base64.StdEncoding.EncodeToString(sum[:])
}

// ClusterTag identifies the cluster by its kube-system namespace UID, so two
// clusters in one project never touch each other's addresses.
func ClusterTag(clusterID string) string { return "cluster=" + clusterID }

// Tags are the three tags of a Service's reservation.
func Tags(clusterID, namespace, name string) []string {
	return []string{UsageTag, ServiceTag(namespace, name), ClusterTag(clusterID)}
}

// sharingTagPrefix starts the tag of a shared reservation. Upstream has no
// such tag, so upstream never takes a shared reservation for a Service's own.
const sharingTagPrefix = "sharing-key="

// sharingTag identifies a sharing key within the cluster: base64 (standard,
// padded) of the SHA-256 of the key, like ServiceTag. The key is
// cluster-wide, as in MetalLB: Services of different namespaces with one key
// share one address.
func sharingTag(key string) string {
	sum := sha256.Sum256([]byte(key))
	return sharingTagPrefix + base64.StdEncoding.EncodeToString(sum[:])
}

// SharedTags are the three tags of a sharing key's reservation: the usage
// tag, the key's tag in place of a Service's, and the cluster's tag.
func SharedTags(clusterID, key string) []string {
	return []string{UsageTag, sharingTag(key), ClusterTag(clusterID)}
}

// OwnerTag is the tag that says whom a reservation of this CCM was made for:
// its service=<hash> tag, or its sharing-key=<hash> tag; "" when it has
// neither (not a Service reservation, e.g. the control-plane EIP).
func OwnerTag(tags []string) string {
	for _, t := range tags {
		if strings.HasPrefix(t, "service=") || strings.HasPrefix(t, sharingTagPrefix) {
			return t
		}
	}
	return ""
}

// ownerTags are the owner tags an existing Service accounts for: the
// Service's own tag, and its sharing key's tag when it has one. This is the
// one rule of who owns a reservation: a reservation of the cluster (usage
// and cluster tags) is owned while its OwnerTag is among the ownerTags of a
// Service of the cluster. So a shared reservation is owned while any
// Service of type LoadBalancer with its key exists; one that is refused
// (ports clash, say) still counts, as it takes the address once the
// Service in its way is gone. Only Services of type LoadBalancer own
// anything: a Service turned ClusterIP has had its reservation released.
// One with a loadBalancerClass still accounts for its own tag, but a
// sharing key's tag only counts for a Service this provider load-balances
// (lbsnapshot.WantsLoadBalancer).
//
// Release applies the same rule to the Services other than the one being
// deleted, and also leaves out those being deleted, whose own release is
// under way.
func ownerTags(svc *v1.Service) []string {
	if svc.Spec.Type != v1.ServiceTypeLoadBalancer {
		return nil
	}
	tags := []string{ServiceTag(svc.Namespace, svc.Name)}
	if key := lbsnapshot.SharingKey(svc); key != "" && lbsnapshot.WantsLoadBalancer(svc) {
		tags = append(tags, sharingTag(key))
	}
	return tags
}

// ownerTagSet holds the owner tags a cluster's live Services account for
// (ownerTags of each: its own tag, and its sharing key's).
func ownerTagSet(services []*v1.Service) map[string]bool {
	out := make(map[string]bool, len(services))
	for _, s := range services {
		for _, t := range ownerTags(s) {
			out[t] = true
		}
	}
	return out
}
