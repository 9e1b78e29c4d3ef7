// Command sandbox is what `make run` starts: the Equinix Metal API emulator
// with a realistic project, a real kube-apiserver, and the CCM binary
// against both, with a live view of what the CCM does (see
// host/testing/sandbox, which does the work).
package main

import (
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/metal-ccm/cloud-provider-equinix-metal/host/testing/sandbox"
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
	flag.Parse()
	if err := sandbox.Run(o); err != nil {
		fmt.Fprintf(os.Stderr, "sandbox: %v\n", err)
		os.Exit(1)
	}
}
