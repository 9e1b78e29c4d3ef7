// Command scalebench measures the CCM binary, as it ships, at the size of a
// large bare-metal fleet: the Equinix Metal emulator (with API latency) and
// a real kube-apiserver, N nodes (devices with two BGP peers each) and M
// LoadBalancer Services, from empty to every Service with its ingress and
// the load-balancer module's objects applied. Then the cost of one more
// Service and of one node joining at that size.
//
//	make bench-scale                 # 10,000 Services on 1,000 nodes, 50 ms latency
//	go run ./test/scalebench -ccm bin/cloud-provider-equinix-metal -services 100 -nodes 10
//
// It reports wall times, Equinix calls by operation (the emulator's
// counters), the CCM's peak RSS (VmHWM), the module's generate time (the
// CCM's own metric) and, in process, the guest memory the module needs at
// that size, and the apiserver writes per Service (the audit log).
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
)

func main() {
	var o options
	flag.StringVar(&o.ccm, "ccm", "bin/cloud-provider-equinix-metal", "the CCM binary (make build)")
	flag.StringVar(&o.loadbalancer, "loadbalancer", defaultLoadBalancer,
		"the cloud-config's loadbalancer (for upstream v3.8.1, which reads the bare URL as the legacy ConfigMap: metallb:///metallb-system?crdConfiguration=true)")
	flag.IntVar(&o.services, "services", 10000, "LoadBalancer Services")
	flag.IntVar(&o.nodes, "nodes", 1000, "nodes (Equinix Metal devices with two BGP peers each)")
	flag.DurationVar(&o.latency, "latency", 50*time.Millisecond, "latency added to every Equinix Metal API call")
	flag.DurationVar(&o.timeout, "timeout", 45*time.Minute, "give up after this long")
	flag.StringVar(&o.dir, "dir", "", "work directory (kept: CCM log, audit log, kubeconfig); default a new temporary directory")
	limit := flag.String("memory-limit", "384Mi", "the container memory limit to run the CCM as if under (the chart's default; GOMEMLIMIT gets 90% of what the module's memory limit leaves of it, as in a pod); 0 for none")
	flag.DurationVar(&o.quiet, "quiet", time.Minute, "how long to count the CCM's background work with nothing changing, after the fill (0 skips it)")
	flag.DurationVar(&o.moduleWait, "module-wait", 5*time.Minute, "how long to wait for the module's objects once every Service has its ingress")
	flag.BoolVar(&o.cgroup, "cgroup", os.Geteuid() == 0, "also hold the CCM to -memory-limit in a real memory cgroup, as a container is (root only): past the limit the kernel kills it")
	flag.BoolVar(&o.skipModule, "skip-module-memory", false, "skip the in-process search for the module's smallest memory limit")
	moduleOnly := flag.Bool("module-only", false, "only the in-process module measurement at -services x -nodes")
	reportPath := flag.String("report", "", "also write the report to this file (Markdown), with the command, commit and machine")
	step := flag.String("search-step", "0", "when not 0: after a run that completes, run again with -memory-limit this much smaller, until one does not; the smallest limit that completed is reported")
	flag.Parse()
	if q, err := resource.ParseQuantity(*limit); err != nil {
		fmt.Fprintf(os.Stderr, "-memory-limit %q: %v (a Kubernetes quantity such as 512Mi, or 0)\n", *limit, err)
		os.Exit(2)
	} else {
		o.memoryLimit = q.Value()
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	if *moduleOnly {
		mr, err := measureModule(ctx, o.services, o.nodes)
		if err != nil {
			fmt.Fprintf(os.Stderr, "scalebench: %v\n", err)
			os.Exit(1)
		}
		fmt.Print((&report{o: o, module: mr}).moduleString())
		return
	}
	stepQ, err := resource.ParseQuantity(*step)
	if err != nil || stepQ.Value() < 0 {
		fmt.Fprintf(os.Stderr, "-search-step %q: want a Kubernetes quantity such as 32Mi, or 0 (%v)\n", *step, err)
		os.Exit(2)
	}
	if stepQ.Value() > 0 && o.memoryLimit == 0 {
		fmt.Fprintln(os.Stderr, "-search-step needs a -memory-limit to start from, such as 384Mi")
		os.Exit(2)
	}
	logf := func(format string, args ...any) {
		fmt.Fprintf(os.Stderr, "%s  "+format+"\n", append([]any{time.Now().Format("15:04:05")}, args...)...)
	}
	began := time.Now()
	out, summary, ok := search(ctx, o, stepQ.Value(), logf)
	fmt.Print(out + summary)
	if *reportPath != "" {
		if err := writeReport(*reportPath, out, summary, began); err != nil {
			fmt.Fprintf(os.Stderr, "scalebench: %v\n", err)
			os.Exit(1)
		}
		fmt.Fprintf(os.Stderr, "scalebench: report written to %s\n", *reportPath)
	}
	if !ok {
		os.Exit(1)
	}
}
