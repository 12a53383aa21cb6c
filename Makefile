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
GOLANGCI_LINT_VERSION := v2.15.0

CONTROLLER_GEN := go run sigs.k8s.io/controller-tools/cmd/controller-gen@$(CONTROLLER_TOOLS_VERSION)
# kustomize is pinned in hack/tools/kustomize and built once into bin/, with
# render-flavors, which builds the flavors and ClusterClasses with the same
# kustomize.
KUSTOMIZE := $(BIN)/kustomize
RENDER_FLAVORS := $(BIN)/render-flavors
GOLANGCI_LINT := go run github.com/golangci/golangci-lint/v2/cmd/golangci-lint@$(GOLANGCI_LINT_VERSION)

VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -X github.com/capkv/cluster-api-provider-kubevirt/pkg/common/version.Version=$(VERSION)
IMG_REPO ?= ghcr.io/capkv/cluster-api-provider-kubevirt
IMG ?= $(IMG_REPO):$(VERSION)
# make image writes an OCI image layout here, for these platforms.
IMAGE_DIR ?= out/image
IMAGE_PLATFORMS ?= linux/amd64,linux/arm64

# The compiler, the tests' API servers and the controllers in the test
# binaries spent a quarter of their CPU collecting garbage at Go's default
# of 100; these machines have memory to spare (docs/testing.md).
export GOGC ?= 400

TEST_TIMEOUT ?= 60m
# How many test packages run at once once the two long suites have ended
# (hack/test-module.sh); each runs a world of several servers.
TEST_PARALLEL ?= 3
FUZZ_TIME ?= 60s

##@ General

.PHONY: help
help: ## Show the targets.
	@awk 'BEGIN {FS = ":.*##"} /^[a-zA-Z_-]+:.*##/ { printf "  %-20s %s\n", $$1, $$2 } /^##@/ { printf "\n%s\n", substr($$0, 5) }' $(MAKEFILE_LIST)

##@ Build

# The Dockerfile's flags (static, -trimpath), so that the release suite's
# build of the image's binary reuses this build's compiled packages.
.PHONY: build
build: ## Build the manager binary into bin/manager, as the Dockerfile builds it.
	CGO_ENABLED=0 go build -trimpath -ldflags "$(LDFLAGS)" -o $(BIN)/manager .

.PHONY: docker-build
docker-build: ## Build the manager image IMG (ghcr.io/capkv/cluster-api-provider-kubevirt:VERSION) with the Dockerfile.
	docker build --build-arg VERSION=$(VERSION) -t $(IMG) .

WEBHOOK_CERT_DIR ?=

.PHONY: run
run: ## Run the manager against $$KUBECONFIG (webhooks only when WEBHOOK_CERT_DIR holds tls.crt and tls.key).
	go run -ldflags "$(LDFLAGS)" . --insecure-diagnostics \
		$(if $(WEBHOOK_CERT_DIR),--webhook-cert-dir=$(WEBHOOK_CERT_DIR),--enable-webhooks=false) $(RUN_ARGS)

SANDBOX_ARGS ?=

.PHONY: sandbox
sandbox: tools ## Start the sandbox: the test world, this provider and a demo tenant cluster (SANDBOX_ARGS: --exit-after-demo exits when it is ready; --prometheus runs the real Prometheus; --panels DIR writes the dashboard panels as PNG).
	@echo ">> building and starting the sandbox (first build takes a few minutes)"
	cd test && go run ./cmd/sandbox $(SANDBOX_ARGS)

BENCH_ARGS ?=

.PHONY: bench
bench: tools build ## Provision 100 machines in the sandbox's world with zero latency, first with an instant test provider (the floor), and report speed against it and cost (writes out/bench.json).
	cd test && go run ./cmd/bench $(BENCH_ARGS)

##@ Generate

.PHONY: generate
generate: ## Generate deepcopy code, CRDs, RBAC, webhook manifests, test CRDs, the cluster flavors and the ClusterClasses.
	@echo ">> controller-gen $(CONTROLLER_TOOLS_VERSION): deepcopy"
	$(CONTROLLER_GEN) object:headerFile=hack/boilerplate.go.txt paths=./api/...
	$(MAKE) manifests
	$(MAKE) flavors

