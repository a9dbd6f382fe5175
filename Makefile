# fluxfed: `make help` lists the targets.
SHELL := /usr/bin/env bash
.SHELLFLAGS := -euo pipefail -c
.DEFAULT_GOAL := help

GO ?= go
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo devel)
BIN_DIR ?= bin

# The image. `make image` writes IMAGE_ARCHIVE, tagged IMAGE; deploy/manager uses the same
# reference (deploy/image_test.go checks it). Its tag, and the version stamped into its binary, is
# the release in the file VERSION. `make image-push REGISTRY=localhost:5000` pushes
# localhost:5000/fluxfed:<VERSION>. The creation time of the image and its files is the time of
# the last commit, so the same commit builds to the same bytes.
REGISTRY ?= ghcr.io/fluxfed
IMAGE_VERSION ?= $(shell cat VERSION)
IMAGE ?= $(REGISTRY)/fluxfed:$(IMAGE_VERSION)
IMAGE_ARCHIVE ?= dist/fluxfed-image.tar
IMAGE_ARCH ?= $(shell $(GO) env GOARCH)
REVISION ?= $(shell git rev-parse HEAD 2>/dev/null || echo unknown)
SOURCE_DATE_EPOCH ?= $(shell git log -1 --format=%ct 2>/dev/null || echo 0)
IMAGE_FLAGS = -image $(IMAGE) -version $(IMAGE_VERSION) -revision $(REVISION) -arch $(IMAGE_ARCH) -o $(IMAGE_ARCHIVE)

# Tools are pinned and cached outside the source tree.
TOOLS_DIR ?= $(or $(XDG_CACHE_HOME),$(HOME)/.cache)/fluxfed/tools
CONTROLLER_TOOLS_VERSION ?= v0.21.0
GOLANGCI_LINT_VERSION ?= v2.15.0
CONTROLLER_GEN ?= $(GO) run sigs.k8s.io/controller-tools/cmd/controller-gen@$(CONTROLLER_TOOLS_VERSION)
GOLANGCI_LINT ?= $(TOOLS_DIR)/golangci-lint-$(GOLANGCI_LINT_VERSION)

# Extra flags for `go test`, e.g. `make test TESTFLAGS='-run TestX -v'`.
TESTFLAGS ?=

##@ General

.PHONY: help
help: ## Show this help.
	@awk 'BEGIN {FS = ":.*##"} /^[a-zA-Z0-9_-]+:.*##/ {printf "  \033[36m%-14s\033[0m %s\n", $$1, $$2} /^##@/ {printf "\n%s\n", substr($$0, 5)}' $(MAKEFILE_LIST)

##@ Try it

# FLUX=real runs real Flux brokers behind the broker pods instead of the stand-ins.
FLUX ?=
# PODS=real runs the pods for real: one real node (containerd and a kubelet) per cluster, the
# brokers in the real-pod images (make real-pod-deps real-pod-images, which it runs first).
PODS ?=

# make demo builds bin/fluxfed first: the commands it prints to look at the clusters use it.
.PHONY: demo
demo: build ## Burst one Flux instance over a hub and two member clusters on this machine; KEEP=1 leaves them running (make clusters-down CLUSTERS_DIR=... stops them); FLUX=real runs real Flux brokers (root); PODS=real runs real pods on real nodes (root; not with KEEP=1).
	@FLUX=$(FLUX) KEEP=$(KEEP) PODS=$(PODS) $(GO) run ./e2e/cmd/demo check
	@echo "make demo: building (or finding cached) the Kubernetes binaries; the first run builds them from source and takes several minutes"
	@e2e/k8sbin/build.sh >/dev/null
ifeq ($(PODS),real)
	@echo "make demo: installing (or finding) containerd, runc and the CNI plugins, and building (or finding cached) the real-pod images; the first run builds flux-core for the view and the Debian application image, about 8 minutes"
	@$(MAKE) --no-print-directory real-pod-deps real-pod-images
	@mkdir -p $(TOOLS_DIR) && $(GO) build -o $(TOOLS_DIR)/loopback ./e2e/cmd/loopback
	@PODS=real FLUXFED_BIN=$(BIN_DIR)/fluxfed $(GO) run -exec $(TOOLS_DIR)/loopback ./e2e/cmd/demo
