# The two commands a user needs are `make run` and `make test`; both build
# whatever is missing first. Built Kubernetes binaries live in a cache outside
# the repository and are built once per version.

SHELL := bash
.SHELLFLAGS := -eu -o pipefail -c
GO ?= go

BIN_DIR := bin
CCM_BIN := $(BIN_DIR)/cloud-provider-equinix-metal

# Kubernetes test binaries: built from the Go module proxy by the nested
# module in test/testenv/k8sbins, at the same minor as the k8s.io/* libraries.
K8S_VERSION := $(shell sed -n 's/^require k8s.io\/kubernetes \(v[0-9.]*\)$$/\1/p' test/testenv/k8sbins/go.mod)
K8S_MINOR := $(word 2,$(subst ., ,$(K8S_VERSION)))
CACHE_HOME := $(or $(XDG_CACHE_HOME),$(HOME)/.cache)
K8S_BIN_DIR ?= $(CACHE_HOME)/cloud-provider-equinix-metal/k8s/$(K8S_VERSION)
K8S_LDFLAGS := -s -w $(foreach p,k8s.io/component-base/version k8s.io/client-go/pkg/version,\
  -X $(p).gitVersion=$(K8S_VERSION) -X $(p).gitMajor=1 -X $(p).gitMinor=$(K8S_MINOR) -X $(p).gitTreeState=clean)
K8S_BINS := $(K8S_BIN_DIR)/kube-apiserver $(K8S_BIN_DIR)/etcd
export METAL_CCM_K8S_ASSETS := $(K8S_BIN_DIR)

# --- version (one string everywhere; see hack/version.sh and RELEASING.md) ---
# Stamped into the binary (k8s.io/component-base/version, so --version,
# /version and the startup log say it), the image labels and tag, and the
# chart and manifests that `make manifests` writes to bin/deploy.
VERSION ?= $(shell hack/version.sh)
REVISION ?= $(shell git rev-parse HEAD 2>/dev/null || echo unknown)
# Commit time: image "created" and the binary's build date, so two builds of
# one commit are identical.
SOURCE_DATE_EPOCH ?= $(shell git log -1 --format=%ct 2>/dev/null || echo 0)
export SOURCE_DATE_EPOCH
BUILD_DATE := $(shell date -u -d @$(SOURCE_DATE_EPOCH) +%Y-%m-%dT%H:%M:%SZ 2>/dev/null || date -u -r $(SOURCE_DATE_EPOCH) +%Y-%m-%dT%H:%M:%SZ)
TREE_STATE := $(if $(findstring dirty,$(VERSION)),dirty,clean)
VERSION_MAJOR := $(shell echo '$(VERSION)' | sed -n 's/^v\([0-9]*\)\..*/\1/p')
VERSION_MINOR := $(shell echo '$(VERSION)' | sed -n 's/^v[0-9]*\.\([0-9]*\).*/\1/p')
VERSION_LDFLAGS := $(foreach p,k8s.io/component-base/version k8s.io/client-go/pkg/version,\
  -X $(p).gitVersion=$(VERSION) -X $(p).gitCommit=$(REVISION) -X $(p).gitTreeState=$(TREE_STATE) \
  -X $(p).buildDate=$(BUILD_DATE) -X $(p).gitMajor=$(VERSION_MAJOR) -X $(p).gitMinor=$(VERSION_MINOR))
# Static (no libc in the image), no local paths, no VCS stamp (the version
# flags carry it): the same commit gives the same bytes.
GO_BUILD_CCM = CGO_ENABLED=0 $(GO) build -trimpath -buildvcs=false -ldflags '-s -w $(VERSION_LDFLAGS)'

# --- image (hack/image: go-containerregistry, no Docker, nothing pulled) ---
PLATFORMS ?= linux/amd64 linux/arm64
REGISTRY ?= ghcr.io/metal-ccm
IMAGE ?= $(REGISTRY)/cloud-provider-equinix-metal
IMAGE_DIR ?= $(BIN_DIR)/image
SOURCE_URL ?= https://github.com/metal-ccm/cloud-provider-equinix-metal

.PHONY: all build test unit lint vet fmt-check golangci vulncheck run k8s-bins modules examples policy-test clean help \
  version sync-policies image image-check image-push manifests module-image bench-scale e2e-bins e2e soak

all: build

