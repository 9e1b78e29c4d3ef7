# The two commands a user needs are `make run` and `make test`; both build
# whatever is missing first. `make ci` (what .ci/run calls) runs everything.
# Built third-party binaries live in a cache outside the repository and are
# built once per version. This file holds the everyday targets; mk/ holds
# the rest by concern: tools.mk (pinned binaries and Debian packages),
# lint.mk, image.mk, harness.mk (e2e, the real cluster, long runs).
# `make help` lists every target from the `## ` comment on its line.

SHELL := bash
.SHELLFLAGS := -eu -o pipefail -c
GO ?= go
# Everything built from this repository's modules (go vet, go test,
# golangci-lint's loading, the tests' own `go build`, go run, the image)
# uses one build configuration, the image's: static (no cgo) and
# -trimpath. Go caches a compiled package per configuration, so on an
# empty cache the CCM's dependencies compile once for the tests and the
# image rather than twice (minutes on 2 cores). The pinned third-party
# tools keep Go's defaults (tools.mk's TOOL_GO).
export CGO_ENABLED := 0
export GOFLAGS := $(strip -trimpath $(filter-out -trimpath,$(GOFLAGS)))

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

# The SDK (sdk/) is a Go module of its own, so that a module author requires
# it without the CCM's dependencies; ./... at the root does not reach it, so
# every target that covers the tree runs it too.
SDK_DIR := sdk

.DEFAULT_GOAL := all
include mk/tools.mk

.PHONY: all build test system ci ci-prebuild unit run modules examples policy-test promtool-test clean help version sync-policies

all: build

help: ## this list
	@awk 'BEGIN { FS = ":[^#]*## " } /^[a-z][a-z0-9-]*:.*## / { printf "make %-15s %s\n", $$1, $$2 }' $(MAKEFILE_LIST)

version: ## the version stamped everywhere (hack/version.sh)
	@echo $(VERSION)

# kustomize reads no file outside a kustomization's folder, and Helm none
# outside the chart, so deploy/base/policies and deploy/chart/files/policies
# carry copies of policies/*.rego; this writes them (and the kustomization
# that makes the ConfigMap). deploy's tests fail when a copy differs.
sync-policies: ## copy policies/*.rego into deploy/ (a test fails when a copy differs)
	sh deploy/hack/sync-policies.sh

build: modules ## the CCM binary in bin/cloud-provider-equinix-metal
	$(GO_BUILD_CCM) -o $(CCM_BIN) ./cmd/cloud-provider-equinix-metal

# The contributor's run: rootless, no apt-get, minutes with warm caches.
# -timeout 20m: host/provider alone takes about 4 minutes on 2 cores, and
# go test runs two packages at once. The tests with the build tag system
# (each builds the CCM and runs it for minutes) are make system's, and
# govulncheck (a minute and a half, and about go.mod, not the change at
# hand) is make vulncheck's; make ci runs both. Without bird (Debian's
# bird2; make ci installs it) the example module's TestBIRDParses skips,
# saying so.
test: lint k8s-bins modules examples policy-test promtool-test ## lint and the Go tests of both modules, rootless (builds kube-apiserver and etcd once)
	$(GO) test -timeout 20m ./...
	cd $(SDK_DIR) && $(GO) test ./...

# The Go tests behind the build tag system: the image built twice and
# compared (hack/image), the scale bench at 20 Services (test/scalebench),
# the short fault-injection run (test/faults) and make run's sandbox
# (test/cmd/sandbox). image-check builds the two images first: on an empty
# build cache cross-compiling them takes longer than go test's limit.
SYSTEM_PKGS := ./hack/image ./test/scalebench ./test/faults ./test/cmd/sandbox
system: k8s-bins modules image-check ## the Go tests that build the CCM and run it for minutes (build tag system)
	METAL_CCM_IMAGE_BUILDS=$(CURDIR)/$(IMAGE_CHECK_DIR)/1:$(CURDIR)/$(IMAGE_CHECK_DIR)/2 $(GO) test -tags system -timeout 20m $(SYSTEM_PKGS)

