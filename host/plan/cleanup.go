package plan

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/equinix/equinix-sdk-go/services/metalv1"

	"github.com/metal-ccm/cloud-provider-equinix-metal/host/eip"
)

// cleanupAPI is what cleanup needs from Equinix Metal.
type cleanupAPI interface {
	Reservations(ctx context.Context) ([]metalv1.IPReservation, error)
	DeleteIP(ctx context.Context, id string) error
}

// Cleanup lists every Service reservation of the cluster whose kube-system
// namespace UID is clusterUID (eip.ClusterReservations: the usage tag and
// that cluster's tag; never the control-plane EIP, another cluster's, or
// anything untagged), and with yes releases them. It is for a cluster that
// is gone: nothing checks whether its Services still exist.
func Cleanup(ctx context.Context, api cleanupAPI, clusterUID string, yes bool, w io.Writer) error {
	if clusterUID == "" {
		return errors.New("--cluster-uid is required: the UID of the gone cluster's kube-system namespace (the cluster=<uid> tag of its Elastic IPs)")
	}
	all, err := api.Reservations(ctx)
	if err != nil {
		return fmt.Errorf("listing the project's IP reservations: %w", err)
	}
	rs := eip.ClusterReservations(all, clusterUID)
	if len(rs) == 0 {
		_, err := fmt.Fprintf(w, "No Elastic IP of cluster %s in the project; nothing to release.\n", clusterUID)
		return err
	}
	fmt.Fprintf(w, "Elastic IPs of cluster %s (%d):\n", clusterUID, len(rs))
	for _, r := range rs {
		fmt.Fprintf(w, "  %s  reservation %s  %s\n", r.GetAddress(), r.GetId(), eipOwner(r))
	}
	if !yes {
		_, err := fmt.Fprintln(w, "Nothing released: run again with --yes to release them.")
		return err
	}
	for _, r := range rs {
		if err := api.DeleteIP(ctx, r.GetId()); err != nil {
			return fmt.Errorf("releasing %s (reservation %s): %w; run again to release the rest", r.GetAddress(), r.GetId(), err)
		}
		fmt.Fprintf(w, "Released %s\n", r.GetAddress())
	}
	return nil
}

func eipOwner(r metalv1.IPReservation) string { return eip.OwnerTag(r.Tags) }
