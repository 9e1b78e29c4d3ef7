// Command coredns is CoreDNS v1.15 with only the plugins the real cluster's
// kube-dns needs. CoreDNS documents this way of building it: import coremain
// and the chosen plugins; the directive order stays CoreDNS's own
// (core/dnsserver's list), so the Corefile behaves as in the release. The
// release binary's full plugin set pulls in every cloud SDK CoreDNS supports,
// minutes of cold build for nothing the real cluster resolves.
package main

import (
	"github.com/coredns/coredns/coremain"

	_ "github.com/coredns/coredns/plugin/cache"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/health"
	_ "github.com/coredns/coredns/plugin/kubernetes"
	_ "github.com/coredns/coredns/plugin/loadbalance"
	_ "github.com/coredns/coredns/plugin/log"
	_ "github.com/coredns/coredns/plugin/loop"
	_ "github.com/coredns/coredns/plugin/ready"
	_ "github.com/coredns/coredns/plugin/reload"
)

func main() { coremain.Run() }
