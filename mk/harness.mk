# harness.mk: the test harnesses beyond `go test ./...` (TESTING.md says what
# each shows): the data plane in a private netns (make e2e), the real
# cluster (root: cluster-check, cluster-test, conformance, run-cluster), and
# the long runs (bench-scale, soak, fuzz). The binaries they run come from
# tools.mk, the CCM's image from image.mk.

# The harness tests log hundreds of lines per test, and a log read from its
# tail (CI's) shows the last subtest, often one that passed. with-digest
# follows a go test -v command: its output also goes to
# $(TEST_LOG_DIR)/<name>.log, and when it fails hack/failed-tests.awk
# prints what each failed test logged last, at the end.
TEST_LOG_DIR := $(BIN_DIR)/test-logs
with-digest = 2>&1 | tee $(TEST_LOG_DIR)/$(1).log || { rc=$$?; awk -f hack/failed-tests.awk $(TEST_LOG_DIR)/$(1).log; exit $$rc; }

# Runs once in `make ci`; a plain `go test ./...` skips it (build tag e2e).
# The test re-runs itself in a private user+network namespace, or fails with
# one line saying what the machine must allow.
# The deliberately broken module (wrong peer ASN) shows the router assertion
# can fail.
E2E_WRONG_ASN := $(BIN_DIR)/e2e/wrongasn.wasm
$(E2E_WRONG_ASN): $(MODULE_SRCS) test/e2e/wrongasn/main.go
	@mkdir -p $(@D)
	@GOOS=wasip1 GOARCH=wasm $(GO) build -buildmode=c-shared -trimpath -ldflags='-s -w' -o $@ ./test/e2e/wrongasn

e2e: build k8s-bins e2e-bins e2e-debs $(E2E_WRONG_ASN) ## the data plane: real MetalLB speakers and two GoBGP routers in a private netns (part of make ci)
	@$(GO) build -o $(BIN_DIR)/sandbox ./test/cmd/sandbox && mkdir -p $(TEST_LOG_DIR)
	METAL_CCM_E2E_CCM=$(CURDIR)/$(CCM_BIN) METAL_CCM_E2E_METALLB=$(METALLB_BIN_DIR) METAL_CCM_E2E_GOBGP=$(GOBGP_BIN_DIR) \
	  METAL_CCM_E2E_METALLB_LEGACY=$(METALLB_LEGACY_BIN_DIR) METAL_CCM_E2E_SANDBOX=$(CURDIR)/$(BIN_DIR)/sandbox \
	  METAL_CCM_E2E_FRR=$(FRR_DIR) METAL_CCM_E2E_METALLB_FRR=$(METALLB_FRR_BIN_DIR) \
	  METAL_CCM_E2E_WRONG_ASN_MODULE=$(CURDIR)/$(E2E_WRONG_ASN) $(GO) test -tags e2e -count=1 -v -timeout 10m ./test/e2e/ ./test/dataplane/ \
	  $(call with-digest,e2e)

# The scale bench: the CCM binary against the emulator (50 ms API latency)
# and a real kube-apiserver, 10,000 LoadBalancer Services on 1,000 nodes,
# from empty to every Service with its ingress; then one more Service and
# one node joining. Tens of minutes on 2 cores; not part of `make test`
# (its smoke test, at 20 Services x 4 nodes, is). Change the size with
#   make bench-scale SCALE_ARGS="-services 1000 -nodes 100"
# The report goes to SCALE_REPORT too (the README links it); the search for
# the smallest memory limit runs from the chart's default down:
#   make bench-scale SCALE_ARGS="-search-step 32Mi"
SCALE_ARGS ?=
SCALE_REPORT ?= docs/reference/scale-report.md
bench-scale: build k8s-bins ## the CCM at 10,000 Services x 1,000 nodes (tens of minutes; SCALE_ARGS=..., report in SCALE_REPORT)
	@$(GO) build -o $(BIN_DIR)/scalebench ./test/scalebench
	$(BIN_DIR)/scalebench --ccm $(CCM_BIN) -report $(SCALE_REPORT) $(SCALE_ARGS)

