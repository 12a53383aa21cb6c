# CAPKV: Cluster API infrastructure provider for KubeVirt.
#
# Every tool is built from the Go module proxy at a pinned version; nothing is
# downloaded from anywhere else.

SHELL := /usr/bin/env bash -o pipefail
.SHELLFLAGS := -ec
.DEFAULT_GOAL := help

ROOT := $(abspath .)
BIN := $(ROOT)/bin
export PATH := $(BIN):$(PATH)

CONTROLLER_TOOLS_VERSION := v0.23.0
KUSTOMIZE_VERSION := v5.8.1
GOLANGCI_LINT_VERSION := v2.15.0

CONTROLLER_GEN := go run sigs.k8s.io/controller-tools/cmd/controller-gen@$(CONTROLLER_TOOLS_VERSION)
KUSTOMIZE := go run sigs.k8s.io/kustomize/kustomize/v5@$(KUSTOMIZE_VERSION)
GOLANGCI_LINT := go run github.com/golangci/golangci-lint/v2/cmd/golangci-lint@$(GOLANGCI_LINT_VERSION)

VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -X github.com/capkv/cluster-api-provider-kubevirt/pkg/version.Version=$(VERSION)
IMG ?= ghcr.io/capkv/cluster-api-provider-kubevirt:$(VERSION)

TEST_TIMEOUT ?= 35m
FUZZ_TIME ?= 60s

##@ General

.PHONY: help
help: ## Show the targets.
	@awk 'BEGIN {FS = ":.*##"} /^[a-zA-Z_-]+:.*##/ { printf "  %-20s %s\n", $$1, $$2 } /^##@/ { printf "\n%s\n", substr($$0, 5) }' $(MAKEFILE_LIST)

##@ Build

.PHONY: build
build: ## Build the manager binary into bin/manager.
	go build -ldflags "$(LDFLAGS)" -o $(BIN)/manager .

WEBHOOK_CERT_DIR ?=

.PHONY: run
run: ## Run the manager against $$KUBECONFIG (webhooks only when WEBHOOK_CERT_DIR holds tls.crt and tls.key).
	go run -ldflags "$(LDFLAGS)" . --insecure-diagnostics \
		$(if $(WEBHOOK_CERT_DIR),--webhook-cert-dir=$(WEBHOOK_CERT_DIR),--enable-webhooks=false) $(RUN_ARGS)

SANDBOX_ARGS ?=

.PHONY: sandbox
sandbox: kube-binaries ## Start the sandbox: the test world, this provider and a demo tenant cluster (SANDBOX_ARGS=--exit-after-demo exits when it is ready).
	@echo ">> building and starting the sandbox (first build takes a few minutes)"
	cd test && go run ./cmd/sandbox $(SANDBOX_ARGS)

BENCH_ARGS ?=

.PHONY: bench
bench: kube-binaries build ## Provision 100 machines in the sandbox's world with zero latency and report speed and cost (writes out/bench.json).
	cd test && go run ./cmd/bench $(BENCH_ARGS)

##@ Generate

.PHONY: generate
generate: ## Generate deepcopy code, CRDs, RBAC, webhook manifests and test CRDs.
	@echo ">> controller-gen $(CONTROLLER_TOOLS_VERSION): deepcopy"
	$(CONTROLLER_GEN) object paths=./api/...
	$(MAKE) manifests

.PHONY: manifests
manifests: ## Generate CRDs, RBAC and webhook manifests.
	@echo ">> controller-gen $(CONTROLLER_TOOLS_VERSION): CRDs, RBAC, webhooks"
	$(CONTROLLER_GEN) crd paths=./api/... output:crd:artifacts:config=config/crd/bases \
		rbac:roleName=manager-role paths=./controllers/... output:rbac:artifacts:config=config/rbac \
		webhook paths=./pkg/webhooks/... output:webhook:artifacts:config=config/webhook
	cd test && $(CONTROLLER_GEN) crd:maxDescLen=0 paths=./crdsrc/... output:crd:artifacts:config=crds

.PHONY: verify-gen
verify-gen: ## Fail when generated files differ from what the generators write.
	@before=$$(mktemp); after=$$(mktemp); \
	find api config test/crds -type f | sort | xargs sha256sum > $$before; \
	$(MAKE) --no-print-directory generate >/dev/null; \
	find api config test/crds -type f | sort | xargs sha256sum > $$after; \
	if ! diff -u $$before $$after; then \
		echo "generated files were stale; 'make generate' has now rewritten them: review and commit"; rm -f $$before $$after; exit 1; fi; \
	rm -f $$before $$after
	@echo ">> generated files are up to date"

##@ Release

.PHONY: release-manifests
release-manifests: ## Write out/infrastructure-components.yaml, out/metadata.yaml and the cluster templates.
	@mkdir -p out
	$(KUSTOMIZE) build config/default > out/infrastructure-components.yaml
	cp metadata.yaml out/metadata.yaml
	cp templates/cluster-template*.yaml out/
	@echo ">> wrote out/infrastructure-components.yaml"

##@ Test

.PHONY: kube-binaries
kube-binaries: ## Build kube-apiserver, kube-scheduler, kube-controller-manager and etcd into bin/ (once per pin).
	@hack/build-kube-binaries.sh

.PHONY: test
test: verify-gen kube-binaries release-manifests ## Run every test: generation check, unit and integration tests on a real API server.
	@echo ">> go vet (product module, then the test module)"
	go vet ./...
	cd test && go vet ./...
	@echo ">> go test: product unit tests, then the test module (integration tests use the binaries in bin/)"
	go test -count=1 ./...
	cd test && KUBE_BIN_DIR=$(BIN) go test -timeout $(TEST_TIMEOUT) -count=1 ./...

.PHONY: fuzz
fuzz: ## Fuzz webhook defaulting and validation for FUZZ_TIME (60s) per target.
	cd test && go test ./webhooks -run '^$$' -fuzz '^FuzzKubevirtMachineWebhook$$' -fuzztime $(FUZZ_TIME) -fuzzminimizetime 5s
	cd test && go test ./webhooks -run '^$$' -fuzz '^FuzzKubevirtClusterWebhook$$' -fuzztime $(FUZZ_TIME) -fuzzminimizetime 5s

.PHONY: lint
lint: ## Run golangci-lint.
	$(GOLANGCI_LINT) run ./...
	cd test && $(GOLANGCI_LINT) run --config ../.golangci.yml ./...

.PHONY: clean
clean: ## Remove build output (keeps the kube binaries).
	rm -rf out bin/manager
