// Command sandbox is what `make run` starts: the Equinix Metal API emulator
// with a realistic project, a real kube-apiserver, and the CCM binary
// against both, with a live view of what the CCM does (see
// test/sandbox, which does the work).
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/metal-ccm/cloud-provider-equinix-metal/test/sandbox"
)

func main() {
	var o sandbox.Options
	flag.StringVar(&o.CCM, "ccm", "bin/cloud-provider-equinix-metal", "the CCM binary")
	flag.StringVar(&o.LoadBalancer, "loadbalancer", "metallb:///metallb-system", "the loadbalancer setting, e.g. metallb:///metallb-system/config, kube-vip:// or wasm:///abs/path/module.wasm?key=value")
	flag.StringVar(&o.PolicyDir, "policy-dir", "", "a directory of Rego policies replacing the built-in ones")
	flag.StringVar(&o.WorkDir, "dir", "", "work directory (kubeconfig, logs); default a new temporary directory")
	flag.DurationVar(&o.Duration, "duration", 0, "stop after this long (0: run until Ctrl-C)")
	flag.DurationVar(&o.FailoverAt, "failover-after", 20*time.Second, "stop the control-plane EIP holder's kube-apiserver this long after start-up (0: never)")
	flag.DurationVar(&o.Refresh, "refresh", 2*time.Second, "how often the view is redrawn")
	flag.BoolVar(&o.Plain, "plain", false, "append views instead of redrawing the screen")
	flag.StringVar(&o.MetalLBDir, "metallb", "", "directory with MetalLB's controller and speaker (make run passes the ones make e2e-bins built); with --gobgp, runs the data plane")
	flag.StringVar(&o.GoBGPDir, "gobgp", "", "directory with gobgpd and gobgp, for the two routers")
	dataPlane := flag.Bool("data-plane", true, "run MetalLB's speakers and two BGP routers in a private network namespace when the machine allows it")
	flag.Parse()
	o.NoDataPlane = !*dataPlane
	if err := sandbox.Run(o); err != nil {
		var code sandbox.ExitCode
		if errors.As(err, &code) {
			os.Exit(int(code)) // the sandbox inside the namespace said why
		}
		fmt.Fprintf(os.Stderr, "sandbox: %v\n", err)
		os.Exit(1)
	}
}