else ifeq ($(FLUX),real)
	@echo "make demo: building (or finding cached) flux-core; the first run builds it from source and takes a few minutes"
	@FLUX_CORE_TARBALL=$(FLUX_CORE_TARBALL) e2e/fluxcore/build.sh >/dev/null
	@mkdir -p $(TOOLS_DIR) && $(GO) build -o $(TOOLS_DIR)/loopback ./e2e/cmd/loopback
	@FLUX=real KEEP=$(KEEP) FLUXFED_BIN=$(BIN_DIR)/fluxfed $(GO) run -exec $(TOOLS_DIR)/loopback ./e2e/cmd/demo
else
	@FLUX=$(FLUX) KEEP=$(KEEP) FLUXFED_BIN=$(BIN_DIR)/fluxfed $(GO) run ./e2e/cmd/demo
endif

##@ Build

.PHONY: build
build: ## Build bin/fluxfed and bin/fluxfed-manager (the MiniCluster operator alone, which deploy/manager runs).
	$(GO) build -trimpath -ldflags "-X main.version=$(VERSION)" -o $(BIN_DIR)/fluxfed ./cmd/fluxfed
	$(GO) build -trimpath -ldflags "-X main.version=$(VERSION)" -o $(BIN_DIR)/fluxfed-manager ./cmd/fluxfed-manager

.PHONY: image
image: ## Build the image without a container engine: dist/fluxfed-image.tar, for docker load -i, kind load image-archive or ctr images import.
	SOURCE_DATE_EPOCH=$(SOURCE_DATE_EPOCH) $(GO) run ./tools/image $(IMAGE_FLAGS)

.PHONY: image-push
image-push: ## Build the image and push it to $REGISTRY/fluxfed:<VERSION>, e.g. make image-push REGISTRY=localhost:5000.
	SOURCE_DATE_EPOCH=$(SOURCE_DATE_EPOCH) $(GO) run ./tools/image $(IMAGE_FLAGS) -push

.PHONY: image-ref
image-ref: ## Print the reference of the image that make image builds and deploy/manager runs.
	@echo $(IMAGE)

.PHONY: k8s-binaries
k8s-binaries: ## Build (or find cached) kube-apiserver, etcd, kube-controller-manager, kube-scheduler, kubectl, kwok, kubelet and CoreDNS.
	@e2e/k8sbin/build.sh >/dev/null

# The source of flux-core, a path or a URL; by default a copy beside this checkout
# (../shared/flux-core/), one cached before, or the release on GitHub (e2e/fluxcore/build.sh).
FLUX_CORE_TARBALL ?=

.PHONY: flux-core
flux-core: ## Build (or find cached) flux-core, the real Flux of the real-Flux tests, installing its Debian build dependencies when root.
	@FLUX_CORE_TARBALL=$(FLUX_CORE_TARBALL) e2e/fluxcore/build.sh >/dev/null

# Real pods (issue 26): containerd, runc and the CNI plugins from Debian, and the images the real
# nodes import (e2e/realpods), built without a container engine and cached in ~/.cache/fluxfed/images.
.PHONY: real-pod-deps
real-pod-deps: ## Install containerd, runc and the CNI plugins that real pods need (Debian packages, with apt-get as root), or name what is missing and how to install it; starts nothing.
	@e2e/realpods/install-deps.sh >/dev/null

.PHONY: real-pod-images
real-pod-images: ## Build (or find cached) the real-pod images without a container engine: pause, the flux view (flux-core for /mnt/flux/view) and the application image (debootstrap of Debian bookworm: as root, about 7 minutes the first time).
	@FLUX_CORE_TARBALL=$(FLUX_CORE_TARBALL) $(GO) run ./e2e/realpods/cmd/realpod-images >/dev/null

.PHONY: real-pod-test
real-pod-test: real-pod-deps real-pod-images ## Import the real-pod images into a containerd of the test's own and run them there (go test -tags realpods ./e2e/realpods), where only loopback exists.
	@mkdir -p $(TOOLS_DIR) && $(GO) build -o $(TOOLS_DIR)/loopback ./e2e/cmd/loopback
	@$(GO) test -exec $(TOOLS_DIR)/loopback -tags realpods ./e2e/realpods -count=1 -timeout 20m $(TESTFLAGS)