.PHONY: manifests
manifests: ## Generate CRDs, RBAC and webhook manifests.
	@echo ">> controller-gen $(CONTROLLER_TOOLS_VERSION): CRDs, RBAC, webhooks"
	$(CONTROLLER_GEN) crd paths=./api/... output:crd:artifacts:config=config/crd/bases \
		rbac:roleName=manager-role paths=./controllers/... output:rbac:artifacts:config=config/rbac \
		webhook paths=./pkg/webhooks/... output:webhook:artifacts:config=config/webhook
	cd test && $(CONTROLLER_GEN) crd:maxDescLen=0 paths=./crdsrc/... output:crd:artifacts:config=crds

# Each directory of templates/flavors/ but base is a flavor: a kustomize
# overlay, rendered after the lines of its header.txt into
# templates/cluster-template-NAME.yaml (cluster-template.yaml for default);
# a cluster-template*.yaml without an overlay is removed (docs/flavors.md).
# Each directory of templates/classes/ is a ClusterClass with its templates,
# made from the default flavor's objects, rendered the same way into
# templates/clusterclass-NAME.yaml with clusterctl variables at their
# defaults, so that a change to the base reaches the class too.
# The e2e suite's test flavors, overlays of those, render the same way into
# test/e2e/testdata/templates (docs/testing.md); they are not released.
# render-flavors is kustomize build writing the objects' YAML as built, so
# that the comments of the overlays reach the flavors.
.PHONY: flavors
flavors: ## Render templates/cluster-template*.yaml and templates/clusterclass-*.yaml from their kustomize overlays in templates/flavors/ and templates/classes/.
	@hack/build-tools.sh kustomize
	@echo ">> kustomize: templates/flavors/ into templates/cluster-template*.yaml, templates/classes/ into templates/clusterclass-*.yaml"
	$(RENDER_FLAVORS) templates/flavors templates
	$(RENDER_FLAVORS) -classes templates/classes templates
	$(RENDER_FLAVORS) test/e2e/testdata/flavors test/e2e/testdata/templates

.PHONY: verify-gen
verify-gen: ## Fail when generated files differ from what the generators write.
	@before=$$(mktemp); after=$$(mktemp); \
	find api config test/crds test/e2e/testdata/templates templates -type f | sort | xargs sha256sum > $$before; \
	$(MAKE) --no-print-directory generate >/dev/null; \
	find api config test/crds test/e2e/testdata/templates templates -type f | sort | xargs sha256sum > $$after; \
	if ! diff -u $$before $$after; then \
		echo "generated files were stale; 'make generate' has now rewritten them: review and commit"; rm -f $$before $$after; exit 1; fi; \
	rm -f $$before $$after
	@echo ">> generated files are up to date"

##@ Release

RELEASE_DIR ?= out

# RELEASE_VERSION names the release in the clusterctl repository that
# release-manifests writes: VERSION when it is a release's tag (vX.Y.Z,
# or an -alpha, -beta or -rc of one), else the highest release series of
# metadata.yaml, patch 0: clusterctl reads only semantic versions, and
# git describe's v0.2.0-3-gabcdef of a later commit would sort below v0.2.0.
RELEASE_VERSION ?= $(shell if [[ "$(VERSION)" =~ ^v[0-9]+\.[0-9]+\.[0-9]+(-(alpha|beta|rc)\.?[0-9]+)?$$ ]]; then echo "$(VERSION)"; \
	else awk '/major:/ { a = $$NF } /minor:/ { if (a * 1000 + $$NF >= best) { best = a * 1000 + $$NF; v = "v" a "." $$NF ".0" } } END { print v }' metadata.yaml; fi)