help:
	@echo "make run    - the sandbox: emulator + real kube-apiserver + the CCM + sample Services"
	@echo "make run-cluster - the same on a real cluster (root): kubelets, the CCM from its image, MetalLB, BGP routers; curl a Service's Elastic IP from the client netns"
	@echo "make test   - every test (builds kube-apiserver and etcd into $(K8S_BIN_DIR) once)"
	@echo "make build  - the CCM binary in $(CCM_BIN)"
	@echo "make e2e    - the data plane: real MetalLB speakers and two GoBGP routers in a private netns (part of make test)"
	@echo "make lint   - go vet, gofmt, golangci-lint ($(GOLANGCI_VERSION), .golangci.yml) and govulncheck offline (builds both once)"
	@echo "make promtool-test - the chart's Prometheus alert rules under promtool check and test (builds promtool once)"
	@echo "make bench-scale - the CCM at 10,000 Services x 1,000 nodes (tens of minutes)"
	@echo "make soak   - 300 Service cycles under 10% Equinix API faults and 7 kill -9 of the CCM (SOAK_ARGS=\"-cycles 100 -kills 3\"; minutes)"
	@echo "make image  - OCI image (linux/amd64, linux/arm64) as an OCI layout in $(IMAGE_DIR), and the stamped chart and manifests in $(BIN_DIR)/deploy"
	@echo "make image-push REGISTRY=registry.example/team - push the image as \$$(REGISTRY)/cloud-provider-equinix-metal:\$$(VERSION)"
	@echo "make module-image WASM=mine.wasm - a load-balancer module as an OCI artifact in $(BIN_DIR)/modules/<name> (add MODULE_REF=... to push)"
	@echo "make version - the version stamped everywhere ($(VERSION))"
	@echo "make helm   - build Helm $(HELM_VERSION) (the tests' version) once and print its path, to render or install the chart without a helm binary"
	@echo "make cluster-test - real clusters (containerd, kubelet, kube-proxy in netns; root): pods, Services, and a cloud cluster's traffic through its Elastic IPs (its short check is part of make test)"
	@echo "make conformance - Kubernetes' own [sig-network] LoadBalancers e2e tests against a real cloud cluster (root; tens of minutes); JUnit in bin/conformance; CONFORMANCE_SPEAKER=native|metallb-0.16.1-native|frr|configmap|kube-vip"
	@echo "make cluster-clean - remove what a killed cluster run left behind"
	@echo "make sync-policies - copy policies/*.rego into deploy/ (kustomize and the chart carry copies; a test fails when they differ)"

version:
	@echo $(VERSION)

# kustomize reads no file outside a kustomization's folder, and Helm none
# outside the chart, so deploy/base/policies and deploy/chart/files/policies
# carry copies of policies/*.rego; this writes them (and the kustomization
# that makes the ConfigMap). deploy's tests fail when a copy differs.
sync-policies:
	sh deploy/hack/sync-policies.sh

build: modules
	$(GO_BUILD_CCM) -o $(CCM_BIN) ./cmd/cloud-provider-equinix-metal

# One static binary per platform, then one image index from them. The
# manifests and chart in $(BIN_DIR)/deploy name this image and version.
# The image of this machine's platform also carries the built-in modules
# compiled (wazero compiles for the machine it runs on; another platform's
# image compiles them at its first start).
NATIVE_PLATFORM := $(shell $(GO) env GOOS)/$(shell $(GO) env GOARCH)
MODULE_CACHE_DIR = $(BIN_DIR)/module-cache/$(NATIVE_PLATFORM)
image: modules manifests
	@for p in $(PLATFORMS); do \
	  echo ">> building $(VERSION) for $$p"; \
	  GOOS=$${p%/*} GOARCH=$${p#*/} $(GO_BUILD_CCM) -o $(BIN_DIR)/$$p/cloud-provider-equinix-metal ./cmd/cloud-provider-equinix-metal; \
	done
	$(if $(filter $(NATIVE_PLATFORM),$(PLATFORMS)),$(GO) run ./hack/image compile-modules --out $(MODULE_CACHE_DIR))
	$(GO) run ./hack/image build --out $(IMAGE_DIR) --version $(VERSION) --revision $(REVISION) \
	  --source $(SOURCE_URL) --created $(SOURCE_DATE_EPOCH) \
	  $(foreach p,$(PLATFORMS),--binary $(p)=$(BIN_DIR)/$(p)/cloud-provider-equinix-metal) \
	  $(if $(filter $(NATIVE_PLATFORM),$(PLATFORMS)),--module-cache $(NATIVE_PLATFORM)=$(MODULE_CACHE_DIR))

# Two builds of the image for hack/image's TestMakeImage (the same commit
# must give the same bytes), made before `go test` runs: cross-compiling two
# platforms on an empty build cache takes longer on two cores than go test's
# 10-minute limit per package. The REGISTRY is the README's, as the test
# checks.
IMAGE_CHECK_DIR := $(BIN_DIR)/image-check
image-check:
	@rm -rf $(IMAGE_CHECK_DIR)
	@for n in 1 2; do $(MAKE) --no-print-directory -s image REGISTRY=registry.example/team BIN_DIR=$(IMAGE_CHECK_DIR)/$$n >/dev/null; done

# Pushes the layout $(IMAGE_DIR) (credentials: ~/.docker/config.json, as
# `docker login` or `crane auth login` write it).
image-push: image
	$(GO) run ./hack/image push --layout $(IMAGE_DIR) --ref $(IMAGE):$(VERSION)