##@ Test

# The go test -timeout of each package: three times or more what it took on a busy 2-core machine,
# so that a loaded machine passes and a hung test still ends. Packages not named get TEST_TIMEOUT.
# `make test` prints every package's time at the end; raise a package's entry here if it comes close.
TEST_TIMEOUT ?= 10m
TEST_TIMEOUTS ?= e2e/realflux=40m,e2e/realpodlane=40m,hub=30m,e2e/cmd/demo=20m,e2e=20m,member=20m

# The build tags of make test: realpods adds the real-pod lane (e2e/realpodlane: MiniClusters and
# the federation on real nodes) and the images' own test (e2e/realpods), whose prerequisites
# real-pod-deps and real-pod-images install and build first; realnode the real nodes' own tests
# (e2e/realnode, e2e/clusters: the sandbox, its isolation check, pods, DNS and NodePorts).
TEST_TAGS ?= realpods,realnode

.PHONY: test
test: real-pod-deps real-pod-images ## Run every test (the full lane, what CI runs) against real API servers, local clusters, real Flux and real pods (builds the Kubernetes binaries, flux-core and the real-pod images and installs containerd, runc and the CNI plugins the first time), each test binary where only loopback exists; ends with every package's time.
	@mkdir -p $(TOOLS_DIR) && $(GO) build -o $(TOOLS_DIR)/loopback ./e2e/cmd/loopback && $(GO) build -o $(TOOLS_DIR)/test ./tools/test
	@assets=$$(e2e/k8sbin/build.sh) && flux=$$(FLUX_CORE_TARBALL=$(FLUX_CORE_TARBALL) e2e/fluxcore/build.sh) && \
	KUBEBUILDER_ASSETS=$$assets FLUXFED_FLUX_CORE=$$flux $(TOOLS_DIR)/test -exec $(TOOLS_DIR)/loopback \
		-timeout $(TEST_TIMEOUT) -timeouts '$(TEST_TIMEOUTS)' -- -count=1 -tags '$(TEST_TAGS)' $(TESTFLAGS)

# The fast lane, make test-fast: every package but those whose tests link e2e/clusters or
# e2e/fluxcore (they start local clusters or real Flux; found by what their test binaries link,
# so a package that starts using them leaves the lane by itself) and those named in
# TEST_FAST_SKIP, whose own tests take minutes on a busy 2-core machine (hub runs three API
# servers per test; member, deploy/chart and internal/image follow many objects or build images).
# TEST_FAST_PARALLEL packages are tested at once: twice the CPUs, since most of a package's time
# is spent waiting for the API servers it starts while linking takes the CPU (on this project's
# 2 busy cores, 4 at once took 2m28s where 2 took 5m11s). The test binaries are linked without
# symbol table and DWARF (-s -w), which a failing test does not need (stack traces remain): that
# is a fifth less linking, the lane's largest CPU cost.
TEST_FAST_WITHOUT ?= e2e/clusters,e2e/fluxcore
TEST_FAST_SKIP ?= hub,member,deploy/chart,internal/image
TEST_FAST_PARALLEL ?= $(shell echo $$(( $$(getconf _NPROCESSORS_ONLN 2>/dev/null || echo 1) * 2 )))

.PHONY: test-fast
test-fast: ## Run the unit tests and the API-server tests that take seconds (no local clusters, no real Flux, not hub, member, deploy/chart or internal/image: make test runs them), twice as many packages at once as CPUs; ends with every package's time.
	@mkdir -p $(TOOLS_DIR) && $(GO) build -o $(TOOLS_DIR)/loopback ./e2e/cmd/loopback && $(GO) build -o $(TOOLS_DIR)/test ./tools/test
	@assets=$$(e2e/k8sbin/build.sh) && KUBEBUILDER_ASSETS=$$assets $(TOOLS_DIR)/test -exec $(TOOLS_DIR)/loopback \
		-p $(TEST_FAST_PARALLEL) -timeout $(TEST_TIMEOUT) -timeouts '$(TEST_TIMEOUTS)' -without '$(TEST_FAST_WITHOUT)' -skip '$(TEST_FAST_SKIP)' \
		-- -count=1 '-ldflags=-s -w' $(TESTFLAGS)

