# sidecarops — see README.md. Tool binaries are built from their Go modules, pinned by version, into a
# cache outside the checkout so that a fresh clone reuses them.
SHELL := /usr/bin/env bash
.SHELLFLAGS := -eu -o pipefail -c
GO ?= go
# The Go toolchain is go.mod's toolchain line, for every go command of every recipe and script: a
# machine starts on its own Go and ignores that line unless GOTOOLCHAIN names it (docs/development.md).
GOTOOLCHAIN := $(or $(shell sed -n 's/^toolchain //p' go.mod),$(error go.mod has no toolchain line))
export GOTOOLCHAIN

CACHE_DIR ?= $(or $(XDG_CACHE_HOME),$(HOME)/.cache)/sidecarops/bin

# Tool versions are not written here: each is the version its go.mod requires (docs/development.md).
# OPA is the one the Go code links (go.mod); the others are `tool` directives in hack/tools/go.mod.
# Each tool is built into $(CACHE_DIR)/<tool>-<version>/<tool>, so a new version is a new path.
# Every go command here runs go.mod's toolchain (GOTOOLCHAIN, above).
TOOLS_MOD := hack/tools
TOOL_MODULES := sigs.k8s.io/controller-tools github.com/golangci/golangci-lint/v2 golang.org/x/vuln golang.org/x/vulndb
TOOL_VERSIONS := $(shell $(GO) -C $(TOOLS_MOD) list -m -f '{{.Path}}@{{.Version}}' $(TOOL_MODULES))
tool_version = $(or $(patsubst $(1)@%,%,$(filter $(1)@%,$(TOOL_VERSIONS))),$(error cannot read the version of $(1) from $(TOOLS_MOD)/go.mod))
OPA_VERSION := $(or $(shell $(GO) list -m -f '{{.Version}}' github.com/open-policy-agent/opa),$(error cannot read OPA's version from go.mod))
CONTROLLER_GEN_VERSION := $(call tool_version,sigs.k8s.io/controller-tools)
GOLANGCI_LINT_VERSION := $(call tool_version,github.com/golangci/golangci-lint/v2)
GOVULNCHECK_VERSION := $(call tool_version,golang.org/x/vuln)
# golang.org/x/vulndb is both the vulnerability data (data/osv) and the command that indexes it.
VULNDB_VERSION := $(call tool_version,golang.org/x/vulndb)
# Helm has a module of its own (hack/tools/helm): sharing hack/tools' would move the other tools'
# Kubernetes dependencies.
HELM_MOD := hack/tools/helm
HELM_VERSION := $(or $(shell $(GO) -C $(HELM_MOD) list -m -f '{{.Version}}' helm.sh/helm/v4),$(error cannot read Helm's version from $(HELM_MOD)/go.mod))
# Helm 3, which the chart tests run besides Helm 4 (docs/install.md, "Helm versions"), has a module of
# its own too (hack/tools/helm3). Unlike Helm 4, which reads client-go's version from its build
# information, Helm 3 takes its default Kubernetes version (what `helm template` renders for and `helm
# lint` checks against) and its own version from -ldflags, as its Makefile sets them; without them it
# renders for Kubernetes 1.20, which the chart's kubeVersion refuses. client-go v0.N is Kubernetes 1.N.
HELM3_MOD := hack/tools/helm3
HELM3_VERSION := $(or $(shell $(GO) -C $(HELM3_MOD) list -m -f '{{.Version}}' helm.sh/helm/v3),$(error cannot read Helm 3's version from $(HELM3_MOD)/go.mod))
HELM3_K8S_MINOR := $(or $(word 2,$(subst ., ,$(shell $(GO) -C $(HELM3_MOD) list -m -f '{{.Version}}' k8s.io/client-go))),$(error cannot read client-go's version from $(HELM3_MOD)/go.mod))
HELM3_LDFLAGS := -X helm.sh/helm/v3/internal/version.version=$(HELM3_VERSION) $(foreach p,lint/rules chartutil,-X helm.sh/helm/v3/pkg/$(p).k8sVersionMajor=1 -X helm.sh/helm/v3/pkg/$(p).k8sVersionMinor=$(HELM3_K8S_MINOR))
# promtool, which checks and evaluates the alerting rules in tests (test/manifests), has a module of its
# own (hack/tools/promtool): Prometheus' module is large, and its requirements stay out of go.mod and
# out of the other tools'.
PROMTOOL_MOD := hack/tools/promtool
PROMTOOL_VERSION := $(or $(shell $(GO) -C $(PROMTOOL_MOD) list -m -f '{{.Version}}' github.com/prometheus/prometheus),$(error cannot read Prometheus' version from $(PROMTOOL_MOD)/go.mod))

OPA := $(CACHE_DIR)/opa-$(OPA_VERSION)/opa
# Tools that load this module's packages are keyed by the toolchain too: one built with an older Go
# cannot read packages that need a newer one.
CONTROLLER_GEN := $(CACHE_DIR)/controller-gen-$(CONTROLLER_GEN_VERSION)-$(GOTOOLCHAIN)/controller-gen
GOLANGCI_LINT := $(CACHE_DIR)/golangci-lint-$(GOLANGCI_LINT_VERSION)-$(GOTOOLCHAIN)/golangci-lint
GOVULNCHECK := $(CACHE_DIR)/govulncheck-$(GOVULNCHECK_VERSION)-$(GOTOOLCHAIN)/govulncheck
INDEXDB := $(CACHE_DIR)/indexdb-$(VULNDB_VERSION)/indexdb
HELM := $(CACHE_DIR)/helm-$(HELM_VERSION)/helm
HELM3 := $(CACHE_DIR)/helm-$(HELM3_VERSION)/helm
PROMTOOL := $(CACHE_DIR)/promtool-$(PROMTOOL_VERSION)/promtool
# The offline vulnerability database govulncheck reads (-db file://…), indexed from vulndb's OSV files.
VULN_DB := $(CACHE_DIR)/vulndb-$(VULNDB_VERSION)

# Rego test coverage below this fails `make test` (issue: >= 90%).
REGO_COVERAGE_MIN := 90
ADMIN_POLICY_DIRS := examples/policies examples/whitelist-bundle
# The strict policy sidecarctl check embeds: a bundle of its own (root sidecarsets/strict), whose
# data.json is placed for `opa test policies/strict`, so the core bundle's runs leave it out.
STRICT_POLICY_DIR := policies/strict
BENCH ?= .
BENCHTIME ?= 1s

.PHONY: all build demo tools envtest-bins kwok-bin generate verify-generated lint golangci-lint vulncheck test test-go test-rego bench fuzz clean

all: build

# What the binaries say they are (--version, sidecarctl version, sidecarops_build_info): the tag or
# `git describe`, and the commit.
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo devel)
COMMIT ?= $(shell git rev-parse HEAD 2>/dev/null || echo unknown)
LDFLAGS := -X github.com/sidecarops/sidecarops/internal/version.Version=$(VERSION) -X github.com/sidecarops/sidecarops/internal/version.Commit=$(COMMIT)

build:
	$(GO) build -trimpath -ldflags '$(LDFLAGS)' -o bin/sidecarctl ./cmd/sidecarctl
	$(GO) build -trimpath -ldflags '$(LDFLAGS)' -o bin/sidecarops-manager ./cmd/sidecarops-manager
	$(GO) build -trimpath -ldflags '$(LDFLAGS)' -o bin/sidecar-agent ./cmd/sidecar-agent

# OCI images of the manager and of the agent, built by hack/images (a module of its own, which keeps
# go-containerregistry out of go.mod) with no container daemon, registry or base image, so offline:
# dist/images/{manager,agent}/ are OCI layouts (one index, linux/amd64 and linux/arm64),
# dist/images/digests.txt names each by tag and digest. Reproducible: every time in them is
# the commit's ($SOURCE_DATE_EPOCH if set); docs/development.md, "Images".
# The images are $(REGISTRY)/manager and $(REGISTRY)/agent, tagged $(VERSION); REGISTRY is the one part
# of their names to change (docs/install.md, "Images").
REGISTRY ?= ghcr.io/sidecarops
.PHONY: images
images:
	$(GO) -C hack/images run . --go '$(GO)' --version '$(VERSION)' --commit '$(COMMIT)' --registry '$(REGISTRY)' --out $(abspath dist/images)

# Pushes the layouts `make images` wrote to $(REGISTRY), with `docker login`/`podman login`
# credentials, and prints each image by tag and digest. VERSION, when given, must be what they hold.
# PUSH_ARGS=--insecure allows plain HTTP to a test registry.
# With a release directory of VERSION (make release VERSION=…), then its chart, to
# oci://$(REGISTRY)/charts/sidecarops, and each image's SBOM and signatures, which go only where the
# registry serves the image they name (hack/release; docs/install.md, "Verifying images").
PUSH_ARGS ?=
RELEASE_DIR = dist/release/$(VERSION)
.PHONY: push
push:
	$(GO) -C hack/images run . push --registry '$(REGISTRY)' --in $(abspath dist/images) $(if $(filter command line environment,$(origin VERSION)),--version '$(VERSION)') $(PUSH_ARGS)
	@if [ -d '$(RELEASE_DIR)' ]; then \
	  $(GO) -C hack/release run . push --registry '$(REGISTRY)' $(PUSH_ARGS) $(abspath $(wildcard $(RELEASE_DIR)/sidecarops-chart-*.oci.tar $(RELEASE_DIR)/*.cosign.oci.tar)); \
	else echo "push: no $(RELEASE_DIR): the images only (make release VERSION=$(VERSION) makes the chart, SBOMs and signatures)"; fi

# Everything a release publishes, into dist/release/$(VERSION) (hack/release.sh: the CLI for linux and
# darwin, the image archives and digests, the chart, the rendered install YAML, CHANGELOG.md and
# SHA256SUMS); uploads nothing. VERSION must be given: make release VERSION=v0.1.0. COSIGN_KEY names
# the key that signs the images (COSIGN_PASSWORD in the environment for a cosign key); without it the
# release is made and says its images are unsigned.
COSIGN_KEY ?=
.PHONY: release
release: $(HELM)
	VERSION='$(VERSION)' REGISTRY='$(REGISTRY)' GO='$(GO)' HELM='$(HELM)' COSIGN_KEY='$(COSIGN_KEY)' hack/release.sh

# The README's first command: a local control plane, the manager, the examples, injected pods.
# DEMO_ARGS=--once runs through and exits (CI); -v shows the manager's logs.
DEMO_ARGS ?=
demo:
	hack/kwok-bin.sh >/dev/null
	assets=$$(hack/envtest-bins.sh | tail -n 1); \
	KUBEBUILDER_ASSETS=$$assets $(GO) run ./hack/demo $(DEMO_ARGS)

tools: $(OPA) $(CONTROLLER_GEN) $(GOLANGCI_LINT) $(GOVULNCHECK) $(INDEXDB) $(HELM) $(HELM3) $(PROMTOOL)

# A real kube-apiserver and etcd for envtest, built from the Go module proxy into the same cache
# (hack/envtest-bins.sh; 10-20 minutes cold, nothing when cached). Prints the KUBEBUILDER_ASSETS dir.
K8S_VERSION := v1.37.2
ETCD_VERSION := v3.5.21
export K8S_VERSION ETCD_VERSION CACHE_DIR
envtest-bins:
	hack/envtest-bins.sh

# kwok v0.8.0, the kubelet stand-in of the rollout tests (test/kwok), built from its Go module into
# the same cache (about 3 minutes cold).
kwok-bin:
	hack/kwok-bin.sh

# OPA's CLI is the `tool` directive of go.mod: the OPA (and the dependency versions) the Go code links.
$(OPA):
	mkdir -p $(dir $@)
	$(GO) build -o $@.tmp github.com/open-policy-agent/opa
	mv $@.tmp $@

# The other tools: `go build` of the package a `tool` directive of hack/tools/go.mod names, into a
# temporary file first so that an interrupted build leaves no binary to be mistaken for a good one.
define build_tool
	mkdir -p $(dir $@)
	$(GO) -C $(or $(2),$(TOOLS_MOD)) build $(3) -o $(abspath $@).tmp $(1)
	mv $@.tmp $@
endef

$(CONTROLLER_GEN):
	$(call build_tool,sigs.k8s.io/controller-tools/cmd/controller-gen)

$(GOLANGCI_LINT):
	$(call build_tool,github.com/golangci/golangci-lint/v2/cmd/golangci-lint)

$(GOVULNCHECK):
	$(call build_tool,golang.org/x/vuln/cmd/govulncheck)

$(INDEXDB):
	$(call build_tool,golang.org/x/vulndb/cmd/indexdb)

$(HELM):
	$(call build_tool,helm.sh/helm/v4/cmd/helm,$(HELM_MOD))

$(HELM3):
	$(call build_tool,helm.sh/helm/v3/cmd/helm,$(HELM3_MOD),-ldflags '$(HELM3_LDFLAGS)')

# A few minutes cold: promtool links every service discovery Prometheus has.
$(PROMTOOL):
	$(call build_tool,github.com/prometheus/prometheus/cmd/promtool,$(PROMTOOL_MOD))

# The Go vulnerability database, offline: golang.org/x/vulndb's module (from the Go module proxy) holds
# every report as OSV JSON in data/osv; its indexdb command writes the layout govulncheck reads.
$(VULN_DB)/index/db.json: $(INDEXDB)
	$(GO) -C $(TOOLS_MOD) mod download golang.org/x/vulndb
	osv=$$($(GO) -C $(TOOLS_MOD) list -m -f '{{.Dir}}' golang.org/x/vulndb)/data/osv; \
	rm -rf $(VULN_DB).tmp; $(INDEXDB) -vulns "$$osv" -out $(VULN_DB).tmp
	rm -rf $(VULN_DB); mv $(VULN_DB).tmp $(VULN_DB)

# Known vulnerabilities that the code calls (govulncheck's symbol-level findings), in the modules it
# requires and in the standard library, as of the vulndb version pinned in hack/tools/go.mod (update:
# `go -C hack/tools get -tool golang.org/x/vulndb/cmd/indexdb@latest`). One line per vulnerability;
# `$(GOVULNCHECK) -db file://$(VULN_DB) ./...` shows the call traces. A vulnerable module fails: go.mod
# can fix it. The standard library's are the toolchain's, go.mod's toolchain line, which can fix them
# too: they fail as well (VULNCHECK_STDLIB=warn only lists them).
VULNCHECK_STDLIB ?= fail
vulncheck: $(GOVULNCHECK) $(VULN_DB)/index/db.json
	@out=$$(mktemp); trap 'rm -f "$$out"' EXIT; \
	echo "$(GOVULNCHECK) -db file://$(VULN_DB) -format json ./..."; \
	$(GOVULNCHECK) -db file://$(VULN_DB) -format json ./... > "$$out"; \
	found=$$(jq -r 'select(.finding.trace[0].function != null) | .finding | \
	  [.osv, .trace[0].module, .trace[0].version, "fixed in " + (.fixed_version // "no release")] | @tsv' "$$out" | sort -u); \
	modules=$$(awk -F '\t' '$$2 != "stdlib"' <<<"$$found"); \
	stdlib=$$(awk -F '\t' '$$2 == "stdlib"' <<<"$$found"); \
	echo "govulncheck, vulndb $(VULNDB_VERSION): $$(grep -c . <<<"$$modules" || true) vulnerabilities called in required modules," \
	  "$$(grep -c . <<<"$$stdlib" || true) in the standard library of $$($(GO) env GOVERSION)"; \
	if [ -n "$$found" ]; then echo "$$found"; fi; \
	if [ -n "$$modules" ]; then echo "vulnerable modules: upgrade them in go.mod"; exit 1; fi; \
	if [ -n "$$stdlib" ] && [ "$(VULNCHECK_STDLIB)" = fail ]; then echo "VULNCHECK_STDLIB=fail: the Go toolchain needs the fixes"; exit 1; fi

# Deepcopy and the CRD are generated and committed; `make test` checks they are current.
# The chart's CRD is the same file (its template adds the conversion webhook and Helm's labels), and
# so is the sidecar agent's admission policy, and so are the alerting rules and the dashboard.
CHART := charts/sidecarops
generate: $(CONTROLLER_GEN)
	$(CONTROLLER_GEN) object:headerFile=hack/boilerplate.go.txt paths=./api/...
	$(CONTROLLER_GEN) crd paths=./api/... output:crd:artifacts:config=config/crd
	cp config/crd/apps.kruise.io_sidecarsets.yaml $(CHART)/files/
	cp config/agent-policy/admission_policy.yaml $(CHART)/files/agent-own-pod-policy.yaml
	cp config/components/openkruise-fence/admission_policy.yaml $(CHART)/files/openkruise-fence.yaml
	cp config/components/monitoring/prometheus-rules.yaml config/components/monitoring/dashboard.json $(CHART)/files/

verify-generated: $(CONTROLLER_GEN)
	tmp=$$(mktemp -d); trap 'rm -rf "$$tmp"' EXIT; \
	cp -r api config "$$tmp"/; mkdir -p "$$tmp/chart"; cp -r $(CHART)/files "$$tmp/chart/"; \
	$(MAKE) --no-print-directory generate >/dev/null; \
	if ! diff -r "$$tmp/api" api >/dev/null || ! diff -r "$$tmp/config/crd" config/crd >/dev/null || \
	   ! diff -r "$$tmp/chart/files" $(CHART)/files >/dev/null; then \
	  echo "generated files are stale: run 'make generate' and commit"; diff -r "$$tmp/api" api || true; \
	  diff -r "$$tmp/chart/files" $(CHART)/files || true; exit 1; fi

# golangci-lint runs go vet's analyzers (govet) and gofmt/goimports among its linters (.golangci.yml).
lint: $(OPA) golangci-lint
	$(OPA) check --strict policies $(ADMIN_POLICY_DIRS)
	@bad=$$($(OPA) fmt --list policies $(ADMIN_POLICY_DIRS)); if [ -n "$$bad" ]; then echo "opa fmt needed:"; echo "$$bad"; exit 1; fi

# golangci-lint with .golangci.yml: linters and the gofmt/goimports formatters over every package.
# GOLANGCI_LINT_ARGS=--fix applies the fixes it knows.
GOLANGCI_LINT_ARGS ?=
golangci-lint: $(GOLANGCI_LINT)
	$(GOLANGCI_LINT) run $(GOLANGCI_LINT_ARGS) ./...
	for m in $(GO_MODULES); do (cd $$m && $(GOLANGCI_LINT) run $(GOLANGCI_LINT_ARGS) ./...) || exit 1; done

test: tools verify-generated lint vulncheck test-rego test-go

test-rego: $(OPA)
	$(OPA) test -v policies --ignore strict | tail -n 3
	$(OPA) test --coverage --threshold $(REGO_COVERAGE_MIN) policies --ignore strict > .rego-coverage.json || \
	  { echo "Rego coverage below $(REGO_COVERAGE_MIN)%:"; grep -o '"coverage": [0-9.]*' .rego-coverage.json | tail -n 1; exit 1; }
	@echo "policies/ Rego $$(grep -o '"coverage": [0-9.]*' .rego-coverage.json | tail -n 1)"
	$(OPA) test --coverage --threshold 100 $(STRICT_POLICY_DIR) > .rego-coverage.json || \
	  { echo "$(STRICT_POLICY_DIR) Rego coverage below 100%:"; grep -o '"coverage": [0-9.]*' .rego-coverage.json | tail -n 1; exit 1; }
	@echo "$(STRICT_POLICY_DIR) Rego $$(grep -o '"coverage": [0-9.]*' .rego-coverage.json | tail -n 1)"
	@echo "administrators' example bundles with the built-in policies:"; $(OPA) test policies --ignore strict $(ADMIN_POLICY_DIRS) | tail -n 1
	rm -f .rego-coverage.json

# hack/release, hack/images and test/promql are modules of their own (the release tooling's, the image
# builder's and Prometheus' dependencies stay out of go.mod), which ./... does not reach: their tests run
# after the others'. SIDECAROPS_HELM3: the chart tests run with Helm 3 too. SIDECAROPS_PROMTOOL: the
# alerting rules' checks and unit tests.
GO_MODULES := hack/release hack/images test/promql
test-go: $(OPA) $(HELM) $(HELM3) $(PROMTOOL)
	hack/kwok-bin.sh >/dev/null
	assets=$$(hack/envtest-bins.sh | tail -n 1); \
	KUBEBUILDER_ASSETS=$$assets SIDECAROPS_OPA=$(OPA) SIDECAROPS_HELM=$(HELM) SIDECAROPS_HELM3=$(HELM3) SIDECAROPS_PROMTOOL=$(PROMTOOL) $(GO) test -race -count=1 -timeout 30m ./...
	SIDECAROPS_HELM=$(HELM) SIDECAROPS_HELM3=$(HELM3) $(GO) -C hack/release test -count=1 -timeout 20m ./...
	$(GO) -C hack/images test -race -count=1 -timeout 20m ./...
	$(GO) -C test/promql test -race -count=1 ./...

# The suites that drive a real API server (webhooks, conversion, prefilter, rollout, agent policy,
# install, takeover) on the oldest Kubernetes minor the manifests support and on the newest; each
# kube-apiserver is built and cached like envtest-bins (the first run of a new version: 10-20 minutes).
# Not part of `make test`; docs/install.md, "Supported Kubernetes versions", holds the results.
K8S_VERSIONS ?= v1.30.14 $(K8S_VERSION)
K8S_VERSION_SUITES := ./test/e2e/ ./test/rollout/ ./test/agent/ ./test/install/ ./test/migrate/ ./test/governance/
.PHONY: test-k8s-versions
test-k8s-versions: $(HELM)
	hack/kwok-bin.sh >/dev/null
	for v in $(K8S_VERSIONS); do \
	  assets=$$(K8S_VERSION=$$v hack/envtest-bins.sh | tail -n 1); \
	  echo "== Kubernetes $$v"; \
	  KUBEBUILDER_ASSETS=$$assets SIDECAROPS_HELM=$(HELM) $(GO) test -count=1 -timeout 30m $(K8S_VERSION_SUITES) || exit 1; \
	done

# Each fuzz target for FUZZTIME; new interesting inputs land in the package's testdata/fuzz corpus.
FUZZTIME ?= 2m
FUZZ_TARGETS := ./webhook:FuzzAdmissionReview ./mutation:FuzzInject ./bundles:FuzzReadBytes ./internal/manifest:FuzzWhitelist ./sidecarset/history:FuzzRestore ./agent:FuzzParseConfig ./internal/manifest:FuzzDecode ./sidecarset/resourcespolicy:FuzzParse ./sidecarset/validation:FuzzSidecarSet ./sidecarset/defaults:FuzzIdempotent ./agent/plugins/hotupdate:FuzzUpdateRequest
fuzz:
	for t in $(FUZZ_TARGETS); do \
	  pkg=$${t%%:*}; fn=$${t##*:}; \
	  $(GO) test $$pkg -run '^$$' -fuzz "^$$fn\$$" -fuzztime $(FUZZTIME) || exit 1; \
	done

# test/bench's BenchmarkPerPod generates its inputs with test/bench/perfinputs/gen_inputs.py, so it
# needs python3 with PyYAML (Debian: python3-yaml); the 10,000-SidecarSet set is about 12 MB, in a
# temporary directory.
bench:
	$(GO) test -run '^$$' -bench '$(BENCH)' -benchmem -benchtime $(BENCHTIME) ./test/bench/ ./webhook/ ./mutation/ ./sidecarset/resourcespolicy/

clean:
	rm -rf bin
