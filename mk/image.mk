# image.mk: the CCM's OCI image (hack/image: go-containerregistry, no Docker,
# nothing pulled), the stamped chart and manifests, and a load-balancer
# module as an OCI artifact.

PLATFORMS ?= linux/amd64 linux/arm64
REGISTRY ?= ghcr.io/metal-ccm
IMAGE ?= $(REGISTRY)/cloud-provider-equinix-metal
IMAGE_DIR ?= $(BIN_DIR)/image
SOURCE_URL ?= https://github.com/metal-ccm/cloud-provider-equinix-metal

# One static binary per platform, then one image index from them. The
# manifests and chart in $(BIN_DIR)/deploy name this image and version.
# The image of this machine's platform also carries the built-in modules
# compiled (wazero compiles for the machine it runs on; another platform's
# image compiles them at its first start).
NATIVE_PLATFORM := $(shell $(GO) env GOOS)/$(shell $(GO) env GOARCH)
MODULE_CACHE_DIR = $(BIN_DIR)/module-cache/$(NATIVE_PLATFORM)
image: modules manifests ## OCI image (linux/amd64, linux/arm64) in bin/image, and the stamped chart and manifests in bin/deploy
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
image-check: ## two builds of the image for TestMakeImage (one commit, the same bytes)
	@rm -rf $(IMAGE_CHECK_DIR)
	@for n in 1 2; do $(MAKE) --no-print-directory -s image REGISTRY=registry.example/team BIN_DIR=$(IMAGE_CHECK_DIR)/$$n >/dev/null; done

# Pushes the layout $(IMAGE_DIR) (credentials: ~/.docker/config.json, as
# `docker login` or `crane auth login` write it).
image-push: image ## push the image as REGISTRY/cloud-provider-equinix-metal:VERSION
	$(GO) run ./hack/image push --layout $(IMAGE_DIR) --ref $(IMAGE):$(VERSION)

# A load-balancer module as an OCI artifact (config
# application/vnd.wasm.config.v0+json, one application/wasm layer): an OCI
# layout in bin/modules/<name>, pushed when MODULE_REF (registry/repo:tag)
# is given; it prints the wasm+oci://...@sha256: reference for loadbalancer.
WASM ?=
MODULE_REF ?=
module-image: ## WASM=mine.wasm: a load-balancer module as an OCI artifact in bin/modules/<name> (MODULE_REF=... pushes it)
	@test -n "$(WASM)" || { echo "usage: make module-image WASM=path/to/module.wasm [MODULE_REF=registry/repo:tag]"; exit 1; }
	$(GO) run ./hack/image module --wasm $(WASM) --out $(BIN_DIR)/modules/$(basename $(notdir $(WASM))) $(if $(MODULE_REF),--ref $(MODULE_REF))

# deploy/ (kustomize) and deploy/chart with the placeholder version
# v0.0.0-dev and image $(PLACEHOLDER_IMAGE) replaced by this build's.
PLACEHOLDER_IMAGE := ghcr.io/metal-ccm/cloud-provider-equinix-metal
manifests: ## the chart and kustomize manifests stamped with this version, in bin/deploy
	$(GO) run ./hack/image stamp --from deploy --out $(BIN_DIR)/deploy --version $(VERSION) --image $(IMAGE)


# A cloud cluster (test/cluster's Options.Cloud) runs the CCM from its image:
# one platform, this machine's. CLUSTER_CCM_IMAGE is an OCI layout.
CLUSTER_CCM_IMAGE ?= $(BIN_DIR)/cluster-image
GOARCH_NATIVE := $(shell $(GO) env GOARCH)
cluster-image: modules ## the image for this machine's platform only, as the real cluster runs it
	@$(MAKE) --no-print-directory -s image PLATFORMS=linux/$(GOARCH_NATIVE) IMAGE_DIR=$(CLUSTER_CCM_IMAGE) >/dev/null

.PHONY: image image-check image-push module-image manifests cluster-image