# make bench prints the figures docs/performance.md quotes, each from one benchmark against real
# API servers (no timed assertion anywhere): the member operator at 100 and 1000 MiniClusters, its
# memory, the hub at 200 roots and one root at a time, the MiniCluster's CEL admission, and how
# soon the hub sees a waiting job of real Flux (which builds flux-core the first time). The
# header names the machine and its load, which move every figure; BENCHFLAGS adds go test flags.
BENCH_PACKAGES = \
	./member@HundredMiniClusters \
	./tools/bench/managermem@ManagerMemory \
	./hub@BurstToTwoMembers \
	./hub@ManyRoots \
	./tools/bench/managermem@HubMemory \
	./tools/celcost@CELValidation \
	./tools/celcost@MiniClusterAdmission \
	./e2e/realflux@TheHubNoticesAWaitingJob

.PHONY: bench
bench: ## Print the performance figures (requests, times, CPU and memory of the member operator and the hub at scale, CEL admission, the hub's view of real Flux), with the machine and its load in the header; about 20 minutes.
	@mkdir -p $(TOOLS_DIR) && $(GO) build -o $(TOOLS_DIR)/loopback ./e2e/cmd/loopback
	@assets=$$(e2e/k8sbin/build.sh) && flux=$$(FLUX_CORE_TARBALL=$(FLUX_CORE_TARBALL) e2e/fluxcore/build.sh) && \
	echo "# fluxfed $$(git describe --always --dirty 2>/dev/null), $$(date -u +%FT%TZ), $$(nproc) CPUs ($$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')), $$(awk '/MemTotal/ {printf "%.0f GiB", $$2/1048576}' /proc/meminfo), load average $$(cut -d' ' -f1-3 /proc/loadavg)" && \
	for target in $(BENCH_PACKAGES); do \
		pkg=$${target%@*}; bench=$${target#*@}; \
		case $$bench in BurstToTwoMembers) times=20x;; CELValidation) times=3000x;; *) times=1x;; esac; \
		echo "## $$pkg $$bench (load average $$(cut -d' ' -f1-3 /proc/loadavg))"; \
		KUBEBUILDER_ASSETS=$$assets FLUXFED_FLUX_CORE=$$flux $(TOOLS_DIR)/loopback $(GO) test $$pkg -run '^$$' -bench "^Benchmark$$bench\$$" -benchtime $$times \
			-benchmem -timeout 60m $(BENCHFLAGS) 2>&1 | grep -E '^(Benchmark|    [a-z_]+_test.go|ok|FAIL|---)' || exit 1; \
	done

# How many times `make chaos` kills the hub, and the seed of its choices (the moments still
# depend on the machine), e.g. `make chaos KILLS=300 SEED=7`.
KILLS ?= 100
SEED ?= $(shell date +%s)

.PHONY: chaos
chaos: ## Kill the hub (SIGKILL) KILLS times at random while roots change on three local clusters; report leaks, duplicates, false Conflicts and time to consistent.
	@mkdir -p $(TOOLS_DIR) && $(GO) build -o $(TOOLS_DIR)/loopback ./e2e/cmd/loopback
	@e2e/k8sbin/build.sh >/dev/null
	$(GO) run -exec $(TOOLS_DIR)/loopback ./e2e/cmd/chaos -kills $(KILLS) -seed $(SEED)

##@ Local clusters

# Where the local clusters keep kubeconfigs, state and logs, and more flags for `clusters up`,
# e.g. `make clusters-up CLUSTERS_FLAGS='-n 2 -nodes 4'`.
CLUSTERS_DIR ?= $(or $(XDG_CACHE_HOME),$(HOME)/.cache)/fluxfed/clusters
CLUSTERS_FLAGS ?=

.PHONY: clusters-up
clusters-up: k8s-binaries ## Start clusters hub, member-a and member-b as local processes and leave them running.
	$(GO) run ./e2e/clusters/cmd/clusters up -dir $(CLUSTERS_DIR) $(CLUSTERS_FLAGS)

