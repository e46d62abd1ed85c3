# sidecarops — see README.md. Tool binaries are built from their Go modules, pinned by version, into a
# cache outside the checkout so that a fresh clone reuses them.
SHELL := /usr/bin/env bash
.SHELLFLAGS := -eu -o pipefail -c
GO ?= go

CACHE_DIR ?= $(or $(XDG_CACHE_HOME),$(HOME)/.cache)/sidecarops/bin
OPA_VERSION := v1.22.3
CONTROLLER_GEN_VERSION := v0.23.0
OPA := $(CACHE_DIR)/opa-$(OPA_VERSION)/opa
CONTROLLER_GEN := $(CACHE_DIR)/controller-gen-$(CONTROLLER_GEN_VERSION)/controller-gen

# Rego test coverage below this fails `make test` (issue: >= 90%).
REGO_COVERAGE_MIN := 90
ADMIN_POLICY_DIRS := examples/policies examples/whitelist-bundle
BENCH ?= .
BENCHTIME ?= 1s

.PHONY: all build demo tools envtest-bins kwok-bin generate lint test test-go test-rego bench fuzz clean

all: build

build:
	$(GO) build -o bin/sidecarctl ./cmd/sidecarctl
	$(GO) build -o bin/sidecarops-manager ./cmd/sidecarops-manager

# The README's first command: a local control plane, the manager, the examples, injected pods.
# DEMO_ARGS=--once runs through and exits (CI); -v shows the manager's logs.
DEMO_ARGS ?=
demo:
	hack/kwok-bin.sh >/dev/null
	assets=$$(hack/envtest-bins.sh | tail -n 1); \
	KUBEBUILDER_ASSETS=$$assets $(GO) run ./hack/demo $(DEMO_ARGS)

tools: $(OPA) $(CONTROLLER_GEN)

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

$(OPA):
	mkdir -p $(dir $@)
	GOBIN=$(dir $@) $(GO) install github.com/open-policy-agent/opa@$(OPA_VERSION)

$(CONTROLLER_GEN):
	mkdir -p $(dir $@)
	GOBIN=$(dir $@) $(GO) install sigs.k8s.io/controller-tools/cmd/controller-gen@$(CONTROLLER_GEN_VERSION)

# Deepcopy and the CRD are generated and committed; `make test` checks they are current.
generate: $(CONTROLLER_GEN)
	$(CONTROLLER_GEN) object:headerFile=hack/boilerplate.go.txt paths=./api/...
	$(CONTROLLER_GEN) crd paths=./api/... output:crd:artifacts:config=config/crd

verify-generated: $(CONTROLLER_GEN)
	tmp=$$(mktemp -d); trap 'rm -rf "$$tmp"' EXIT; \
	cp -r api config "$$tmp"/; \
	$(MAKE) --no-print-directory generate >/dev/null; \
	if ! diff -r "$$tmp/api" api >/dev/null || ! diff -r "$$tmp/config/crd" config/crd >/dev/null; then \
	  echo "generated files are stale: run 'make generate' and commit"; diff -r "$$tmp/api" api || true; exit 1; fi

lint: $(OPA)
	$(GO) vet ./...
	@bad=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$bad" ]; then echo "gofmt needed:"; echo "$$bad"; exit 1; fi
	$(OPA) check --strict policies $(ADMIN_POLICY_DIRS)
	@bad=$$($(OPA) fmt --list policies $(ADMIN_POLICY_DIRS)); if [ -n "$$bad" ]; then echo "opa fmt needed:"; echo "$$bad"; exit 1; fi

test: tools verify-generated lint test-rego test-go

test-rego: $(OPA)
	$(OPA) test -v policies | tail -n 3
	$(OPA) test --coverage --threshold $(REGO_COVERAGE_MIN) policies > .rego-coverage.json || \
	  { echo "Rego coverage below $(REGO_COVERAGE_MIN)%:"; grep -o '"coverage": [0-9.]*' .rego-coverage.json | tail -n 1; exit 1; }
	@echo "policies/ Rego $$(grep -o '"coverage": [0-9.]*' .rego-coverage.json | tail -n 1)"
	@echo "administrators' example bundles with the built-in policies:"; $(OPA) test policies $(ADMIN_POLICY_DIRS) | tail -n 1
	rm -f .rego-coverage.json

test-go: $(OPA)
	hack/kwok-bin.sh >/dev/null
	assets=$$(hack/envtest-bins.sh | tail -n 1); \
	KUBEBUILDER_ASSETS=$$assets SIDECAROPS_OPA=$(OPA) $(GO) test -count=1 ./...

# Each fuzz target for FUZZTIME; new interesting inputs land in the package's testdata/fuzz corpus.
FUZZTIME ?= 2m
FUZZ_TARGETS := ./mutation:FuzzInject ./internal/manifest:FuzzDecode ./internal/sidecarset/resourcespolicy:FuzzParse ./internal/sidecarset/validation:FuzzSidecarSet ./internal/sidecarset/defaults:FuzzIdempotent
fuzz:
	for t in $(FUZZ_TARGETS); do \
	  pkg=$${t%%:*}; fn=$${t##*:}; \
	  $(GO) test $$pkg -run '^$$' -fuzz "^$$fn\$$" -fuzztime $(FUZZTIME) || exit 1; \
	done

bench:
	$(GO) test -run '^$$' -bench '$(BENCH)' -benchmem -benchtime $(BENCHTIME) ./test/bench/ ./mutation/ ./internal/sidecarset/resourcespolicy/

clean:
	rm -rf bin
