//go:build linux

// Command soak is `make soak`: the long fault-injection run of
// test/faults, printing its figures. For example
//
//	make soak SOAK_ARGS="-cycles 300 -fault-rate 0.1 -kills 7"
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/metal-ccm/cloud-provider-equinix-metal/test/faults"
)

func main() {
	var o faults.Options
	flag.StringVar(&o.CCM, "ccm", "bin/cloud-provider-equinix-metal", "the CCM binary")
	flag.StringVar(&o.Dir, "dir", "", "work directory for logs and the cluster (default: a new temporary directory, kept)")
	flag.IntVar(&o.Cycles, "cycles", 300, "Service create/delete cycles")
	flag.IntVar(&o.Parallel, "parallel", 4, "cycles at once")
	flag.IntVar(&o.Keep, "keep", 3, "Services live through the whole run")
	flag.Float64Var(&o.FaultRate, "fault-rate", 0.1, "share of Equinix API requests that fail (negative: none)")
	flag.DurationVar(&o.LostFor, "lost-for", 35*time.Second, "how long a lost answer is held before its connection is reset")
	flag.IntVar(&o.Kills, "kills", 7, "kill -9 of a CCM replica (alternately the leader and the follower)")
	flag.Float64Var(&o.EarlyDelete, "early-delete", 0.2, "share of Services deleted before their address (negative: none)")
	flag.DurationVar(&o.IPTimeout, "ip-timeout", 2*time.Minute, "longest wait for one Service's address")
	flag.DurationVar(&o.ConvergeTimeout, "converge-timeout", 3*time.Minute, "longest wait for convergence after the faults stop")
	flag.Parse()
	if o.Dir == "" {
		d, err := os.MkdirTemp("", "ccm-soak-")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		o.Dir = d
	}
	o.Logf = func(format string, args ...any) {
		fmt.Printf("%s  %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, args...))
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	fmt.Printf("soak: work directory %s (CCM logs ccm-<replica>.<restart>.log)\n", o.Dir)
	rep, err := faults.Run(ctx, o)
	if err != nil {
		fmt.Fprintf(os.Stderr, "soak: %v\n", err)
		os.Exit(1)
	}
	fmt.Print(rep.String())
	if !rep.Converged || rep.MaxReservationsPerService > 1 || len(rep.Crashes) > 0 || len(rep.IPTimeouts) > 0 {
		fmt.Println("FAIL")
		os.Exit(1)
	}
	fmt.Println("PASS")
}