# The long fault-injection run (test/faults): two CCM replicas
# with leader election, the emulator failing a share of Equinix API
# requests (429, 500, 503, resets, answers lost for 35 s), kill -9 of the
# CCM (the leader too) and Service churn; then the faults stop and it checks
# no leaked or duplicate reservation, every Service converged, no stale
# MetalLB object, and prints its figures. Its short run is part of make test.
# For example
#   make soak SOAK_ARGS="-cycles 1000 -fault-rate 0.2 -kills 20"
SOAK_ARGS ?=
soak: build k8s-bins ## 300 Service cycles under 10% Equinix API faults and 7 kill -9 of the CCM (SOAK_ARGS=...; minutes)
	@$(GO) build -o $(BIN_DIR)/soak ./test/faults/soak
	$(BIN_DIR)/soak --ccm $(CCM_BIN) $(SOAK_ARGS)

# Go's native fuzzing of what the CCM parses from users (issue #45):
# annotations, the cloud-config and flag layer, the module wire both ways,
# policy results, module references. go test -fuzz takes one target of one
# package at a time, so each target below runs for FUZZTIME, one after
# another; a target that fails does not stop the others, and the run fails
# at the end naming them. Go writes a failing input under the package's
# testdata/fuzz/<target>/, where plain go test (make test, CI) runs it with
# the seeds from then on: keep it, with the fix. FUZZ_ALL lists every Fuzz
# function of both modules as <package dir>:<name> (checked first);
# FUZZ_TARGETS picks some. For example
#   make fuzz FUZZTIME=5m FUZZ_TARGETS=host/policy:FuzzEngineDecision
FUZZTIME ?= 30s
FUZZ_ALL := host/config:FuzzCloudConfig host/config:FuzzParseLoadBalancer host/config:FuzzLoadLayers \
  host/ocimodule:FuzzModuleReference host/policy:FuzzDecisionValue host/policy:FuzzEngineDecision \
  host/eip:FuzzServiceAddresses host/lbsnapshot:FuzzServiceFromK8s host/instances:FuzzNodeIdentity \
  host/bgp:FuzzNodeAnnotations host/lbmodule:FuzzKubenamesSelector host/lbmodule:FuzzKubenamesNames \
  sdk:FuzzAppendStringMatchesJSON sdk:FuzzDecodeGenerateRequest sdk:FuzzPeerAnnotations \
  sdk/wasmhost:FuzzDecodeResponse sdk/wasmhost:FuzzDecodeWireResponse \
  sdk/wasmhost:FuzzEncodeRequest sdk/wasmhost:FuzzWireResponseMatchesJSON