# A load-balancer module as an OCI artifact (config
# application/vnd.wasm.config.v0+json, one application/wasm layer): an OCI
# layout in bin/modules/<name>, pushed when MODULE_REF (registry/repo:tag)
# is given; it prints the wasm+oci://...@sha256: reference for loadbalancer.
WASM ?=
MODULE_REF ?=
module-image:
	@test -n "$(WASM)" || { echo "usage: make module-image WASM=path/to/module.wasm [MODULE_REF=registry/repo:tag]"; exit 1; }
	$(GO) run ./hack/image module --wasm $(WASM) --out $(BIN_DIR)/modules/$(basename $(notdir $(WASM))) $(if $(MODULE_REF),--ref $(MODULE_REF))

# deploy/ (kustomize) and deploy/chart with the placeholder version
# v0.0.0-dev and image $(PLACEHOLDER_IMAGE) replaced by this build's.
PLACEHOLDER_IMAGE := ghcr.io/metal-ccm/cloud-provider-equinix-metal
manifests:
	$(GO) run ./hack/image stamp --from deploy --out $(BIN_DIR)/deploy --version $(VERSION) --image $(IMAGE)

# The SDK (sdk/) is a Go module of its own, so that a module author requires
# it without the CCM's dependencies; ./... at the root does not reach it, so
# every target that covers the tree runs it too.
SDK_DIR := sdk

# -timeout 20m: host/provider alone takes about 6 minutes on 2 cores, and
# go test runs two packages at once.
# cluster-debs first: besides the cluster check, the example module's
# TestBIRDParses needs bird (bird2), and skips without it.
test: lint cluster-debs k8s-bins modules examples policy-test image-check
	METAL_CCM_IMAGE_BUILDS=$(CURDIR)/$(IMAGE_CHECK_DIR)/1:$(CURDIR)/$(IMAGE_CHECK_DIR)/2 $(GO) test -timeout 20m ./...
	cd $(SDK_DIR) && $(GO) test ./...
	@$(MAKE) --no-print-directory promtool-test
	@$(MAKE) --no-print-directory e2e
	@$(MAKE) --no-print-directory cluster-check CLUSTER_CCM_IMAGE=$(IMAGE_CHECK_DIR)/1/image

# --- load-balancer modules (owned by the module work) ---
# Each modules/<name>/ main package becomes modules/wasm/<name>.wasm, which
# the CCM embeds. A module is rebuilt when any Go file of the SDK or the
# modules changed.
MODULE_NAMES := metallb-crd metallb-configmap kube-vip empty
MODULE_WASM := $(MODULE_NAMES:%=modules/wasm/%.wasm)
MODULE_SRCS := $(shell find sdk modules -name '*.go' -not -name '*_test.go' 2>/dev/null) go.mod $(SDK_DIR)/go.mod
modules: $(MODULE_WASM)

modules/wasm/%.wasm: $(MODULE_SRCS)
	@echo ">> building load-balancer module $*"
	@GOOS=wasip1 GOARCH=wasm $(GO) build -buildmode=c-shared -trimpath -ldflags='-s -w' -o $@.tmp ./modules/$* || { rm -f $@.tmp; exit 1; }
	@mv $@.tmp $@

# The example custom module (examples/modules/bird), built like a user would.
EXAMPLE_WASM := examples/modules/bird/bird.wasm
examples: $(EXAMPLE_WASM)

$(EXAMPLE_WASM): $(MODULE_SRCS) $(shell find examples/modules -name '*.go' -not -name '*_test.go' 2>/dev/null)
	@echo ">> building the example module $@"
	@GOOS=wasip1 GOARCH=wasm $(GO) build -buildmode=c-shared -trimpath -ldflags='-s -w' -o $@.tmp ./examples/modules/bird || { rm -f $@.tmp; exit 1; }
	@mv $@.tmp $@

