// Package eip gives each Service of type LoadBalancer an Equinix Metal
// Elastic IP: it finds the reservation tagged for the Service, adopts it or
// requests one where placement says, and releases it with the Service.
//
// The tags are the record: no state is kept in the CCM, so a restart (or a
// crash between reserving and writing the Service) finds the same
// reservation again instead of reserving a second one. They are upstream's
// tags, so reservations made by the upstream CCM are adopted as they are.
package eip

import (
	"crypto/sha256"
	"encoding/base64"
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