FUZZ_TARGETS ?= $(FUZZ_ALL)
fuzz: ## each Go fuzz target of both modules for FUZZTIME (default 30s), one after another (FUZZ_TARGETS=pkg:Name ...)
	@missing=""; \
	for f in $$(grep -rl --include='*_test.go' '^func Fuzz' cmd host modules sdk test examples hack); do \
	  for n in $$(sed -n 's/^func \(Fuzz[A-Za-z0-9_]*\)(.*/\1/p' $$f); do \
	    case " $(strip $(FUZZ_ALL)) " in *" $$(dirname $$f):$$n "*) ;; *) missing="$$missing $$(dirname $$f):$$n";; esac; \
	  done; \
	done; \
	if [ -n "$$missing" ]; then echo "fuzz targets missing from FUZZ_ALL in mk/harness.mk:$$missing"; exit 1; fi
	@failed=""; \
	for t in $(FUZZ_TARGETS); do \
	  pkg=$${t%%:*}; name=$${t#*:}; dir=.; \
	  case $$pkg in $(SDK_DIR)|$(SDK_DIR)/*) dir=$(SDK_DIR); pkg=$${pkg#$(SDK_DIR)}; pkg=$${pkg#/};; esac; \
	  echo ">> $$t for $(FUZZTIME)"; \
	  (cd $$dir && $(GO) test -run '^$$' -fuzz "^$$name\$$" -fuzztime $(FUZZTIME) ./$$pkg) || failed="$$failed $$t"; \
	done; \
	if [ -n "$$failed" ]; then echo "fuzz targets that failed:$$failed"; exit 1; fi

# A cloud cluster (Options.Cloud) runs the CCM from its image (image.mk's
# cluster-image), MetalLB from its own manifest (in its module) and
# binaries built here, and agnhost.
# CLUSTER_NATIVE_PREREQS is what the tests of MetalLB's native speaker
# need (make ci runs those first, see CI_CLUSTER_NATIVE).
CLUSTER_NATIVE_PREREQS := cluster-debs e2e-debs cluster-bins $(K8S_BIN_DIR)/kubectl $(AGNHOST) $(METALLB_BIN_DIR)/controller $(METALLB_BIN_DIR)/speaker
CLUSTER_PREREQS := $(CLUSTER_NATIVE_PREREQS) \
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
  METAL_CCM_CLUSTER_FRR_K8S=$(FRR_K8S) \
  METAL_CCM_CLUSTER_DEPLOY=$(abspath $(dir $(CLUSTER_CCM_IMAGE))deploy)
# (METAL_CCM_CLUSTER_DEPLOY: the manifests make image stamped beside that
# image: bin/deploy for make cluster-image's, bin/image-check/1/deploy for
# make ci's. TestCloudTakeOverKubectl applies them as the guide's bin/deploy.)

# Every test/cluster test but TestConformance, make conformance's (root):
# nodes, pods, kube-proxy, and a cloud cluster's traffic through its
# Elastic IPs; METAL_CCM_CLUSTER_FULL=1 adds what cluster-check leaves out
# for CI's time (a node failure with the default BGP timers and after a
# timer upgrade, 5-minute outages).
cluster-test: $(CLUSTER_PREREQS) cluster-image $(E2E_WRONG_ASN) ## every real-cluster test but make conformance's (root): nodes, pods, kube-proxy, every speaker's traffic through its Elastic IPs
	@mkdir -p $(TEST_LOG_DIR)
	$(CLUSTER_ENV) METAL_CCM_CLUSTER_FULL=1 METAL_CCM_CLUSTER_WRONG_MODULE=$(abspath $(E2E_WRONG_ASN)) $(GO) test -tags cluster -count=1 -v -timeout 90m \
	  -skip '^TestConformance$$' ./test/cluster/ $(call with-digest,cluster-test)

# The short real-cluster check of make ci: Services answered through
# their Elastic IPs, a node lost; and the wrong-ASN module making that
# check fail; a dual-stack cluster answering on both families, its
# sessions kept over 20 Service changes; the same short check with each
# other speaker (MetalLB 0.16.1 native and FRR-K8s, MetalLB 0.12.1 with the ConfigMap,
# kube-vip); FRR and kube-vip told no peer is multihop failing behind
# the gateway; and a take-over from upstream's leftovers under traffic. make ci runs it on the image image-check built. To stay
# within CI's time, it leaves out three that make cluster-test runs: MetalLB
# 0.16.1 native (0.15.3's speaker, TestCloudTraffic's, differs from it in
# version only), MetalLB 0.16.1 in FRR mode (TestCloudDualStack runs that
# speaker; the speaker check adds BFD and a node lost) and kube-vip told
# no multihop (FRR's case shows the gateway stops a TTL-1 session). CLUSTER_CHECK_SKIP= runs them too.
# (-skip splits at each /: the second level names the subtests.)
# CLUSTER_CHECK_RUN narrows it to some tests, for example
#   make cluster-check CLUSTER_CHECK_RUN='TestCloudSpeakers/frr-k8s'
# CLUSTER_CHECK_PREREQS and CLUSTER_CHECK_LOG are make ci's, which runs the
# check in two parts (see ci).
CLUSTER_CHECK_SKIP ?= /^(metallb-0.16.1-native|metallb-0.16.1-frr|kube-vip-told-no-multihop)$$
CLUSTER_CHECK_RUN ?= TestCloudTraffic|TestCloudWrongModule|TestCloudDualStack|TestCloudNoMultihop|TestCloudSpeakers|TestCloudTakeOver
CLUSTER_CHECK_PREREQS ?= $(CLUSTER_PREREQS)
CLUSTER_CHECK_LOG ?= cluster-check
cluster-check: $(CLUSTER_CHECK_PREREQS) $(E2E_WRONG_ASN) ## the short real-cluster check (root) of make ci, every speaker (CLUSTER_CCM_IMAGE=an OCI layout)
	@mkdir -p $(TEST_LOG_DIR)
	$(CLUSTER_ENV) METAL_CCM_CLUSTER_WRONG_MODULE=$(abspath $(E2E_WRONG_ASN)) \
	  $(GO) test -tags cluster -count=1 -v -timeout 50m -run '$(CLUSTER_CHECK_RUN)' \
	  -skip '$(CLUSTER_CHECK_SKIP)' ./test/cluster/ $(call with-digest,$(CLUSTER_CHECK_LOG))

# Kubernetes' own LoadBalancer e2e tests against a cloud cluster; the JUnit
# report and e2e.test's log go to $(CONFORMANCE_DIR). Narrow or widen with
#   make conformance CONFORMANCE_FOCUS='LoadBalancers .*should be able to preserve UDP traffic'
# CONFORMANCE_SPEAKER picks the cluster's BGP speaker: native (MetalLB
# 0.15.3, the default), metallb-0.16.1-native, frr (MetalLB 0.16.1 in FRR
# mode, dual-stack), frr-k8s (MetalLB 0.16.1 with FRR-K8s), configmap
# (MetalLB 0.12.1), kube-vip.
# CONFORMANCE_SKIP leaves out, by default, the four session-affinity specs:
# ClientIP affinity is kept by each node's kube-proxy, and the routers, like
# a data-centre switch, spread one client's connections over every node that
# announces the address, so those specs fail in every run here (as they
# would behind such routers); TESTING.md has the runs.
# CONFORMANCE_SKIP= runs them.
# CONFORMANCE_PROCS is how many e2e.test processes Ginkgo's CLI runs the
# specs in (none is [Serial]; CONFORMANCE_PROCS=1 runs them one by one).
CONFORMANCE_DIR ?= $(BIN_DIR)/conformance
CONFORMANCE_FOCUS ?=
CONFORMANCE_SKIP ?= session affinity
CONFORMANCE_SPEAKER ?=
CONFORMANCE_PROCS ?= 3
conformance: $(CLUSTER_PREREQS) cluster-image $(E2E_TEST) $(GINKGO) $(COREDNS) ## Kubernetes' [sig-network] LoadBalancers e2e specs on a real cluster (root; CONFORMANCE_SPEAKER=...)
	@rm -rf $(CONFORMANCE_DIR) && mkdir -p $(TEST_LOG_DIR)
	$(CLUSTER_ENV) METAL_CCM_CLUSTER_COREDNS=$(COREDNS) METAL_CCM_CONFORMANCE_E2E=$(E2E_TEST) METAL_CCM_CONFORMANCE_REPORT=$(abspath $(CONFORMANCE_DIR)) \
	  METAL_CCM_CONFORMANCE_FOCUS='$(CONFORMANCE_FOCUS)' METAL_CCM_CONFORMANCE_SKIP='$(CONFORMANCE_SKIP)' \
	  METAL_CCM_CONFORMANCE_SPEAKER='$(CONFORMANCE_SPEAKER)' \
	  METAL_CCM_CONFORMANCE_GINKGO=$(GINKGO) METAL_CCM_CONFORMANCE_PROCS='$(CONFORMANCE_PROCS)' \
	  $(GO) test -tags cluster -count=1 -v -timeout 150m -run 'TestConformance' ./test/cluster/ $(call with-digest,conformance)

# make run's real-cluster variant: a cloud cluster with a sample Service,
# until Ctrl-C (root).
# RUN_CLUSTER_FLAGS=-dual-stack makes it dual-stack (MetalLB in FRR mode).
RUN_CLUSTER_FLAGS ?=
run-cluster: $(CLUSTER_PREREQS) cluster-image ## make run on a real cluster (root): kubelets, the CCM from its image, MetalLB, BGP routers
	@$(GO) build -o $(BIN_DIR)/cluster ./test/cmd/cluster
	@$(CLUSTER_ENV) PATH="$(K8S_BIN_DIR):$$PATH" $(BIN_DIR)/cluster $(RUN_CLUSTER_FLAGS)

# What a killed cluster run left behind (processes, netns, mounts, cgroups).
cluster-clean: ## remove what a killed cluster run left behind
	sh test/cluster/clean.sh

.PHONY: e2e bench-scale soak fuzz cluster-test cluster-check conformance run-cluster cluster-clean
