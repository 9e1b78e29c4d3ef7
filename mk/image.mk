# image.mk: the CCM's OCI image (hack/image: go-containerregistry, no Docker,
# nothing pulled), the stamped chart and manifests, and a load-balancer
# module as an OCI artifact.

PLATFORMS ?= linux/amd64 linux/arm64
REGISTRY ?= ghcr.io/metal-ccm
IMAGE ?= $(REGISTRY)/cloud-provider-equinix-metal
IMAGE_DIR ?= $(BIN_DIR)/image
SOURCE_URL ?= https://github.com/metal-ccm/cloud-provider-equinix-metal

# One static binary per platform, then one image index from them, and the
# SBOM (CycloneDX, the modules each binary's build information lists) as
# an artifact whose subject is the index. The manifests and chart in
# $(BIN_DIR)/deploy name this image and version.
# The image of this machine's platform also carries the built-in modules
# compiled (wazero compiles for the machine it runs on; another platform's
# image compiles them at its first start).
NATIVE_PLATFORM := $(shell $(GO) env GOOS)/$(shell $(GO) env GOARCH)
MODULE_CACHE_DIR = $(BIN_DIR)/module-cache/$(NATIVE_PLATFORM)
image: modules manifests ## OCI image (linux/amd64, linux/arm64) with its SBOM in bin/image, and the stamped chart and manifests in bin/deploy
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
# `docker login` or `crane auth login` write it): the index as VERSION, the
# SBOM by digest (a referrer of the index), and the signatures if
# image-sign made them.
image-push: image ## push the image as REGISTRY/cloud-provider-equinix-metal:VERSION, with its SBOM and signatures
	$(GO) run ./hack/image push --layout $(IMAGE_DIR) --ref $(IMAGE):$(VERSION)

# Signing (cosign's format, with a key from a file; keyless signing needs
# Fulcio and Rekor, which these tools do not reach): the signature covers
# the image index of $(IMAGE_DIR) (the digest pushed as VERSION) and the
# SBOM artifact beside it, and goes into the layout under cosign's tag
# sha256-<hex>.sig, which image-push pushes too. KEY is a PEM ECDSA P-256
# private key (image-keygen writes one; an encrypted cosign.key wants
# COSIGN_PASSWORD); PUB its public key. image-verify also checks every blob
# of the layout against its digest. Neither rebuilds the image: run make
# image first (a rebuild of the same commit keeps the signature).
KEY ?=
PUB ?=
image-keygen: ## KEY=path/cosign.key: a new ECDSA P-256 key pair for image-sign (the public key beside it, .pub)
	@test -n "$(KEY)" || { echo "usage: make image-keygen KEY=path/to/cosign.key (outside the repository)"; exit 1; }
	$(GO) run ./hack/image keygen --key $(KEY)

image-sign: ## KEY=cosign.key: sign bin/image's index and SBOM (cosign's format, tag sha256-<digest>.sig in the layout)
	@test -n "$(KEY)" || { echo "usage: make image-sign KEY=path/to/cosign.key [REGISTRY=...] (make image-keygen makes one)"; exit 1; }
	$(GO) run ./hack/image sign --layout $(IMAGE_DIR) --key $(KEY) --ref $(IMAGE)

image-verify: ## PUB=cosign.pub: check bin/image's signatures (for REGISTRY) and every blob against its digest
	@test -n "$(PUB)" || { echo "usage: make image-verify PUB=path/to/cosign.pub [REGISTRY=...]"; exit 1; }
	$(GO) run ./hack/image verify --layout $(IMAGE_DIR) --key $(PUB) --ref $(IMAGE)

# A load-balancer module as an OCI artifact (config
# application/vnd.wasm.config.v0+json, one application/wasm layer): an OCI
# layout in bin/modules/<name>, pushed when MODULE_REF (registry/repo:tag)
# is given; it prints the wasm+oci://...@sha256: reference for loadbalancer.
WASM ?=
MODULE_REF ?=
module-image: ## WASM=mine.wasm: a load-balancer module as an OCI artifact in bin/modules/<name> (MODULE_REF=... pushes it, MODULE_NAMESPACE=... goes in the printed URL)
	@test -n "$(WASM)" || { echo "usage: make module-image WASM=path/to/module.wasm [MODULE_REF=registry/repo:tag] [MODULE_NAMESPACE=namespace]"; exit 1; }
	$(GO) run ./hack/image module --wasm $(WASM) --out $(BIN_DIR)/modules/$(basename $(notdir $(WASM))) $(if $(MODULE_REF),--ref $(MODULE_REF)) $(if $(MODULE_NAMESPACE),--namespace $(MODULE_NAMESPACE))

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

.PHONY: image image-check image-push image-keygen image-sign image-verify module-image manifests cluster-image