# --- Rego policy tests (owned by the policy work) ---
# The OPA CLI is the `tool` pinned in go.mod: nothing to install. Each
# example is tested as it would be mounted: the default policy files it does
# not replace (same file name = same ConfigMap key), plus its own files.
# opa-capabilities.json lists the builtins the CCM allows (no network, clock
# or randomness), so a policy that calls another fails here, not in the
# cluster; host/policy's tests keep it equal to what the CCM compiles with.
OPA_CAPS := --capabilities opa-capabilities.json
policy-test:
	@$(GO) tool opa fmt --list --fail policies examples/policies || \
	  { echo "run: $(GO) tool opa fmt --write policies examples/policies"; exit 1; }
	$(GO) tool opa check --strict $(OPA_CAPS) policies
	$(GO) tool opa test $(OPA_CAPS) policies
	@for d in examples/policies/*/; do \
	  files=""; \
	  for f in policies/*.rego; do \
	    case $$f in *_test.rego) continue;; esac; \
	    [ -e "$$d$$(basename $$f)" ] || files="$$files $$f"; \
	  done; \
	  echo "$(GO) tool opa test $(OPA_CAPS)$$files $$d"; \
	  $(GO) tool opa check --strict $(OPA_CAPS) $$files $$d || exit 1; \
	  $(GO) tool opa test $(OPA_CAPS) $$files $$d || exit 1; \
	done

unit:
	$(GO) test -short ./...
	cd $(SDK_DIR) && $(GO) test -short ./...

lint: vet fmt-check golangci vulncheck

# --- static analysis (make lint, so make test and CI) ---
# golangci-lint v2 with the linters and reasons in .golangci.yml, over the
# main module and the SDK (its own module), with the e2e and cluster tags.
GOLANGCI_VERSION := v2.15.0
GOLANGCI := $(CACHE_HOME)/cloud-provider-equinix-metal/golangci-lint/$(GOLANGCI_VERSION)/golangci-lint
$(GOLANGCI):
	$(call build-in-module,github.com/golangci/golangci-lint/v2,$(GOLANGCI_VERSION),cmd/golangci-lint)
golangci: $(GOLANGCI)
	$(GOLANGCI) run --timeout 20m ./...
	cd $(SDK_DIR) && $(GOLANGCI) run --config $(CURDIR)/.golangci.yml --timeout 20m ./...

# govulncheck offline: its database is built (by x/vulndb's indexdb) from the
# OSV files of the golang.org/x/vulndb module the Go module proxy serves, a
# snapshot pinned here; bump VULNDB_VERSION for newer advisories.
# hack/vulncheck fails on a called vulnerability in a required module and
# lists the standard library's (fixed only by a newer Go than the machine's).
VULN_VERSION := v1.9.0
VULNDB_VERSION := v0.0.0-20261105234957-e22db6528018
VULN_DIR := $(CACHE_HOME)/cloud-provider-equinix-metal/vuln
GOVULNCHECK := $(VULN_DIR)/$(VULN_VERSION)/govulncheck
INDEXDB := $(VULN_DIR)/$(VULNDB_VERSION)/indexdb
VULNDB := $(VULN_DIR)/$(VULNDB_VERSION)/db
$(GOVULNCHECK):
	$(call build-in-module,golang.org/x/vuln,$(VULN_VERSION),cmd/govulncheck)
$(INDEXDB):
	$(call build-in-module,golang.org/x/vulndb,$(VULNDB_VERSION),cmd/indexdb)
$(VULNDB)/index/db.json: $(INDEXDB)
	@dir=$$($(GO) mod download -json golang.org/x/vulndb@$(VULNDB_VERSION) | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$$/\1/p'); \
	rm -rf $(VULNDB).tmp && $(INDEXDB) -vulns "$$dir/data/osv" -out $(VULNDB).tmp && rm -rf $(VULNDB) && mv $(VULNDB).tmp $(VULNDB)
vulncheck: $(GOVULNCHECK) $(VULNDB)/index/db.json
	@$(GO) build -o $(BIN_DIR)/vulncheck ./hack/vulncheck
	$(BIN_DIR)/vulncheck -govulncheck $(GOVULNCHECK) -db $(VULNDB) ./...
	cd $(SDK_DIR) && $(CURDIR)/$(BIN_DIR)/vulncheck -govulncheck $(GOVULNCHECK) -db $(VULNDB) ./...

vet:
	$(GO) vet ./...
	cd $(SDK_DIR) && $(GO) vet ./...

fmt-check:
	@out=$$(gofmt -l $$(git ls-files --cached --others --exclude-standard '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; echo "run: gofmt -w <files>"; exit 1; fi

# --- MetalLB and GoBGP for the data plane (make e2e, make run) ---
# Built from the Go module proxy at pinned versions, once per version,
# inside each module's own directory so that its go.sum is used (a plain
# `go install` of MetalLB fails the checksum lookup of one dependency).
# MetalLB 0.16 cannot be built from the proxy (a dependency version is
# refused), so the speakers are 0.15.3's with the 0.16 CRDs that testenv
# installs; 0.15's own CRDs are refused by kube-apiserver 1.37.
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

# The sandbox: emulator + real kube-apiserver + the CCM + sample Services;
# with user namespaces, MetalLB's speakers and two BGP routers too.
# Pass options with SANDBOX_ARGS, for example
#   make run SANDBOX_ARGS="--loadbalancer=metallb:///metallb-system/config"
#   make run SANDBOX_ARGS="--loadbalancer=wasm://$(CURDIR)/$(EXAMPLE_WASM)?namespace=bird"
# MetalLB and GoBGP are built only when the sandbox can use them: not with
# --data-plane=false, nor with a --loadbalancer other than MetalLB's (the
# routers are shown with MetalLB in CRD mode; the sandbox says why it runs
# without them).
SANDBOX_ARGS ?=
RUN_LB := $(patsubst --loadbalancer=%,%,$(patsubst -loadbalancer=%,%,$(filter -loadbalancer=% --loadbalancer=%,$(SANDBOX_ARGS))))
RUN_DATAPLANE := $(if $(filter -data-plane=false --data-plane=false,$(SANDBOX_ARGS)),,$(if $(RUN_LB),$(filter metallb:%,$(RUN_LB)),yes))
RUN_DATAPLANE_BINS := $(if $(RUN_DATAPLANE),$(DATAPLANE_BINS))
RUN_DATAPLANE_ARGS := $(if $(RUN_DATAPLANE),--metallb $(METALLB_BIN_DIR) --gobgp $(GOBGP_BIN_DIR))
run: build examples k8s-bins $(K8S_BIN_DIR)/kubectl $(RUN_DATAPLANE_BINS)
	@$(GO) build -o $(BIN_DIR)/sandbox ./test/cmd/sandbox
	@echo ">> kubectl for the sandbox: $(K8S_BIN_DIR)/kubectl"
	@PATH="$(K8S_BIN_DIR):$$PATH" $(BIN_DIR)/sandbox --ccm $(CCM_BIN) $(RUN_DATAPLANE_ARGS) $(SANDBOX_ARGS)

# The scale bench: the CCM binary against the emulator (50 ms API latency)
# and a real kube-apiserver, 10,000 LoadBalancer Services on 1,000 nodes,
# from empty to every Service with its ingress; then one more Service and
# one node joining. Tens of minutes on 2 cores; not part of `make test`
# (its smoke test, at 20 Services x 4 nodes, is). Change the size with
#   make bench-scale SCALE_ARGS="-services 1000 -nodes 100"
SCALE_ARGS ?=
bench-scale: build k8s-bins
	@$(GO) build -o $(BIN_DIR)/scalebench ./test/scalebench
	$(BIN_DIR)/scalebench --ccm $(CCM_BIN) $(SCALE_ARGS)

# The long fault-injection run (test/faults): two CCM replicas
# with leader election, the emulator failing a share of Equinix API
# requests (429, 500, 503, resets, answers lost for 35 s), kill -9 of the
# CCM (the leader too) and Service churn; then the faults stop and it checks
# no leaked or duplicate reservation, every Service converged, no stale
# MetalLB object, and prints its figures. Its short run is part of make test.
# For example
#   make soak SOAK_ARGS="-cycles 1000 -fault-rate 0.2 -kills 20"
SOAK_ARGS ?=
soak: build k8s-bins
	@$(GO) build -o $(BIN_DIR)/soak ./test/faults/soak
	$(BIN_DIR)/soak --ccm $(CCM_BIN) $(SOAK_ARGS)

# Builds only what is missing: no file prerequisites, so a fresh clone (with
# new timestamps) never rebuilds binaries that are already cached. The
# version is in the path, so a new version builds anew.
k8s-bins: $(K8S_BINS)

$(K8S_BIN_DIR)/kube-apiserver:
	@mkdir -p $(K8S_BIN_DIR)
	@echo ">> building kube-apiserver $(K8S_VERSION) into $(K8S_BIN_DIR) (once; about 4 minutes on 2 cores)"
	@start=$$(date +%s); \
	$(GO) build -C test/testenv/k8sbins -ldflags '$(K8S_LDFLAGS)' -o $@.tmp k8s.io/kubernetes/cmd/kube-apiserver; \
	mv $@.tmp $@; echo ">> kube-apiserver built in $$(( $$(date +%s) - start ))s"

$(K8S_BIN_DIR)/etcd:
	@mkdir -p $(K8S_BIN_DIR)
	@echo ">> building etcd into $(K8S_BIN_DIR) (once)"
	@$(GO) build -C test/testenv/k8sbins -ldflags '-s -w' -o $@.tmp go.etcd.io/etcd/server/v3
	@mv $@.tmp $@

$(K8S_BIN_DIR)/kubectl:
	@mkdir -p $(K8S_BIN_DIR)
	@echo ">> building kubectl $(K8S_VERSION) into $(K8S_BIN_DIR) (once)"
	@$(GO) build -C test/testenv/k8sbins -ldflags '$(K8S_LDFLAGS)' -o $@.tmp k8s.io/kubernetes/cmd/kubectl
	@mv $@.tmp $@

# --- the data-plane end-to-end test (test/e2e) ---
# The build rules of MetalLB and GoBGP (versions and directories above).
# module@version package [env] [build flags] -> $@, built in the module's
# download directory.
define build-in-module
	@mkdir -p $(@D)
	@echo ">> building $(3) $(2) into $(@D) (once)"
	@dir=$$($(4) $(GO) mod download -json $(1)@$(2) | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$$/\1/p'); \
	test -n "$$dir" || { echo "go mod download $(1)@$(2) gave no directory"; exit 1; }; \
	GOFLAGS=-buildvcs=false $(GO) build -C "$$dir" -trimpath $(5) -ldflags '-s -w' -o $@.tmp ./$(3) || { rm -f $@.tmp; exit 1; }
	@mv $@.tmp $@
endef

e2e-bins: $(E2E_BINS)

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
helm: $(HELM)
	@echo "$(HELM)"
$(HELM):
	$(call build-in-module,helm.sh/helm/v4,$(HELM_VERSION),cmd/helm)

# --- the chart's Prometheus alerts (deploy/chart/files/prometheus-rules.yaml) ---
# promtool from the Prometheus module (v0.316.0 is Prometheus 3.16.0), built
# once like MetalLB; its tests (prometheus-rules_test.yaml beside the rules,
# left out of the chart by .helmignore) fire each alert on the bad value of
# its metric and keep it silent on the good one. Part of make test.
# remove_all_sd (Prometheus' own build tag) leaves out the service-discovery
# plugins rule tests never use, and with them the cloud SDKs: most of a cold
# build's time.
PROMETHEUS_VERSION := v0.316.0
PROMTOOL ?= $(CACHE_HOME)/cloud-provider-equinix-metal/prometheus/$(PROMETHEUS_VERSION)/promtool
# The module ships a go.work naming directories its zip leaves out.
$(PROMTOOL): export GOWORK := off
$(PROMTOOL):
	$(call build-in-module,github.com/prometheus/prometheus,$(PROMETHEUS_VERSION),cmd/promtool,,-tags=remove_all_sd)
.PHONY: promtool-test
promtool-test: $(PROMTOOL)
	$(PROMTOOL) check rules deploy/chart/files/prometheus-rules.yaml
	$(PROMTOOL) test rules deploy/chart/files/prometheus-rules_test.yaml

# Runs once in `make test`; a plain `go test ./...` skips it (build tag e2e).
# The test re-runs itself in a private user+network namespace, or fails with
# one line saying what the machine must allow.
# The deliberately broken module (wrong peer ASN) shows the router assertion
# can fail.
E2E_WRONG_ASN := $(BIN_DIR)/e2e/wrongasn.wasm
$(E2E_WRONG_ASN): $(MODULE_SRCS) test/e2e/wrongasn/main.go
	@mkdir -p $(@D)
	@GOOS=wasip1 GOARCH=wasm $(GO) build -buildmode=c-shared -trimpath -ldflags='-s -w' -o $@ ./test/e2e/wrongasn

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

e2e: build k8s-bins e2e-bins e2e-debs $(E2E_WRONG_ASN)
	@$(GO) build -o $(BIN_DIR)/sandbox ./test/cmd/sandbox
	METAL_CCM_E2E_CCM=$(CURDIR)/$(CCM_BIN) METAL_CCM_E2E_METALLB=$(METALLB_BIN_DIR) METAL_CCM_E2E_GOBGP=$(GOBGP_BIN_DIR) \
	  METAL_CCM_E2E_METALLB_LEGACY=$(METALLB_LEGACY_BIN_DIR) METAL_CCM_E2E_SANDBOX=$(CURDIR)/$(BIN_DIR)/sandbox \
	  METAL_CCM_E2E_FRR=$(FRR_DIR) METAL_CCM_E2E_METALLB_FRR=$(METALLB_FRR_BIN_DIR) \
	  METAL_CCM_E2E_WRONG_ASN_MODULE=$(CURDIR)/$(E2E_WRONG_ASN) $(GO) test -tags e2e -count=1 -v -timeout 10m ./test/e2e/ ./test/dataplane/

clean:
	rm -rf $(BIN_DIR)

# --- a real node on this machine (test/cluster; phase 1) ---
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

.PHONY: cluster-bins cluster-debs cluster-test cluster-check cluster-clean cluster-image conformance run-cluster
cluster-bins: k8s-bins $(CLUSTER_BINS)

$(K8S_BIN_DIR)/kubelet $(K8S_BIN_DIR)/kube-proxy $(K8S_BIN_DIR)/kube-controller-manager $(K8S_BIN_DIR)/kube-scheduler:
	@mkdir -p $(@D)
	@echo ">> building $(@F) $(K8S_VERSION) into $(K8S_BIN_DIR) (once)"
	@start=$$(date +%s); \
	$(GO) build -C test/testenv/k8sbins -ldflags '$(K8S_LDFLAGS)' -o $@.tmp k8s.io/kubernetes/cmd/$(@F) || { rm -f $@.tmp; exit 1; }; \
	mv $@.tmp $@; echo ">> $(@F) built in $$(( $$(date +%s) - start ))s"

# Static: the pause image holds this one file and nothing else.
$(K8S_BIN_DIR)/pause:
	@mkdir -p $(@D)
	@dir=$$(cd test/testenv/k8sbins && $(GO) mod download -json k8s.io/kubernetes@$(K8S_VERSION) | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$$/\1/p'); \
	test -n "$$dir" || { echo "go mod download k8s.io/kubernetes@$(K8S_VERSION) gave no directory"; exit 1; }; \
	gcc -Os -static -DVERSION=v$(PAUSE_VERSION) -o $@.tmp "$$dir/build/pause/linux/pause.c" || { rm -f $@.tmp; exit 1; }
	@mv $@.tmp $@

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
$(AGNHOST):
	@mkdir -p $(@D)
	@echo ">> building agnhost from k8s.io/kubernetes $(K8S_VERSION) into $(@D) (once)"
	@$(GO) build -C test/testenv/k8sbins -ldflags '-s -w' -o $@.tmp k8s.io/kubernetes/test/images/agnhost || { rm -f $@.tmp; exit 1; }
	@mv $@.tmp $@
$(E2E_TEST):
	@mkdir -p $(@D)
	@echo ">> building e2e.test $(K8S_VERSION) into $(@D) (once; a few minutes)"
	@$(GO) test -C test/testenv/k8sbins -c -ldflags '$(K8S_LDFLAGS)' -o $@.tmp k8s.io/kubernetes/test/e2e || { rm -f $@.tmp; exit 1; }
	@mv $@.tmp $@

# CoreDNS for the conformance cluster's kube-dns: a build with only the
# plugins it needs (test/testenv/corednsbin, its own module), cached.
COREDNS_VERSION := $(shell sed -n 's/^require github.com\/coredns\/coredns \(v[0-9.]*\)$$/\1/p' test/testenv/corednsbin/go.mod)
COREDNS := $(CACHE_HOME)/cloud-provider-equinix-metal/coredns/$(COREDNS_VERSION)/coredns
$(COREDNS):
	@mkdir -p $(@D)
	@echo ">> building CoreDNS $(COREDNS_VERSION) into $(@D) (once)"
	@$(GO) build -C test/testenv/corednsbin -trimpath -ldflags '-s -w' -o $@.tmp . || { rm -f $@.tmp; exit 1; }
	@mv $@.tmp $@

# A cloud cluster (Options.Cloud) runs the CCM from its image (one platform,
# this machine's), MetalLB from its own manifest (in its module) and
# binaries built here, and agnhost. CLUSTER_CCM_IMAGE is an OCI layout.
CLUSTER_CCM_IMAGE ?= $(BIN_DIR)/cluster-image
GOARCH_NATIVE := $(shell $(GO) env GOARCH)
CLUSTER_PREREQS := cluster-debs e2e-debs cluster-bins $(K8S_BIN_DIR)/kubectl $(AGNHOST) $(METALLB_BIN_DIR)/controller $(METALLB_BIN_DIR)/speaker \
  $(METALLB_FRR_BIN_DIR)/controller $(METALLB_FRR_BIN_DIR)/speaker \
  $(METALLB_LEGACY_BIN_DIR)/controller $(METALLB_LEGACY_BIN_DIR)/speaker $(KUBE_VIP) $(FRR_K8S)
# The dual-stack cluster's MetalLB runs in FRR mode: METALLB_FRR_VERSION's
# manifest and binaries, and Debian's FRR (e2e-debs).
metallb-manifest = $$($(GO) mod download -json go.universe.tf/metallb@$(1) | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$$/\1/p')/config/manifests/metallb-native.yaml
CLUSTER_ENV = METAL_CCM_CLUSTER_CCM_IMAGE=$(abspath $(CLUSTER_CCM_IMAGE)) \
  METAL_CCM_CLUSTER_METALLB_MANIFEST=$(call metallb-manifest,$(METALLB_VERSION)) \
  METAL_CCM_CLUSTER_METALLB_BINS=$(METALLB_BIN_DIR) METAL_CCM_CLUSTER_AGNHOST=$(AGNHOST) \
  METAL_CCM_CLUSTER_METALLB_FRR_MANIFEST=$(call metallb-manifest,$(METALLB_FRR_VERSION)) \
  METAL_CCM_CLUSTER_METALLB_FRR_BINS=$(METALLB_FRR_BIN_DIR) METAL_CCM_CLUSTER_FRR=$(FRR_DIR) \
  METAL_CCM_CLUSTER_METALLB_LEGACY_MANIFEST=$$(GONOSUMDB=go.universe.tf/metallb $(GO) mod download -json go.universe.tf/metallb@$(METALLB_LEGACY_VERSION) | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$$/\1/p')/manifests/metallb.yaml \
  METAL_CCM_CLUSTER_METALLB_LEGACY_BINS=$(METALLB_LEGACY_BIN_DIR) METAL_CCM_CLUSTER_KUBE_VIP=$(KUBE_VIP) \
  METAL_CCM_CLUSTER_METALLB_FRR_K8S_MANIFEST=$(patsubst %/metallb-native.yaml,%/metallb-frr-k8s.yaml,$(call metallb-manifest,$(METALLB_FRR_VERSION))) \
  METAL_CCM_CLUSTER_FRR_K8S=$(FRR_K8S)

cluster-image: modules
	@$(MAKE) --no-print-directory -s image PLATFORMS=linux/$(GOARCH_NATIVE) IMAGE_DIR=$(CLUSTER_CCM_IMAGE) >/dev/null

# Every test/cluster test (root): nodes, pods, kube-proxy, and a cloud
# cluster's traffic through its Elastic IPs.
cluster-test: $(CLUSTER_PREREQS) cluster-image $(E2E_WRONG_ASN)
	$(CLUSTER_ENV) METAL_CCM_CLUSTER_WRONG_MODULE=$(abspath $(E2E_WRONG_ASN)) $(GO) test -tags cluster -count=1 -v -timeout 45m ./test/cluster/

# The short real-cluster check of make test: Services answered through
# their Elastic IPs, a node lost; and the wrong-ASN module making that
# check fail; a dual-stack cluster answering on both families, its
# sessions kept over 20 Service changes; the same short check with each
# other speaker (MetalLB 0.16.1 native and FRR-K8s, MetalLB 0.12.1 with the ConfigMap,
# kube-vip); and FRR and kube-vip told no peer is multihop failing behind
# the gateway. The image is the one image-check built. To stay within CI's
# time, make test leaves out two that make cluster-test runs: MetalLB
# 0.16.1 native (0.15.3's speaker, TestCloudTraffic's, differs from it in
# version only) and kube-vip told no multihop (FRR's case shows the
# gateway stops a TTL-1 session). CLUSTER_CHECK_SKIP= runs them too.
# (-skip splits at each /: the second level names the subtests.)
CLUSTER_CHECK_SKIP ?= /^(metallb-0.16.1-native|kube-vip-told-no-multihop)$$
cluster-check: $(CLUSTER_PREREQS) $(E2E_WRONG_ASN)
	$(CLUSTER_ENV) METAL_CCM_CLUSTER_WRONG_MODULE=$(abspath $(E2E_WRONG_ASN)) \
	  $(GO) test -tags cluster -count=1 -v -timeout 40m -run 'TestCloudTraffic|TestCloudWrongModule|TestCloudDualStack|TestCloudNoMultihop|TestCloudSpeakers' \
	  -skip '$(CLUSTER_CHECK_SKIP)' ./test/cluster/

# Kubernetes' own LoadBalancer e2e tests against a cloud cluster; the JUnit
# report and e2e.test's log go to $(CONFORMANCE_DIR). Narrow or widen with
#   make conformance CONFORMANCE_FOCUS='LoadBalancers .*should be able to preserve UDP traffic'
# CONFORMANCE_SPEAKER picks the cluster's BGP speaker: native (MetalLB
# 0.15.3, the default), metallb-0.16.1-native, frr (MetalLB 0.16.1 in FRR
# mode, dual-stack), configmap (MetalLB 0.12.1), kube-vip.
CONFORMANCE_DIR ?= $(BIN_DIR)/conformance
CONFORMANCE_FOCUS ?=
CONFORMANCE_SPEAKER ?=
conformance: $(CLUSTER_PREREQS) cluster-image $(E2E_TEST) $(COREDNS)
	@rm -rf $(CONFORMANCE_DIR)
	$(CLUSTER_ENV) METAL_CCM_CLUSTER_COREDNS=$(COREDNS) METAL_CCM_CONFORMANCE_E2E=$(E2E_TEST) METAL_CCM_CONFORMANCE_REPORT=$(abspath $(CONFORMANCE_DIR)) \
	  METAL_CCM_CONFORMANCE_FOCUS='$(CONFORMANCE_FOCUS)' METAL_CCM_CONFORMANCE_SPEAKER='$(CONFORMANCE_SPEAKER)' \
	  $(GO) test -tags cluster -count=1 -v -timeout 150m -run 'TestConformance' ./test/cluster/

# make run's real-cluster variant: a cloud cluster with a sample Service,
# until Ctrl-C (root).
# RUN_CLUSTER_FLAGS=-dual-stack makes it dual-stack (MetalLB in FRR mode).
RUN_CLUSTER_FLAGS ?=
run-cluster: $(CLUSTER_PREREQS) cluster-image
	@$(GO) build -o $(BIN_DIR)/cluster ./test/cmd/cluster
	@$(CLUSTER_ENV) PATH="$(K8S_BIN_DIR):$$PATH" $(BIN_DIR)/cluster $(RUN_CLUSTER_FLAGS)

# What a killed cluster run left behind (processes, netns, mounts, cgroups).
cluster-clean:
	sh test/cluster/clean.sh