# release-manifests builds config/default through a throwaway overlay in
# out/ (kustomize takes only a relative path to config/default) whose images
# entry turns the placeholder controller:latest into IMG (name:tag,
# name@digest or name), so no tracked file changes. A VERSION vX.Y.Z...
# needs release series X.Y in metadata.yaml, or clusterctl would refuse it.
.PHONY: release-manifests
release-manifests: ## Write RELEASE_DIR (out/): a clusterctl repository (repository/infrastructure-kubevirt/RELEASE_VERSION/) and clusterctl.yaml pointing there; infrastructure-components.yaml with the manager image IMG, metadata.yaml, the cluster templates, the optional instancetypes.yaml and in-place-updates.yaml, tenant-cloud-roles.yaml for external infra clusters, and monitoring.yaml and capkv-dashboard.json for the Prometheus Operator and Grafana.
	@if [[ "$(VERSION)" =~ ^v([0-9]+)\.([0-9]+)\. ]]; then \
		major=$${BASH_REMATCH[1]}; minor=$${BASH_REMATCH[2]}; \
		awk -v major=$$major -v minor=$$minor ' \
			/^- / { if (a == major && b == minor) found = 1; a = b = "" } \
			{ sub(/^- /, "  ") } /^  major:/ { a = $$2 } /^  minor:/ { b = $$2 } \
			END { if (a == major && b == minor) found = 1; exit !found }' metadata.yaml || \
		{ echo "metadata.yaml has no release series $$major.$$minor for VERSION=$(VERSION): add it" >&2; exit 1; }; \
	fi
	@hack/build-tools.sh kustomize
	@mkdir -p $(RELEASE_DIR) out
	@overlay=$$(mktemp -d out/.overlay.XXXXXX); trap 'rm -rf "$$overlay"' EXIT; \
	img='$(IMG)'; name=$$img; tag=; digest=; \
	if [[ "$$img" == *@* ]]; then name=$${img%%@*}; digest=$${img#*@}; fi; \
	if [[ "$${name##*/}" == *:* ]]; then tag=$${name##*:}; name=$${name%:*}; fi; \
	{ echo "apiVersion: kustomize.config.k8s.io/v1beta1"; echo "kind: Kustomization"; \
	  echo "resources:"; echo "- ../../config/default"; \
	  echo "images:"; echo "- name: controller"; echo "  newName: $$name"; \
	  if [[ -n "$$tag" ]]; then echo "  newTag: \"$$tag\""; fi; \
	  if [[ -n "$$digest" ]]; then echo "  digest: $$digest"; fi; } > "$$overlay/kustomization.yaml"; \
	echo ">> kustomize: config/default with image $(IMG)"; \
	$(KUSTOMIZE) build "$$overlay" > "$$overlay/components.yaml"; \
	mv "$$overlay/components.yaml" $(RELEASE_DIR)/infrastructure-components.yaml
	$(KUSTOMIZE) build config/instancetypes > $(RELEASE_DIR)/instancetypes.yaml
	$(KUSTOMIZE) build config/tenantcloud/release > $(RELEASE_DIR)/tenant-cloud-roles.yaml
	$(KUSTOMIZE) build config/prometheus > $(RELEASE_DIR)/monitoring.yaml
	cp config/grafana/capkv-dashboard.json $(RELEASE_DIR)/capkv-dashboard.json
	cp config/inplace/extensionconfig.yaml $(RELEASE_DIR)/in-place-updates.yaml
	cp metadata.yaml $(RELEASE_DIR)/metadata.yaml
	cp templates/clusterclass-*.yaml $(RELEASE_DIR)/
	@# Every flavor ships the CNI's ClusterResourceSet (docs/cni.md), kept once in templates/addons.
	@for f in templates/cluster-template*.yaml; do { cat "$$f"; echo '---'; cat templates/addons/cni-flannel.yaml; } > $(RELEASE_DIR)/$${f#templates/}; done
	@echo ">> wrote $(RELEASE_DIR)/infrastructure-components.yaml (image $(IMG))"
	@# clusterctl's local repository layout, <root>/infrastructure-kubevirt/<version>/, and a
	@# clusterctl.yaml whose provider entry points there (docs/install.md#from-a-local-repository).
	@repo=$(RELEASE_DIR)/repository/infrastructure-kubevirt/$(RELEASE_VERSION); rm -rf "$$repo"; mkdir -p "$$repo"; \
	cp $(RELEASE_DIR)/infrastructure-components.yaml $(RELEASE_DIR)/metadata.yaml \
		$(RELEASE_DIR)/cluster-template*.yaml $(RELEASE_DIR)/clusterclass-*.yaml "$$repo/"; \
	{ echo "# clusterctl init --config $(RELEASE_DIR)/clusterctl.yaml --infrastructure kubevirt:$(RELEASE_VERSION)"; \
	  echo "providers:"; echo "- name: kubevirt"; \
	  echo "  url: file://$$(cd "$$repo" && pwd)/infrastructure-components.yaml"; \
	  echo "  type: InfrastructureProvider"; } > $(RELEASE_DIR)/clusterctl.yaml
	@echo ">> wrote the clusterctl repository $(RELEASE_DIR)/repository (kubevirt $(RELEASE_VERSION)) and $(RELEASE_DIR)/clusterctl.yaml"

.PHONY: image
image: ## Build the manager's image for IMAGE_PLATFORMS with nothing but Go into IMAGE_DIR (an OCI image layout), its provenance in IMAGE_DIR.provenance.json and its reference by digest in IMAGE_DIR.ref (docs/install.md#the-image).
	@mkdir -p $(dir $(IMAGE_DIR))
	cd hack/image && go run . -root $(CURDIR) -out $(abspath $(IMAGE_DIR)) -version $(VERSION) \
		-platforms $(IMAGE_PLATFORMS) -repository $(IMG_REPO) > $(abspath $(IMAGE_DIR)).ref
	@echo ">> wrote $(IMAGE_DIR): $$(cat $(IMAGE_DIR).ref)"

.PHONY: release
release: image ## Write a release into RELEASE_DIR: the image (make image) and the clusterctl artifacts with the image pinned by its digest.
	$(MAKE) --no-print-directory release-manifests IMG=$$(cat $(IMAGE_DIR).ref)

.PHONY: docker-push
docker-push: ## Push the manager image IMG (build it first with docker-build).
	docker push $(IMG)

##@ Verify

.PHONY: verify-boilerplate
verify-boilerplate: ## Fail listing the Go files (every module) that lack the licence header of hack/boilerplate.go.txt.
	@hack/verify-boilerplate.sh

##@ Test

.PHONY: kube-binaries
kube-binaries: ## Build kube-apiserver, kube-scheduler, kube-controller-manager and etcd into bin/ (once per pin).
	@hack/build-tools.sh kube

.PHONY: tools
tools: ## Build every pinned tool into bin/: the kube binaries, clusterctl, cert-manager, kustomize, KubeVirt's virt-api and virt-controller, CDI's controller and API server, the in-cluster IPAM provider, Prometheus (once per pin).
	@hack/build-tools.sh

.PHONY: verify-history
verify-history: ## Fail at once when the git history lacks the earlier release the upgrade suite builds (a shallow clone).
	@commit=$$(sed -n 's/^const previousCommit = "\([0-9a-f]*\)"/\1/p' test/upgrade/upgrade_test.go); \
	if ! git cat-file -e "$$commit^{commit}" 2>/dev/null; then \
		echo "make test needs the git history back to commit $$commit: the upgrade suite builds that release from it with git archive." >&2; \
		echo "This clone lacks it (shallow: $$(git rev-parse --is-shallow-repository 2>/dev/null)); run 'git fetch --unshallow' (or clone without --depth) and try again." >&2; \
		exit 1; \
	fi

.PHONY: test
test: verify-history ## Run every test and print their timings: tools, generation and licence header checks, release manifests, unit tests, then the test module's suites on a real API server (e2e installs the release and its image with clusterctl).
	@TEST_TIMEOUT=$(TEST_TIMEOUT) TEST_PARALLEL=$(TEST_PARALLEL) hack/test.sh

# QUICK_RUN picks the slice of test/integration that test-quick runs.
QUICK_RUN ?= ^(TestCloudConfigOnNoCloud|TestIgnition|TestDeletionRemovesEverything|TestControlPlaneServiceTypes|TestQuotaRefusesLauncherPod|TestStaticAddressesFromPool)$$

.PHONY: test-quick
test-quick: tools ## The inner loop (a few minutes warm): unit tests, controllers, webhooks and a slice of integration (QUICK_RUN); make test stays what CI runs.
	go test -count=1 ./...
	cd test && KUBE_BIN_DIR=$(BIN) go test -count=1 -timeout 10m ./controllers/ ./webhooks/ ./testenv/
	cd test && KUBE_BIN_DIR=$(BIN) go test -count=1 -timeout 10m -run '$(QUICK_RUN)' ./integration/

.PHONY: fuzz
fuzz: ## Fuzz webhook defaulting and validation for FUZZ_TIME (60s) per target.
	cd test && go test ./webhooks -run '^$$' -fuzz '^FuzzKubevirtMachineWebhook$$' -fuzztime $(FUZZ_TIME) -fuzzminimizetime 5s
	cd test && go test ./webhooks -run '^$$' -fuzz '^FuzzKubevirtClusterWebhook$$' -fuzztime $(FUZZ_TIME) -fuzzminimizetime 5s

.PHONY: lint
lint: ## Run golangci-lint.
	$(GOLANGCI_LINT) run ./...
	cd test && $(GOLANGCI_LINT) run --config ../.golangci.yml ./...
	cd hack/image && $(GOLANGCI_LINT) run --config ../../.golangci.yml ./...

.PHONY: clean
clean: ## Remove build output (keeps the kube binaries).
	rm -rf out bin/manager