# Everything, as CI runs it (.ci/run): the Debian packages first (root,
# apt-get; bird2 for TestBIRDParses), kube-apiserver and etcd, then make
# test and the system tests, then govulncheck, the data plane in a private
# netns and the real cluster's short check on the image that image-check
# built.
#
# What only those last three run (CI_PREBUILD: MetalLB x3, GoBGP, the
# node binaries, kube-vip, frr-k8s, agnhost, the vulnerability tools) is
# built meanwhile in the background at the lowest CPU priority: on a cold
# cache these builds are about 40 minutes of 2 cores' work (on a fresh
# machine, 2026-11-30), and make test's and make system's tests spend much
# of theirs waiting (on kube-apiserver, on timers), which is when the
# builds get the CPU. They start after kube-apiserver is built, so the
# node binaries reuse its compiled packages. Each step waits for what it
# runs and no more: vulncheck and e2e for CI_PREBUILD_FIRST, while the
# cluster's binaries go on building; the cluster check's MetalLB-native
# tests for the node binaries (CI_PREBUILD_NATIVE), while kube-vip and
# frr-k8s build; its other speakers' tests for all of them.
# Two makes never build one file at once. Their log:
# $(TEST_LOG_DIR)/ci-prebuild.log.
# Each phase prints when it ended, in seconds from here (">> make ci:").
# (Its rule is at the end: a rule's prerequisites are expanded where it
# is read, and lint.mk, included there, defines the vulnerability tools.)
ci: cluster-debs e2e-debs k8s-bins ## everything CI runs: make test, vulncheck, system, e2e and the real cluster's check (root, apt-get)
	@mkdir -p $(TEST_LOG_DIR); t0=$$(date +%s); at() { echo ">> make ci: $$1 after $$(( $$(date +%s) - t0 ))s"; }; \
	nice -n 19 $(MAKE) --no-print-directory ci-prebuild >$(TEST_LOG_DIR)/ci-prebuild.log 2>&1 & pre=$$!; \
	$(MAKE) --no-print-directory test || { rc=$$?; kill $$pre 2>/dev/null; exit $$rc; }; at "make test done"; \
	$(MAKE) --no-print-directory system || { rc=$$?; kill $$pre 2>/dev/null; exit $$rc; }; at "make system done"; \
	while kill -0 $$pre 2>/dev/null && ! ls $(CI_PREBUILD_FIRST) >/dev/null 2>&1; do sleep 5; done; \
	$(MAKE) --no-print-directory vulncheck e2e || { rc=$$?; kill $$pre 2>/dev/null; exit $$rc; }; at "make vulncheck and make e2e done"; \
	while kill -0 $$pre 2>/dev/null && ! ls $(CI_PREBUILD_NATIVE) >/dev/null 2>&1; do sleep 5; done; \
	$(MAKE) --no-print-directory cluster-check CLUSTER_CCM_IMAGE=$(IMAGE_CHECK_DIR)/1/image CLUSTER_CHECK_RUN='$(CI_CLUSTER_NATIVE)' \
	  CLUSTER_CHECK_PREREQS='$(CLUSTER_NATIVE_PREREQS)' CLUSTER_CHECK_LOG=cluster-check-native || { rc=$$?; kill $$pre 2>/dev/null; exit $$rc; }; \
	at "make cluster-check (MetalLB native) done"; \
	wait $$pre || { tail -n 40 $(TEST_LOG_DIR)/ci-prebuild.log; echo "the background builds failed (above)"; exit 1; }; \
	grep '^>>' $(TEST_LOG_DIR)/ci-prebuild.log || true; at "the background builds done"; \
	$(MAKE) --no-print-directory cluster-check CLUSTER_CCM_IMAGE=$(IMAGE_CHECK_DIR)/1/image CLUSTER_CHECK_RUN='$(CI_CLUSTER_REST)' || exit $$?; \
	at "make cluster-check (the other speakers) done"

