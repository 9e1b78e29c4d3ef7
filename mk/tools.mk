# tools.mk: every third-party binary the tests and the sandbox run, pinned
# and built from the Go module proxy into the cache outside the repository
# (once per version: the version is in the path), and the Debian packages
# the root-only harnesses install. Nothing here runs a test.

# Go as it builds the pinned tools: with its own defaults (cgo where gcc
# is, no -trimpath unless asked), not the repository's configuration
# (Makefile): these binaries share no compiled package with the CCM.
TOOL_GO = env -u CGO_ENABLED -u GOFLAGS $(GO)

# module@version package [env] [build flags] -> $@, built in the module's
# download directory, so that the module's own go.sum is used (a plain
# `go install` of MetalLB fails the checksum lookup of one dependency).
define build-in-module
	@mkdir -p $(@D)
	@echo ">> building $(3) $(2) into $(@D) (once)"
	@start=$$(date +%s); \
	dir=$$($(4) $(TOOL_GO) mod download -json $(1)@$(2) | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$$/\1/p'); \
	test -n "$$dir" || { echo "go mod download $(1)@$(2) gave no directory"; exit 1; }; \
	GOFLAGS=-buildvcs=false $(TOOL_GO) build -C "$$dir" -trimpath $(5) -ldflags '-s -w' -o $@.tmp ./$(3) || { rm -f $@.tmp; exit 1; }; \
	mv $@.tmp $@; echo ">> $(1)@$(2) $(3) built in $$(( $$(date +%s) - start ))s"
endef

# A binary of test/testenv/k8sbins (Kubernetes' or etcd's) -> $@:
# $(1) the package, $(2) the linker flags.
#
# Unlike the tools, these build the way the CCM does (the Makefile's
# CGO_ENABLED=0 and -trimpath), and k8sbins requires the CCM's version of
# every module both use (test/testenv/k8sbins/README.md): the CCM's own
# Kubernetes packages (client-go, apiserver, cloud-provider and what they
# import, about 1,300 of them) are then the very ones kube-apiserver
# compiled, and on an empty cache make test finds them in Go's build cache
# instead of compiling them a second time.
define build-k8s
	@mkdir -p $(@D)
	@echo ">> building $(@F) (test/testenv/k8sbins: Kubernetes $(K8S_VERSION)) into $(@D) (once)"
	@start=$$(date +%s); \
	$(GO) build -C test/testenv/k8sbins -trimpath -buildvcs=false -ldflags '$(2)' -o $@.tmp $(1) || { rm -f $@.tmp; exit 1; }; \
	mv $@.tmp $@; echo ">> $(@F) built in $$(( $$(date +%s) - start ))s"
endef

# The k8sbins binaries in the cache are rebuilt when k8sbins' go.mod or
# go.sum changes (a dependency moved to follow the CCM's) or the way they
# build does: each depends on a stamp named for both.
K8S_BUILD_ID := $(shell cat test/testenv/k8sbins/go.mod test/testenv/k8sbins/go.sum 2>/dev/null | { cat; echo 'CGO_ENABLED=0 -trimpath'; } | sha256sum | cut -c1-12)
K8S_STAMP := $(K8S_BIN_DIR)/.built-from-$(K8S_BUILD_ID)
$(K8S_STAMP):
	@mkdir -p $(@D) && rm -f $(K8S_BIN_DIR)/.built-from-* && touch $@

# --- MetalLB and GoBGP for the data plane (make e2e, make run) ---
# Built from the Go module proxy at pinned versions, once per version,
# inside each module's own directory so that its go.sum is used (a plain
# `go install` of MetalLB fails the checksum lookup of one dependency).
# The speakers run with the CRDs of the MetalLB version in go.mod (0.16),
# which testenv installs: 0.15's own CRDs are refused by kube-apiserver 1.37.
METALLB_VERSION := v0.15.3
GOBGP_VERSION := v3.37.0
METALLB_BIN_DIR ?= $(CACHE_HOME)/cloud-provider-equinix-metal/metallb/$(METALLB_VERSION)
GOBGP_BIN_DIR ?= $(CACHE_HOME)/cloud-provider-equinix-metal/gobgp/$(GOBGP_VERSION)
# What the sandbox's data plane runs (make run), and make e2e with the legacy MetalLB too.
DATAPLANE_BINS := $(METALLB_BIN_DIR)/controller $(METALLB_BIN_DIR)/speaker $(GOBGP_BIN_DIR)/gobgpd $(GOBGP_BIN_DIR)/gobgp
E2E_BINS := $(DATAPLANE_BINS)
# MetalLB 0.12.1 is the last that reads the legacy ConfigMap. The checksum
# database has no record of it (sum.golang.org answers 404), so its own
# download is not checked there (GONOSUMDB for that module only); its
# dependencies are still checked against its go.sum.
METALLB_LEGACY_VERSION := v0.12.1
METALLB_LEGACY_BIN_DIR ?= $(CACHE_HOME)/cloud-provider-equinix-metal/metallb/$(METALLB_LEGACY_VERSION)
E2E_BINS += $(METALLB_LEGACY_BIN_DIR)/controller $(METALLB_LEGACY_BIN_DIR)/speaker
# MetalLB 0.16.1 for the IPv6 data plane (FRR mode): 0.15's FRR mode refuses
# two BGPPeers with one peer address even when their nodeSelectors pick
# different nodes, which is every per-node peer the CRD module writes; 0.16
# checks per node. 0.16.1 builds from the proxy (its frr-k8s v0.0.25 is
# served; 0.16.2's v0.0.27 is not).
METALLB_FRR_VERSION := v0.16.1
METALLB_FRR_BIN_DIR ?= $(CACHE_HOME)/cloud-provider-equinix-metal/metallb/$(METALLB_FRR_VERSION)
E2E_BINS += $(METALLB_FRR_BIN_DIR)/controller $(METALLB_FRR_BIN_DIR)/speaker
# frr-k8s for MetalLB 0.16.1's FRR-K8s backend in the real cluster: the
# version MetalLB 0.16.1's go.mod requires, run with Debian's FRR.
FRR_K8S_VERSION := v0.0.25
FRR_K8S ?= $(CACHE_HOME)/cloud-provider-equinix-metal/frr-k8s/$(FRR_K8S_VERSION)/frr-k8s
# kube-vip for the cluster's kube-vip speaker (TestCloudSpeakers/kube-vip):
# the real one, reading the node annotations the CCM writes. v1.2.2 is the
# newest v1.2 the proxy serves (v1.2.3 answers 403).
KUBE_VIP_VERSION := v1.2.2
KUBE_VIP ?= $(CACHE_HOME)/cloud-provider-equinix-metal/kube-vip/$(KUBE_VIP_VERSION)/kube-vip

# Builds only what is missing: the one prerequisite is the stamp in the
# cache (K8S_STAMP), so a fresh clone (with new timestamps) never rebuilds
# binaries that are already cached, and a changed k8sbins go.mod does. The
# version is in the path, so a new version builds anew.
k8s-bins: $(K8S_BINS) ## kube-apiserver and etcd, built once into the cache

$(K8S_BIN_DIR)/kube-apiserver: $(K8S_STAMP)
	$(call build-k8s,k8s.io/kubernetes/cmd/kube-apiserver,$(K8S_LDFLAGS))

$(K8S_BIN_DIR)/etcd: $(K8S_STAMP)
	$(call build-k8s,go.etcd.io/etcd/server/v3,-s -w)

$(K8S_BIN_DIR)/kubectl: $(K8S_STAMP)
	$(call build-k8s,k8s.io/kubernetes/cmd/kubectl,$(K8S_LDFLAGS))

e2e-bins: $(E2E_BINS) ## MetalLB (0.12.1, 0.15.3, 0.16.1) and GoBGP for the data plane, built once

$(METALLB_BIN_DIR)/controller:
	$(call build-in-module,go.universe.tf/metallb,$(METALLB_VERSION),controller)
$(METALLB_BIN_DIR)/speaker:
	$(call build-in-module,go.universe.tf/metallb,$(METALLB_VERSION),speaker)
$(METALLB_LEGACY_BIN_DIR)/controller:
	$(call build-in-module,go.universe.tf/metallb,$(METALLB_LEGACY_VERSION),controller,GONOSUMDB=go.universe.tf/metallb)
$(METALLB_LEGACY_BIN_DIR)/speaker:
	$(call build-in-module,go.universe.tf/metallb,$(METALLB_LEGACY_VERSION),speaker,GONOSUMDB=go.universe.tf/metallb)
$(METALLB_FRR_BIN_DIR)/controller:
	$(call build-in-module,go.universe.tf/metallb,$(METALLB_FRR_VERSION),controller)
$(METALLB_FRR_BIN_DIR)/speaker:
	$(call build-in-module,go.universe.tf/metallb,$(METALLB_FRR_VERSION),speaker)
$(FRR_K8S):
	$(call build-in-module,github.com/metallb/frr-k8s,$(FRR_K8S_VERSION),cmd/frr-k8s-controller)
$(KUBE_VIP):
	$(call build-in-module,github.com/kube-vip/kube-vip,$(KUBE_VIP_VERSION),.)
$(GOBGP_BIN_DIR)/gobgpd:
	$(call build-in-module,github.com/osrg/gobgp/v3,$(GOBGP_VERSION),cmd/gobgpd)
$(GOBGP_BIN_DIR)/gobgp:
	$(call build-in-module,github.com/osrg/gobgp/v3,$(GOBGP_VERSION),cmd/gobgp)

# helm, at the version the tests render the chart with (go.mod), for
# rendering or installing the chart where no helm binary is at hand:
#   make helm && $(HELM) template x deploy/chart --set config.apiKey=k,config.projectID=p
# Built in Helm's own module (inside this one, cmd/helm lacks go.sum entries).
HELM_VERSION := $(shell sed -n 's/^[[:space:]]*helm.sh\/helm\/v4 \(v[0-9.]*\)$$/\1/p' go.mod)
HELM ?= $(CACHE_HOME)/cloud-provider-equinix-metal/helm/$(HELM_VERSION)/helm
.PHONY: helm
helm: $(HELM) ## build Helm (the tests' version) once and print its path
	@echo "$(HELM)"
$(HELM):
	$(call build-in-module,helm.sh/helm/v4,$(HELM_VERSION),cmd/helm)

# --- the chart's Prometheus alerts (deploy/chart/files/prometheus-rules.yaml) ---
# promtool from the Prometheus module (v0.316.0 is Prometheus 3.16.0), built
# once like MetalLB; its tests (prometheus-rules_test.yaml beside the rules,
# left out of the chart by .helmignore) fire each alert on the bad value of
# its metric and keep it silent on the good one (make promtool-test).
# remove_all_sd (Prometheus' own build tag) leaves out the service-discovery
# plugins rule tests never use, and with them the cloud SDKs: most of a cold
# build's time.
PROMETHEUS_VERSION := v0.316.0
PROMTOOL ?= $(CACHE_HOME)/cloud-provider-equinix-metal/prometheus/$(PROMETHEUS_VERSION)/promtool
# The module ships a go.work naming directories its zip leaves out.
$(PROMTOOL): export GOWORK := off
$(PROMTOOL):
	$(call build-in-module,github.com/prometheus/prometheus,$(PROMETHEUS_VERSION),cmd/promtool,,-tags=remove_all_sd)

# --- a real node's binaries (test/cluster) ---
# kubelet and the other node binaries come from the same k8s.io/kubernetes
# module as kube-apiserver (test/testenv/k8sbins), cached beside it; pause is
# the sandbox's one binary, compiled from that module's build/pause. The
# runtime itself is Debian's (cluster-debs installs what is missing).
# Needs root; `make cluster-test` runs test/cluster's tests (build tag
# cluster; kubectl for its exec check).
CLUSTER_BINS := $(K8S_BIN_DIR)/kubelet $(K8S_BIN_DIR)/kube-proxy $(K8S_BIN_DIR)/kube-controller-manager \
  $(K8S_BIN_DIR)/kube-scheduler $(K8S_BIN_DIR)/pause
# build/pause/Makefile's TAG in k8s.io/kubernetes $(K8S_VERSION); test/cluster's
# pauseImage names the same version (containerd's sandbox_image).
PAUSE_VERSION := 3.10.2

cluster-bins: k8s-bins $(CLUSTER_BINS) ## kubelet, kube-proxy, kcm, scheduler and pause, built once into the cache

$(K8S_BIN_DIR)/kubelet $(K8S_BIN_DIR)/kube-proxy $(K8S_BIN_DIR)/kube-controller-manager $(K8S_BIN_DIR)/kube-scheduler: $(K8S_STAMP)
	$(call build-k8s,k8s.io/kubernetes/cmd/$(@F),$(K8S_LDFLAGS))

# Static: the pause image holds this one file and nothing else.
$(K8S_BIN_DIR)/pause:
	@mkdir -p $(@D)
	@dir=$$(cd test/testenv/k8sbins && $(TOOL_GO) mod download -json k8s.io/kubernetes@$(K8S_VERSION) | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$$/\1/p'); \
	test -n "$$dir" || { echo "go mod download k8s.io/kubernetes@$(K8S_VERSION) gave no directory"; exit 1; }; \
	gcc -Os -static -DVERSION=v$(PAUSE_VERSION) -o $@.tmp "$$dir/build/pause/linux/pause.c" || { rm -f $@.tmp; exit 1; }
	@mv $@.tmp $@

# The IPv6 data plane runs MetalLB's speakers in FRR mode, which drive
# Debian's FRR (bgpd, and frr-reload.py from frr-pythontools); installed
# when missing (root, apt-get). The tests run a bgpd of their own per node
# in their private namespace; they neither need nor touch the package's own
# frr service (which Debian starts with only zebra enabled, where services
# start at all).
E2E_DEBS := frr frr-pythontools
FRR_DIR := /usr/lib/frr
.PHONY: e2e-debs
e2e-debs:
	@missing=""; for p in $(E2E_DEBS); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
	  command -v apt-get >/dev/null && [ "$$(id -u)" = 0 ] || { echo "make e2e needs the Debian packages$$missing: apt-get install$$missing (as root)"; exit 1; }; \
	  echo ">> installing$$missing"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$missing >/dev/null; \
	fi

# The node runtime from Debian, installed when missing (root, apt-get).
CLUSTER_DEBS := containerd runc containernetworking-plugins busybox-static iptables conntrack gcc bird2 curl wget dash netcat-openbsd
cluster-debs:
	@missing=""; for p in $(CLUSTER_DEBS); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
	  command -v apt-get >/dev/null || { echo "install the Debian packages$$missing (no apt-get here)"; exit 1; }; \
	  echo ">> installing$$missing"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null; \
	fi

# agnhost (the e2e tests' image, and the traffic tests' server) and e2e.test
# from the same k8s.io/kubernetes module, cached beside kubelet.
AGNHOST := $(K8S_BIN_DIR)/agnhost
E2E_TEST := $(K8S_BIN_DIR)/e2e.test
$(AGNHOST): $(K8S_STAMP)
	$(call build-k8s,k8s.io/kubernetes/test/images/agnhost,-s -w)
$(E2E_TEST): $(K8S_STAMP)
	@mkdir -p $(@D)
	@echo ">> building e2e.test $(K8S_VERSION) into $(@D) (once; a few minutes)"
	@$(GO) test -C test/testenv/k8sbins -c -trimpath -buildvcs=false -ldflags '$(K8S_LDFLAGS)' -o $@.tmp k8s.io/kubernetes/test/e2e || { rm -f $@.tmp; exit 1; }
	@mv $@.tmp $@

# Ginkgo's CLI runs e2e.test's specs in parallel processes, as Kubernetes'
# own hack/ginkgo-e2e.sh does (e2e.test alone runs them one at a time); the
# version is the one e2e.test links, from its own module.
GINKGO_VERSION := $(shell sed -n 's/^[[:space:]]*github.com\/onsi\/ginkgo\/v2 \(v[0-9.]*\).*/\1/p' test/testenv/k8sbins/go.mod)
GINKGO := $(CACHE_HOME)/cloud-provider-equinix-metal/ginkgo/$(GINKGO_VERSION)/ginkgo
$(GINKGO):
	$(call build-in-module,github.com/onsi/ginkgo/v2,$(GINKGO_VERSION),ginkgo)

# CoreDNS for the conformance cluster's kube-dns: a build with only the
# plugins it needs (test/testenv/corednsbin, its own module), cached.
COREDNS_VERSION := $(shell sed -n 's/^require github.com\/coredns\/coredns \(v[0-9.]*\)$$/\1/p' test/testenv/corednsbin/go.mod)
COREDNS := $(CACHE_HOME)/cloud-provider-equinix-metal/coredns/$(COREDNS_VERSION)/coredns
$(COREDNS):
	@mkdir -p $(@D)
	@echo ">> building CoreDNS $(COREDNS_VERSION) into $(@D) (once)"
	@$(TOOL_GO) build -C test/testenv/corednsbin -trimpath -ldflags '-s -w' -o $@.tmp . || { rm -f $@.tmp; exit 1; }
	@mv $@.tmp $@


.PHONY: k8s-bins e2e-bins cluster-bins cluster-debs e2e-debs helm