.PHONY: clusters-down
clusters-down: ## Stop the clusters that clusters-up started and remove their files.
	$(GO) run ./e2e/clusters/cmd/clusters down -dir $(CLUSTERS_DIR)

##@ Code generation

.PHONY: generate
generate: ## Generate deepcopy code for the API types.
	$(CONTROLLER_GEN) object paths=./api/...

.PHONY: manifests
manifests: ## Generate the CRDs (MiniCluster under deploy/crd, MemberCluster under deploy/hub) and the ClusterRoles of the manager (deploy/rbac) and the hub (deploy/hub).
	$(CONTROLLER_GEN) crd paths=./api/v1alpha2/... output:crd:dir=deploy/crd
	$(CONTROLLER_GEN) crd paths=./api/fluxfed/... output:crd:dir=deploy/hub
	$(CONTROLLER_GEN) rbac:roleName=fluxfed-manager paths=./member/... output:rbac:dir=deploy/rbac
	$(CONTROLLER_GEN) rbac:roleName=fluxfed-hub paths=./hub/... output:rbac:dir=deploy/hub

##@ Verification

.PHONY: fmt
fmt: ## Format the Go code.
	gofmt -w $$(git ls-files --cached --others --exclude-standard '*.go')

# The build tags of the files that only some lanes build (the real-pod lane, the real nodes'
# tests): vet and lint read them too.
CHECK_TAGS ?= realpods,realnode

.PHONY: vet
vet: ## Run go vet.
	$(GO) vet -tags '$(CHECK_TAGS)' ./...

.PHONY: lint
lint: $(GOLANGCI_LINT) ## Run golangci-lint.
	$(GOLANGCI_LINT) run --build-tags '$(CHECK_TAGS)' ./...

$(GOLANGCI_LINT):
	@mkdir -p $(TOOLS_DIR)
	@echo "Building golangci-lint $(GOLANGCI_LINT_VERSION) (once; cached in $(TOOLS_DIR))"
	GOBIN=$(TOOLS_DIR)/.gobin-$(GOLANGCI_LINT_VERSION) $(GO) install github.com/golangci/golangci-lint/v2/cmd/golangci-lint@$(GOLANGCI_LINT_VERSION)
	mv $(TOOLS_DIR)/.gobin-$(GOLANGCI_LINT_VERSION)/golangci-lint $@
	rmdir $(TOOLS_DIR)/.gobin-$(GOLANGCI_LINT_VERSION)

.PHONY: verify
verify: generate manifests ## Regenerate, then check formatting, vet, lint and that nothing generated changed.
	@unformatted=$$(gofmt -l $$(git ls-files --cached --others --exclude-standard '*.go')); \
	if [[ -n "$$unformatted" ]]; then echo "gofmt would change:"; echo "$$unformatted"; exit 1; fi
	$(GO) mod tidy -diff
	$(MAKE) --no-print-directory vet lint
	@if [[ -n "$$(git status --porcelain -- api deploy)" ]]; then \
		echo "Generated files are out of date; run 'make generate manifests' and commit:"; \
		git status --porcelain -- api deploy; git diff --stat -- api deploy; exit 1; fi
	@echo "verify: ok"

.PHONY: clean
clean: ## Remove build outputs (not the cached tools or Kubernetes binaries).
	rm -rf $(BIN_DIR) dist

##@ Release

DIST_DIR ?= dist

.PHONY: release-manifests
release-manifests: ## Write one manifest per mode from deploy/: $(DIST_DIR)/fluxfed.yaml (single cluster), fluxfed-hub.yaml, fluxfed-member.yaml.
	@assets=$$(e2e/k8sbin/build.sh) && \
	KUBEBUILDER_ASSETS=$$assets $(GO) run ./tools/release manifests -out $(DIST_DIR) -version $(IMAGE_VERSION)

.PHONY: chart
chart: ## Copy the CRDs and the roles' rules from deploy/ into the Helm chart deploy/chart/fluxfed (after make manifests).
	@assets=$$(e2e/k8sbin/build.sh) && \
	KUBEBUILDER_ASSETS=$$assets $(GO) run ./tools/release chart