# The quickest loop: go test -short leaves out the tests that build or start
# whole binaries (each says so when skipped).
unit: ## go test -short: the quickest loop, no binary built or started
	$(GO) test -short ./...
	cd $(SDK_DIR) && $(GO) test -short ./...

# --- load-balancer modules (owned by the module work) ---
# Each modules/<name>/ main package becomes modules/wasm/<name>.wasm, which
# the CCM embeds. A module is rebuilt when any Go file of the SDK or the
# modules changed.
MODULE_NAMES := metallb-crd metallb-configmap kube-vip empty
MODULE_WASM := $(MODULE_NAMES:%=modules/wasm/%.wasm)
MODULE_SRCS := $(shell find sdk modules -name '*.go' -not -name '*_test.go' 2>/dev/null) go.mod $(SDK_DIR)/go.mod
modules: $(MODULE_WASM) ## the built-in load-balancer modules (Wasm) the CCM embeds

modules/wasm/%.wasm: $(MODULE_SRCS)
	@echo ">> building load-balancer module $*"
	@GOOS=wasip1 GOARCH=wasm $(GO) build -buildmode=c-shared -trimpath -ldflags='-s -w' -o $@.tmp ./modules/$* || { rm -f $@.tmp; exit 1; }
	@mv $@.tmp $@

# The example custom module (examples/modules/bird), built like a user would.
EXAMPLE_WASM := examples/modules/bird/bird.wasm
examples: $(EXAMPLE_WASM) ## the example custom module (examples/modules/bird)

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
policy-test: ## opa fmt, check and test of policies/ and every example policy
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

promtool-test: $(PROMTOOL) ## the chart's Prometheus alert rules under promtool check and test
	$(PROMTOOL) check rules deploy/chart/files/prometheus-rules.yaml
	$(PROMTOOL) test rules deploy/chart/files/prometheus-rules_test.yaml

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
run: build examples k8s-bins $(K8S_BIN_DIR)/kubectl $(RUN_DATAPLANE_BINS) ## the sandbox: emulator, real kube-apiserver, the CCM, sample Services (SANDBOX_ARGS=...)
	@$(GO) build -o $(BIN_DIR)/sandbox ./test/cmd/sandbox
	@echo ">> kubectl for the sandbox: $(K8S_BIN_DIR)/kubectl"
	@PATH="$(K8S_BIN_DIR):$$PATH" $(BIN_DIR)/sandbox --ccm $(CCM_BIN) $(RUN_DATAPLANE_ARGS) $(SANDBOX_ARGS)

clean: ## remove bin/
	rm -rf $(BIN_DIR)

include mk/lint.mk mk/image.mk mk/harness.mk

# make ci's background builds (see ci), in the order they are needed:
# first what make vulncheck and make e2e run, which start as soon as
# these exist (each is renamed into place when complete), while the rest,
# for the cluster check, goes on building.
CI_PREBUILD_FIRST := $(E2E_BINS) $(GOVULNCHECK) $(VULNDB)/index/db.json
CI_PREBUILD_NATIVE := $(CLUSTER_BINS) $(K8S_BIN_DIR)/kubectl $(AGNHOST)
CI_PREBUILD := $(CI_PREBUILD_FIRST) $(CI_PREBUILD_NATIVE) $(KUBE_VIP) $(FRR_K8S)
# The cluster check in two parts: MetalLB's native speaker's tests start
# once the node binaries are built (CI_PREBUILD_NATIVE), while kube-vip
# and frr-k8s build; the other speakers' after every build is done.
CI_CLUSTER_NATIVE := TestCloudTraffic|TestCloudWrongModule|TestCloudTakeOver
CI_CLUSTER_REST := TestCloudDualStack|TestCloudNoMultihop|TestCloudSpeakers
ci-prebuild: $(CI_PREBUILD)
