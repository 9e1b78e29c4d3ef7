# lint.mk: static analysis over the main module and the SDK (its own
# module): make lint (go vet, gofmt, golangci-lint; part of make test) and
# make vulncheck (govulncheck offline; part of make ci).

lint: vet fmt-check golangci ## go vet, gofmt and golangci-lint (built once)

# golangci-lint v2 with the linters and reasons in .golangci.yml, over the
# main module and the SDK (its own module), with the e2e, cluster and system tags.
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
vulncheck: $(GOVULNCHECK) $(VULNDB)/index/db.json ## govulncheck offline over both modules (make ci runs it)
	@$(GO) build -o $(BIN_DIR)/vulncheck ./hack/vulncheck
	$(BIN_DIR)/vulncheck -govulncheck $(GOVULNCHECK) -db $(VULNDB) ./...
	cd $(SDK_DIR) && $(CURDIR)/$(BIN_DIR)/vulncheck -govulncheck $(GOVULNCHECK) -db $(VULNDB) ./...

vet:
	$(GO) vet ./...
	cd $(SDK_DIR) && $(GO) vet ./...

fmt-check:
	@out=$$(gofmt -l $$(git ls-files --cached --others --exclude-standard '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; echo "run: gofmt -w <files>"; exit 1; fi

.PHONY: lint vet fmt-check golangci vulncheck
