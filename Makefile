# The two commands a user needs are `make run` and `make test`; both build
# whatever is missing first. Built Kubernetes binaries live in a cache outside
# the repository and are built once per version.

SHELL := bash
.SHELLFLAGS := -eu -o pipefail -c
GO ?= go

BIN_DIR := bin
CCM_BIN := $(BIN_DIR)/cloud-provider-equinix-metal

# Kubernetes test binaries: built from the Go module proxy by the nested
# module in host/testing/testenv/k8sbins, at the same minor as the k8s.io/* libraries.
K8S_VERSION := $(shell sed -n 's/^require k8s.io\/kubernetes \(v[0-9.]*\)$$/\1/p' host/testing/testenv/k8sbins/go.mod)
K8S_MINOR := $(word 2,$(subst ., ,$(K8S_VERSION)))
CACHE_HOME := $(or $(XDG_CACHE_HOME),$(HOME)/.cache)
K8S_BIN_DIR ?= $(CACHE_HOME)/cloud-provider-equinix-metal/k8s/$(K8S_VERSION)
K8S_LDFLAGS := -s -w $(foreach p,k8s.io/component-base/version k8s.io/client-go/pkg/version,\
  -X $(p).gitVersion=$(K8S_VERSION) -X $(p).gitMajor=1 -X $(p).gitMinor=$(K8S_MINOR) -X $(p).gitTreeState=clean)
K8S_BINS := $(K8S_BIN_DIR)/kube-apiserver $(K8S_BIN_DIR)/etcd
export METAL_CCM_K8S_ASSETS := $(K8S_BIN_DIR)

.PHONY: all build test unit lint vet fmt-check run k8s-bins modules examples policy-test clean help

all: build

help:
	@echo "make run    - the sandbox: emulator + real kube-apiserver + the CCM + sample Services"
	@echo "make test   - every test (builds kube-apiserver and etcd into $(K8S_BIN_DIR) once)"
	@echo "make build  - the CCM binary in $(CCM_BIN)"
	@echo "make lint   - go vet and gofmt check"

build: modules
	$(GO) build -o $(CCM_BIN) ./cmd/cloud-provider-equinix-metal

# The SDK (sdk/) is a Go module of its own, so that a module author requires
# it without the CCM's dependencies; ./... at the root does not reach it, so
# every target that covers the tree runs it too.
SDK_DIR := sdk

test: lint k8s-bins modules examples policy-test
	$(GO) test ./...
	cd $(SDK_DIR) && $(GO) test ./...

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

lint: vet fmt-check

vet:
	$(GO) vet ./...
	cd $(SDK_DIR) && $(GO) vet ./...

fmt-check:
	@out=$$(gofmt -l $$(git ls-files --cached --others --exclude-standard '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; echo "run: gofmt -w <files>"; exit 1; fi

# The sandbox: emulator + real kube-apiserver + the CCM + sample Services.
# Pass options with SANDBOX_ARGS, for example
#   make run SANDBOX_ARGS="--loadbalancer=metallb:///metallb-system/config"
#   make run SANDBOX_ARGS="--loadbalancer=wasm://$(CURDIR)/$(EXAMPLE_WASM)?namespace=bird"
SANDBOX_ARGS ?=
run: build examples k8s-bins $(K8S_BIN_DIR)/kubectl
	@$(GO) build -o $(BIN_DIR)/sandbox ./cmd/sandbox
	@echo ">> kubectl for the sandbox: $(K8S_BIN_DIR)/kubectl"
	@PATH="$(K8S_BIN_DIR):$$PATH" $(BIN_DIR)/sandbox --ccm $(CCM_BIN) $(SANDBOX_ARGS)

# Builds only what is missing: no file prerequisites, so a fresh clone (with
# new timestamps) never rebuilds binaries that are already cached. The
# version is in the path, so a new version builds anew.
k8s-bins: $(K8S_BINS)

$(K8S_BIN_DIR)/kube-apiserver:
	@mkdir -p $(K8S_BIN_DIR)
	@echo ">> building kube-apiserver $(K8S_VERSION) into $(K8S_BIN_DIR) (once; about 4 minutes on 2 cores)"
	@start=$$(date +%s); \
	$(GO) build -C host/testing/testenv/k8sbins -ldflags '$(K8S_LDFLAGS)' -o $@.tmp k8s.io/kubernetes/cmd/kube-apiserver; \
	mv $@.tmp $@; echo ">> kube-apiserver built in $$(( $$(date +%s) - start ))s"

$(K8S_BIN_DIR)/etcd:
	@mkdir -p $(K8S_BIN_DIR)
	@echo ">> building etcd into $(K8S_BIN_DIR) (once)"
	@$(GO) build -C host/testing/testenv/k8sbins -ldflags '-s -w' -o $@.tmp go.etcd.io/etcd/server/v3
	@mv $@.tmp $@

$(K8S_BIN_DIR)/kubectl:
	@mkdir -p $(K8S_BIN_DIR)
	@echo ">> building kubectl $(K8S_VERSION) into $(K8S_BIN_DIR) (once)"
	@$(GO) build -C host/testing/testenv/k8sbins -ldflags '$(K8S_LDFLAGS)' -o $@.tmp k8s.io/kubernetes/cmd/kubectl
	@mv $@.tmp $@

clean:
	rm -rf $(BIN_DIR)
