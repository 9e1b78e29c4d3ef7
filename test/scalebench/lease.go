package main

import (
	"context"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// The CCM's leader lease, as the binary's defaults name it.
const leaseNamespace, leaseName = "kube-system", "cloud-controller-manager"

// leaseWatch follows the CCM's leader lease every second:
// how often it was renewed, the longest gap between two renewals, and
// whether its holder ever changed. With one replica the lease is lost when
// the gap passes the renew deadline (10s by default): the CCM then exits.
type leaseWatch struct {
	holder    string
	last      time.Time
	renewals  int
	maxGap    time.Duration
	maxGapAt  time.Time
	changes   int
	readError error
}

func (l *leaseWatch) observe(ctx context.Context, kube kubernetes.Interface) {
	lease, err := kube.CoordinationV1().Leases(leaseNamespace).Get(ctx, leaseName, metav1.GetOptions{})
	if err != nil {
		l.readError = err
		return
	}
	if lease.Spec.HolderIdentity == nil || lease.Spec.RenewTime == nil {
		return
	}
	holder, renewed := *lease.Spec.HolderIdentity, lease.Spec.RenewTime.Time
	if l.holder != "" && holder != l.holder {
		l.changes++
	}
	l.holder = holder
	if !renewed.After(l.last) {
		return
	}
	if !l.last.IsZero() {
		if gap := renewed.Sub(l.last); gap > l.maxGap {
			l.maxGap, l.maxGapAt = gap, renewed
		}
	}
	l.last = renewed
	l.renewals++
}

func (l *leaseWatch) String() string {
	if l.renewals == 0 {
		return fmt.Sprintf("leader lease: never seen renewed (%v)", l.readError)
	}
	held := "held throughout"
	if l.changes > 0 {
		held = fmt.Sprintf("LOST: the holder changed %d times", l.changes)
	}
	return fmt.Sprintf("leader lease %s/%s: %s; %d renewals seen (polled every second), longest gap between renewals %s (at %s; the renew deadline is 10s); last renewal seen %s",
		leaseNamespace, leaseName, held, l.renewals, l.maxGap.Round(10*time.Millisecond), l.maxGapAt.Format("15:04:05"), l.last.Format("15:04:05"))
}
