# configward Makefile. `make test` is the one command CI runs.
SHELL := /usr/bin/env bash
.SHELLFLAGS := -o errexit -o pipefail -c
.DEFAULT_GOAL := build

GO      ?= go
# One set of build flags for everything make builds: the image's static,
# path-trimmed binaries and the tests then share one build cache, so a cold
# make test compiles configward's dependencies once for linux/amd64 instead
# of twice (the cross-compile used to run while nothing else could use it).
export CGO_ENABLED ?= 0
export GOFLAGS := $(strip $(GOFLAGS) -trimpath)
BIN     := $(CURDIR)/bin
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
COMMIT  ?= $(shell git rev-parse HEAD 2>/dev/null)
LDFLAGS := -s -w -X main.version=$(VERSION) -X main.commit=$(COMMIT)

# Tools are Go modules of their own under test/tools, so the product's go.mod
# never carries k8s.io/kubernetes or helm. Their versions are read from those
# go.mod files: changing a pin there is what triggers a rebuild.
TOOLS        := test/tools
modversion    = $(shell awk '{for(i=1;i<NF;i++) if($$i=="$(2)" && $$(i+1) ~ /^v/) {print $$(i+1); exit}}' $(TOOLS)/$(1)/go.mod)
K8S_VERSION  := $(call modversion,controlplane,k8s.io/kubernetes)
ETCD_VERSION := $(call modversion,controlplane,go.etcd.io/etcd/server/v3)
HELM_VERSION := $(call modversion,helm,helm.sh/helm/v3)
KWOK_VERSION := $(call modversion,kwok,sigs.k8s.io/kwok)
CODEGEN_VERSION := $(call modversion,codegen,sigs.k8s.io/controller-tools)

# Binaries are cached under bin/ (git-ignored) in folders named after the
# pinned versions. Unstamped, kube-apiserver reports v0.0.0-master, which
# breaks clients that check the server version (helm's kubeVersion).
K8S_MINOR    := $(word 2,$(subst ., ,$(K8S_VERSION)))
K8S_LDFLAGS  := -s -w -X k8s.io/component-base/version.gitVersion=$(K8S_VERSION) \
                -X k8s.io/component-base/version.gitMajor=1 \
                -X k8s.io/component-base/version.gitMinor=$(K8S_MINOR) \
                -X k8s.io/component-base/version.gitTreeState=clean
# The folder name also carries a hash of the tools module, so adding a tool
# or changing any pin there rebuilds (mostly from Go's build cache).
TOOLS_SUM    = $(shell cat $(TOOLS)/$(1)/go.mod $(TOOLS)/$(1)/go.sum | sha256sum | cut -c1-8)
ASSETS       := $(BIN)/k8s/$(K8S_VERSION)-etcd-$(ETCD_VERSION)-kwok-$(KWOK_VERSION)-$(call TOOLS_SUM,controlplane)$(call TOOLS_SUM,kwok)
# helm's releases stamp the Kubernetes version it assumes when no cluster is
# asked (`helm template`) from their client-go: 1.(minor of v0.MINOR.x).
# Unstamped, helm assumes v1.20.0, and the chart's kubeVersion refuses it.
HELM_KUBE_MINOR := $(word 2,$(subst ., ,$(call modversion,helm,k8s.io/client-go)))
HELM_LDFLAGS := -s -w -X helm.sh/helm/v3/internal/version.version=$(HELM_VERSION) \
                $(foreach p,pkg/chartutil pkg/lint/rules,-X helm.sh/helm/v3/$(p).k8sVersionMajor=1 -X helm.sh/helm/v3/$(p).k8sVersionMinor=$(HELM_KUBE_MINOR))
HELM         := $(BIN)/helm-$(HELM_VERSION)-kube1.$(HELM_KUBE_MINOR)-$(call TOOLS_SUM,helm)/helm
CODEGEN_DIR  := $(BIN)/codegen-$(CODEGEN_VERSION)-$(call TOOLS_SUM,codegen)
CONTROLLER_GEN := $(CODEGEN_DIR)/controller-gen
STATICCHECK  := $(CODEGEN_DIR)/staticcheck

export KUBEBUILDER_ASSETS ?= $(ASSETS)

# The container image, built without a Docker engine: configward is
# cross-compiled for each platform and test/tools/image assembles the image
# from scratch, as an OCI image layout (IMAGE_LAYOUT, which `crane push` takes)
# and the same layout as one tarball (IMAGE_TAR, which `docker load`,
# `kind load image-archive` and `skopeo copy oci-archive:` take). The tag
# defaults to the chart's appVersion, so the chart's default image is what
# `make image` builds. Timestamps are the commit's: rebuilding a commit gives
# the same digests.
IMAGE_REPO      ?= ghcr.io/configward/configward
IMAGE_TAG       ?= $(shell awk '$$1 == "appVersion:" {gsub(/["\047]/, "", $$2); print $$2}' charts/configward/Chart.yaml)
IMAGE           := $(IMAGE_REPO):$(IMAGE_TAG)
IMAGE_TAR       ?= $(BIN)/configward-image.tar
IMAGE_LAYOUT    ?= $(BIN)/configward-image
IMAGE_PLATFORMS := linux/amd64 linux/arm64
IMAGE_BINARIES  := $(BIN)/image
SOURCE_DATE_EPOCH ?= $(shell git log -1 --format=%ct 2>/dev/null || echo 0)
# VERSION and COMMIT are read once, when make starts, so that the binaries,
# the image's labels and the test agree even when HEAD moves or the tree
# turns dirty during the build. Otherwise the same flags as LDFLAGS.
IMAGE_VERSION   := $(VERSION)
IMAGE_COMMIT    := $(COMMIT)
IMAGE_LDFLAGS   := -s -w -X main.version=$(IMAGE_VERSION) -X main.commit=$(IMAGE_COMMIT)

.PHONY: build
build: ## Build bin/configward, and bin/kubectl-configward, the same binary as a kubectl plugin.
	$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN)/configward ./cmd/configward
	ln -f $(BIN)/configward $(BIN)/kubectl-configward

# go test starts its packages' runs in the order they are named, TEST_P at
# a time: named first, the longest suites start first and the short ones
# fill in beside them, instead of the alphabet starting the real node's
# suite (about 12 minutes) last, alone for its last six.
LONGEST_SUITES := ./test/e2e ./test/faults ./test/node ./test/controllers ./test/demo
# One suite more than cores: a whole-cluster suite spends much of its time
# waiting on its control plane (timeouts, watches, kwok's pods), and two
# side by side left 2 cores half idle (vmstat, 10 s samples while e2e and
# faults ran together). go test's default is one per core.
TEST_P ?= $(shell echo $$(( $$(nproc) + 1 )))

.PHONY: test
test: controlplane node helm argo-crds csi-crds eso prometheus generate manifests test-image image ## Run every test: unit, Rego, the envtest suites, the Helm chart (also installed with its pods on the real node, from the image), the container image and every fuzz target's seeds and kept crashers.
	# The shell runs with errexit (.SHELLFLAGS): every command that may
	# fail is followed by ||, or the digest below would never print.
	rm -rf $(BIN)/failures; status=0; \
	CONFIGWARD_REQUIRE_CLUSTER=1 CONFIGWARD_HELM=$(HELM) CONFIGWARD_ARGO_CRDS=$(ARGO_CRDS) CONFIGWARD_CSI_CRDS=$(CSI_CRDS) CONFIGWARD_ESO=$(ESO) CONFIGWARD_ESO_CRDS=$(ESO_CRDS) CONFIGWARD_PROMETHEUS=$(PROMETHEUS) CONFIGWARD_IMAGE_TAR=$(abspath $(IMAGE_TAR)) \
		CONFIGWARD_FAILURE_DIGEST=$(abspath $(BIN)/failures) $(GO) test -p $(TEST_P) $(LONGEST_SUITES) ./... -count=1 -timeout 30m || status=$$?; \
		$(GO) run ./test/orphans || status=1; \
		if [ -d $(BIN)/failures ]; then echo; echo "=== The suites' failures again, in full (each suite printed them with its output above):"; cat $(BIN)/failures/*.txt || true; \
		elif [ $$status -ne 0 ]; then echo; echo "=== No suite wrote a failure digest into $(BIN)/failures: a package without one failed, or a suite was killed before its report (see above)"; fi; \
		exit $$status

# The fast loops. Packages whose tests need no cluster: every one but the
# suites under test/ that start a control plane. A controller package's own
# suite against kube-apiserver (internal/controller/*, TestAgainstAPIServer)
# sits beside its pure tests, so unit skips it by name.
CLUSTER_SUITES := e2e faults security chart demo controllers soak bench bench/peers node
UNIT_PKGS       = $(shell $(GO) list ./... | grep -vE '/test/($(subst $(space),|,$(CLUSTER_SUITES)))$$')
space          := $(subst ,, )

.PHONY: unit
unit: ## Run every test that needs no cluster: handlers, rules, Rego, parsers, the CLI, the docs (warm: well under a minute).
	$(GO) test -skip TestAgainstAPIServer $(UNIT_PKGS)

.PHONY: controllers
controllers: controlplane eso prometheus ## Run each reconciler against kube-apiserver and etcd alone (no kube-controller-manager, no kwok; ESO's controller and a Prometheus where a spec needs them): the delivery, hot-config and analysis specs, and each controller package's own suite.
	CONFIGWARD_REQUIRE_CLUSTER=1 CONFIGWARD_ESO=$(ESO) CONFIGWARD_ESO_CRDS=$(ESO_CRDS) CONFIGWARD_PROMETHEUS=$(PROMETHEUS) \
		$(GO) test ./test/controllers/ ./internal/controller/... -count=1 -timeout 20m

# make e2e runs one whole-cluster suite (SUITE: e2e, faults, security,
# chart, controllers), or the specs of it whose text FOCUS matches (a Ginkgo
# regular expression): make e2e FOCUS='config revisions'.
SUITE ?= e2e
FOCUS ?=
.PHONY: e2e
e2e: controlplane helm argo-crds csi-crds eso prometheus ## Run one suite against a whole cluster (SUITE=e2e by default), or only the specs FOCUS matches.
	CONFIGWARD_REQUIRE_CLUSTER=1 CONFIGWARD_HELM=$(HELM) CONFIGWARD_ARGO_CRDS=$(ARGO_CRDS) CONFIGWARD_CSI_CRDS=$(CSI_CRDS) \
		CONFIGWARD_ESO=$(ESO) CONFIGWARD_ESO_CRDS=$(ESO_CRDS) CONFIGWARD_PROMETHEUS=$(PROMETHEUS) \
		$(GO) test ./test/$(SUITE)/ -count=1 -timeout 30m $(if $(FOCUS),-ginkgo.focus='$(FOCUS)' -ginkgo.v)

# Argo Rollouts' Rollout CRD, so the custom-workload-kind e2e specs run
# against the real schema. It is copied out of the module, fetched through
# the Go module proxy outside any go.mod (a temporary directory), so the
# product never depends on argo-rollouts. v1.10.1: later releases declare a
# newer Go than the one pinned for this project.
ARGO_VERSION := v1.10.1
ARGO_CRDS    := $(BIN)/crds/argo-rollouts-$(ARGO_VERSION)

.PHONY: argo-crds
argo-crds: $(ARGO_CRDS)/rollout-crd.yaml ## Fetch Argo Rollouts' Rollout CRD for the e2e specs (cached).
$(ARGO_CRDS)/rollout-crd.yaml:
	mkdir -p $(ARGO_CRDS)
	tmp=$$(mktemp -d) && dir=$$(cd $$tmp && GOFLAGS=-mod=mod $(GO) mod download -json github.com/argoproj/argo-rollouts@$(ARGO_VERSION) \
		| grep '"Dir":' | cut -d'"' -f4) && rmdir $$tmp && test -n "$$dir" && \
		install -m 0644 "$$dir/manifests/crds/rollout-crd.yaml" $@.tmp && mv $@.tmp $@

# The Secrets Store CSI driver's CRDs (SecretProviderClass and the per-pod
# SecretProviderClassPodStatus the driver writes), copied out of its module
# the same way, for the specs of CSI-mounted secrets. The module proxy
# serves v1.5.4 by exact version; its checksum is not in the checksum
# database, so only this download skips it.
CSI_VERSION := v1.5.4
CSI_CRDS    := $(BIN)/crds/secrets-store-csi-driver-$(CSI_VERSION)
CSI_CRD_FILES := secretproviderclasses secretproviderclasspodstatuses

.PHONY: csi-crds
csi-crds: $(CSI_CRDS)/.complete ## Fetch the Secrets Store CSI driver's CRDs for the CSI specs (cached).
$(CSI_CRDS)/.complete:
	mkdir -p $(CSI_CRDS)
	tmp=$$(mktemp -d) && dir=$$(cd $$tmp && GONOSUMDB=sigs.k8s.io/secrets-store-csi-driver GOFLAGS=-mod=mod $(GO) mod download -json sigs.k8s.io/secrets-store-csi-driver@$(CSI_VERSION) \
		| grep '"Dir":' | cut -d'"' -f4) && rmdir $$tmp && \
		test -n "$$dir" && for c in $(CSI_CRD_FILES); do install -m 0644 "$$dir/config/crd/bases/secrets-store.csi.x-k8s.io_$$c.yaml" $(CSI_CRDS)/; done
	touch $@

# External Secrets Operator's own reconcilers (ExternalSecret, SecretStore,
# ClusterSecretStore) from its pinned module, in a small main of
# test/tools/eso, with the CRDs they serve copied out of the same module.
# ESO's reconciler packages import pkg/provider/register and
# pkg/generator/register, which import every provider and with them every
# cloud SDK (about 2,000 packages). The build replaces those two files with
# test/tools/eso/_overlay (the fake provider; the fake, password and uuid
# generators): a copy of the module with them replaced stands in for it
# through a go.work beside the binary (go build -overlay refuses files in
# the module cache). The binary is rebuilt when main.go, the overlay or the
# pins change. GOFLAGS' -trimpath keeps the copy's folder, which differs from clone
# to clone, out of the build cache's keys: a fresh clone rebuilds nothing.
ESO_VERSION := $(call modversion,eso,github.com/external-secrets/external-secrets)
ESO_DIR     := $(BIN)/eso-$(ESO_VERSION)
ESO         := $(ESO_DIR)/external-secrets
ESO_CRDS    := $(BIN)/crds/external-secrets-$(ESO_VERSION)
ESO_CRD_FILES := externalsecrets secretstores clustersecretstores

.PHONY: eso
eso: $(ESO) $(ESO_CRDS)/.complete ## Build External Secrets Operator's controller (fake provider only) and copy its CRDs (cached).
$(ESO): $(TOOLS)/eso/main.go $(wildcard $(TOOLS)/eso/_overlay/*.go) $(TOOLS)/eso/go.mod $(TOOLS)/eso/go.sum
	rm -rf $(ESO_DIR)/src && mkdir -p $(ESO_DIR)
	dir=$$(cd $(TOOLS)/eso && $(GO) mod download -json github.com/external-secrets/external-secrets | grep '"Dir":' | cut -d'"' -f4) && \
		test -n "$$dir" && cp -R "$$dir" $(ESO_DIR)/src && chmod -R u+w $(ESO_DIR)/src
	install -m 0644 $(TOOLS)/eso/_overlay/providers.go $(ESO_DIR)/src/pkg/provider/register/register.go
	install -m 0644 $(TOOLS)/eso/_overlay/generators.go $(ESO_DIR)/src/pkg/generator/register/register.go
	printf 'go 1.26.0\n\nuse %s\n\nreplace github.com/external-secrets/external-secrets %s => ./src\n' \
		$(abspath $(TOOLS)/eso) $(ESO_VERSION) > $(ESO_DIR)/go.work
	cd $(TOOLS)/eso && GOWORK=$(ESO_DIR)/go.work $(GO) build -ldflags "-s -w" -o $@.tmp .
	mv $@.tmp $@
$(ESO_CRDS)/.complete:
	mkdir -p $(ESO_CRDS)
	dir=$$(cd $(TOOLS)/eso && $(GO) mod download -json github.com/external-secrets/external-secrets | grep '"Dir":' | cut -d'"' -f4) && \
		test -n "$$dir" && for c in $(ESO_CRD_FILES); do install -m 0644 "$$dir/config/crds/bases/external-secrets.io_$$c.yaml" $(ESO_CRDS)/; done
	touch $@

# The Prometheus server, for the specs that gate on what it scrapes
# (test/framework/prometheus.go runs it), from the pinned module
# test/tools/prometheus. -tags remove_all_sd leaves out every service
# discovery but the static, file and http ones, and with them most cloud
# SDKs (Azure's and AWS's stay, for remote write): about 1,050 packages
# instead of 1,500. Cached by the pins: the folder carries the version and
# a hash of the tools module.
PROMETHEUS_VERSION := $(call modversion,prometheus,github.com/prometheus/prometheus)
PROMETHEUS_DIR     := $(BIN)/prometheus-$(PROMETHEUS_VERSION)-$(call TOOLS_SUM,prometheus)
PROMETHEUS         := $(PROMETHEUS_DIR)/prometheus

.PHONY: prometheus
prometheus: $(PROMETHEUS) ## Build the Prometheus server from its pinned module, without service discoveries (cached).
$(PROMETHEUS):
	@echo "Building Prometheus $(PROMETHEUS_VERSION) into $(PROMETHEUS_DIR) (about 8 minutes cold on 2 cores, a few seconds from a warm Go build cache)"
	mkdir -p $(PROMETHEUS_DIR)
	cd $(TOOLS)/prometheus && $(GO) build -tags remove_all_sd -ldflags "-s -w" -o $@.tmp github.com/prometheus/prometheus/cmd/prometheus
	mv $@.tmp $@

# Alertmanager and Caddy, unmodified, from the pinned modules
# test/tools/alertmanager and test/tools/caddy (Caddy with its standard
# modules), for the real node's specs of third-party programs that reload
# their config in place: `make node` packs each as an image. Cached like
# Prometheus, by the version and a hash of the tools module.
ALERTMANAGER_VERSION := $(call modversion,alertmanager,github.com/prometheus/alertmanager)
ALERTMANAGER_DIR     := $(BIN)/alertmanager-$(ALERTMANAGER_VERSION)-$(call TOOLS_SUM,alertmanager)
ALERTMANAGER         := $(ALERTMANAGER_DIR)/alertmanager
CADDY_VERSION        := $(call modversion,caddy,github.com/caddyserver/caddy/v2)
CADDY_DIR            := $(BIN)/caddy-$(CADDY_VERSION)-$(call TOOLS_SUM,caddy)
CADDY                := $(CADDY_DIR)/caddy
# Built from a module of their own, neither knows its version unstamped
# (`caddy version` says "unknown"): each is stamped the way its releases are.
ALERTMANAGER_LDFLAGS := -s -w -X github.com/prometheus/common/version.Version=$(ALERTMANAGER_VERSION:v%=%)
CADDY_LDFLAGS        := -s -w -X github.com/caddyserver/caddy/v2.CustomVersion=$(CADDY_VERSION)

# Alertmanager's package ui embeds its web UI's bundle (ui/app/dist), which
# its release process builds with npm and Elm and which its module does not
# carry: built from the module as it is, the binary does not compile. Its Go
# code is used unchanged; a copy of the module with a one-page stand-in for
# the bundle (at / and /ui/) replaces it through a copy of the tools
# module's go.mod beside the binary (-modfile; a go.work, as for ESO, would
# select other versions of Alertmanager's dependencies than its tidy go.mod:
# the build fails on an ambiguous import), and is removed once the binary is
# built. The replacement is named relative to the tools module, so that the
# binary records no clone's folder.
ALERTMANAGER_UI_PAGE := <!doctype html><title>Alertmanager</title><p>The web UI is not built into this test binary; the API is at api/v2/.

.PHONY: alertmanager
alertmanager: $(ALERTMANAGER) ## Build Alertmanager from its pinned module, with a stand-in for its web UI's bundle (cached).
$(ALERTMANAGER):
	@echo "Building Alertmanager $(ALERTMANAGER_VERSION) into $(ALERTMANAGER_DIR) (about 1 minute cold on 2 cores, 1.5 beside other work; a few seconds from a warm Go build cache)"
	rm -rf $(ALERTMANAGER_DIR)/src && mkdir -p $(ALERTMANAGER_DIR)
	dir=$$(cd $(TOOLS)/alertmanager && $(GO) mod download -json github.com/prometheus/alertmanager | grep '"Dir":' | cut -d'"' -f4) && \
		test -n "$$dir" && cp -R "$$dir" $(ALERTMANAGER_DIR)/src && chmod -R u+w $(ALERTMANAGER_DIR)/src
	for ui in elm mantine; do mkdir -p $(ALERTMANAGER_DIR)/src/ui/app/dist/$$ui && \
		printf '%s\n' '$(ALERTMANAGER_UI_PAGE)' | gzip -9n > $(ALERTMANAGER_DIR)/src/ui/app/dist/$$ui/index.html.gz; done
	cp $(TOOLS)/alertmanager/go.sum $(ALERTMANAGER_DIR)/go.sum
	{ cat $(TOOLS)/alertmanager/go.mod; printf '\nreplace github.com/prometheus/alertmanager %s => ../../../%s/src\n' \
		$(ALERTMANAGER_VERSION) $(patsubst $(CURDIR)/%,%,$(ALERTMANAGER_DIR)); } > $(ALERTMANAGER_DIR)/go.mod
	cd $(TOOLS)/alertmanager && $(GO) build -modfile=$(ALERTMANAGER_DIR)/go.mod -ldflags "$(ALERTMANAGER_LDFLAGS)" -o $@.tmp github.com/prometheus/alertmanager/cmd/alertmanager
	rm -rf $(ALERTMANAGER_DIR)/src $(ALERTMANAGER_DIR)/go.mod $(ALERTMANAGER_DIR)/go.sum
	mv $@.tmp $@

.PHONY: caddy
caddy: $(CADDY) ## Build Caddy with its standard modules from its pinned module (cached).
$(CADDY):
	@echo "Building Caddy $(CADDY_VERSION) into $(CADDY_DIR) (about 1.5 minutes cold on 2 cores, 2.5 beside other work; a few seconds from a warm Go build cache)"
	mkdir -p $(CADDY_DIR)
	cd $(TOOLS)/caddy && $(GO) build -ldflags "$(CADDY_LDFLAGS)" -o $@.tmp github.com/caddyserver/caddy/v2/cmd/caddy
	mv $@.tmp $@

# Fuzz targets, as package:target. `go test ./...` runs each one's seed
# corpus (f.Add seeds and testdata/fuzz, where every crasher found is kept);
# fuzz-smoke mutates beyond them for a fixed number of executions, fuzz for
# FUZZTIME each. Minimizing each new interesting input is capped
# (FUZZMINIMIZE): the webhook target runs a few hundred inputs a second, and
# Go's default minute per input left it minimizing, not fuzzing.
FUZZ_TARGETS := internal/admission:FuzzWebhookBodies internal/valueschema:FuzzSchemaFormats \
                internal/refs:FuzzPodSpecReferences internal/check:FuzzLoadManifests \
                internal/inventory:FuzzPackedDigests internal/changecontrol:FuzzChanges \
                internal/webhookscope:FuzzReferenceParity internal/builtinrules:FuzzParity \
                internal/slimobject:FuzzSlimDecoding internal/admission:FuzzSlimAnswers \
                internal/analysis:FuzzQueryCost
FUZZTIME     ?= 10m
FUZZMINIMIZE ?= 2s
FUZZ_REPORT  ?= $(BIN)/fuzz-report.txt
# Workers per target: Go's default is one per core.
FUZZPARALLEL ?= $(shell nproc)
# fuzz-long's budget per target, and where the corpus it grows is kept.
FUZZLONG     ?= 1h
FUZZ_CORPUS  := $(BIN)/fuzz-corpus

.PHONY: fuzz-smoke
fuzz-smoke: ## Fuzz every target for 500 executions beyond its seeds (not part of make test: its instrumented builds cost five minutes cold).
	mkdir -p $(BIN) && for t in $(FUZZ_TARGETS); do \
		$(GO) test ./$${t%%:*} -run '^$$' -fuzz "^$${t#*:}\$$" -fuzztime 500x -fuzzminimizetime 10x > $(BIN)/fuzz-smoke.log 2>&1 \
			|| { cat $(BIN)/fuzz-smoke.log; exit 1; }; \
	done

.PHONY: fuzz
fuzz: ## Fuzz every target for FUZZTIME (default 10m) each; executions per target go to bin/fuzz-report.txt, crashers to the package's testdata/fuzz.
	mkdir -p $(BIN) && : > $(FUZZ_REPORT)
	failed=0; for t in $(FUZZ_TARGETS); do \
		result=ok; $(GO) test ./$${t%%:*} -run '^$$' -fuzz "^$${t#*:}\$$" -fuzztime $(FUZZTIME) -fuzzminimizetime $(FUZZMINIMIZE) -parallel $(FUZZPARALLEL) > $(BIN)/fuzz.log 2>&1 \
			|| { result=CRASHER; failed=1; grep -v '^fuzz: elapsed' $(BIN)/fuzz.log; }; \
		echo "$$t $$result $$(grep '^fuzz: elapsed' $(BIN)/fuzz.log | tail -1)" >> $(FUZZ_REPORT); \
	done; cat $(FUZZ_REPORT); exit $$failed

# Go keeps the inputs that widened coverage in its cache ($$GOCACHE/fuzz),
# where the next run starts from them; fuzz-long also copies them to
# $(FUZZ_CORPUS) after the run and back before it, so a cleaned cache
# (go clean -fuzzcache) or a new machine with bin/ carried over starts
# where the last run stopped. Crashers go to testdata/fuzz, as with fuzz.
.PHONY: fuzz-long
fuzz-long: ## Fuzz every target for FUZZLONG (default 1h) each on a kept corpus (bin/fuzz-corpus); executions per target go to bin/fuzz-long-report.txt.
	cache=$$($(GO) env GOCACHE)/fuzz && mkdir -p $(FUZZ_CORPUS) $$cache && cp -a $(FUZZ_CORPUS)/. $$cache/ && \
	$(MAKE) --no-print-directory fuzz FUZZTIME=$(FUZZLONG) FUZZ_REPORT=$(BIN)/fuzz-long-report.txt; rc=$$?; \
	cp -a $$cache/. $(FUZZ_CORPUS)/ && echo "corpus kept in $(FUZZ_CORPUS): $$(find $(FUZZ_CORPUS) -type f | wc -l) inputs"; exit $$rc

.PHONY: image-binaries
image-binaries: ## Cross-compile static configward binaries for IMAGE_PLATFORMS into bin/image/OS/ARCH/.
	for p in $(IMAGE_PLATFORMS); do \
		CGO_ENABLED=0 GOOS=$${p%%/*} GOARCH=$${p#*/} $(GO) build -trimpath -ldflags "$(IMAGE_LDFLAGS)" \
			-o $(IMAGE_BINARIES)/$$p/configward ./cmd/configward; \
	done

.PHONY: image
image: image-binaries ## Build the linux/amd64+arm64 image ghcr.io/configward/configward:<chart appVersion> without Docker: bin/configward-image.tar (an OCI layout tarball) and bin/configward-image/ (the layout).
	cd $(TOOLS)/image && $(GO) run . -image $(IMAGE) -version $(IMAGE_VERSION) -revision "$(IMAGE_COMMIT)" \
		-created $(SOURCE_DATE_EPOCH) -out $(abspath $(IMAGE_TAR)) -layout $(abspath $(IMAGE_LAYOUT)) \
		$(foreach p,$(IMAGE_PLATFORMS),-bin $(p)=$(IMAGE_BINARIES)/$(p)/configward)

.PHONY: test-image
test-image: image-binaries ## Assemble the image from the cross-compiled binaries and check it: platforms, user, entrypoint, labels, /configward executable and running.
	cd $(TOOLS)/image && CONFIGWARD_IMAGE_BINARIES=$(IMAGE_BINARIES) CONFIGWARD_IMAGE_VERSION=$(IMAGE_VERSION) \
		CONFIGWARD_IMAGE_REVISION=$(IMAGE_COMMIT) $(GO) test ./... -count=1

.PHONY: controlplane
controlplane: $(KUBEBUILDER_ASSETS)/.complete $(KUBEBUILDER_ASSETS)/kwok ## Build kube-apiserver, kube-controller-manager, kube-scheduler, etcd, kubectl and kwok (cached).

$(ASSETS)/.complete:
	@echo "Building kube-apiserver, kube-controller-manager, kube-scheduler and kubectl $(K8S_VERSION) and etcd $(ETCD_VERSION) into $(ASSETS)"
	@echo "(cold: about 5½ minutes on an idle 2-core machine, module downloads included, more beside other work; cached until the pins change)"
	mkdir -p $(ASSETS)
	cd $(TOOLS)/controlplane && $(GO) build -ldflags "$(K8S_LDFLAGS)" -o $(ASSETS)/ \
		k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager \
		k8s.io/kubernetes/cmd/kube-scheduler k8s.io/kubernetes/cmd/kubectl
	cd $(TOOLS)/controlplane && $(GO) build -ldflags "-s -w" -o $(ASSETS)/etcd go.etcd.io/etcd/server/v3
	$(ASSETS)/kube-apiserver --version | grep -q "$(K8S_VERSION)"
	touch $@

# kwok plays the kubelet of fake nodes. It has a tools module of its own
# because its k8s.io versions differ from kube-apiserver's. Its stages (how a
# fake node and pod move through their lifecycle) ship in the module; they
# are copied next to the binary, where test/framework reads them.
KWOK_STAGES := node/fast/node-initialize.yaml node/heartbeat-with-lease/node-heartbeat-with-lease.yaml \
               pod/fast/pod-ready.yaml pod/fast/pod-complete.yaml pod/fast/pod-delete.yaml
$(ASSETS)/kwok:
	@echo "Building kwok $(KWOK_VERSION) into $(ASSETS) (about 2 minutes cold)"
	mkdir -p $(ASSETS)
	cd $(TOOLS)/kwok && $(GO) build -ldflags "-s -w" -o $(ASSETS)/kwok.tmp sigs.k8s.io/kwok/cmd/kwok
	dir=$$(cd $(TOOLS)/kwok && $(GO) list -m -f '{{.Dir}}' sigs.k8s.io/kwok) && \
		for f in $(KWOK_STAGES); do cat "$$dir/kustomize/stage/$$f"; echo "---"; done > $(ASSETS)/kwok-stages.yaml
	mv $(ASSETS)/kwok.tmp $@

# A real node for test/node: the kubelet of the control plane's Kubernetes
# version, containerd, runc and the CNI plugins (Debian's containerd is 1.6,
# which lacks CRI calls the 1.37 kubelet makes). The kubelet is a tool of
# test/tools/controlplane, beside kube-apiserver: one module for everything
# built from k8s.io/kubernetes, so the packages they share (client-go,
# apiserver, component-base, ...) compile once, at one set of versions. The
# rest comes from the pinned module test/tools/node. Cached by both modules'
# pins: cold, about 1½ minutes once the control plane is built (the kubelet
# alone 20 s).
NODE_DIR := $(BIN)/node-$(K8S_VERSION)-containerd-$(call modversion,node,github.com/containerd/containerd/v2)-$(call TOOLS_SUM,node)$(call TOOLS_SUM,controlplane)
export CONFIGWARD_NODE_DIR ?= $(NODE_DIR)

# The images the node's pods run, assembled by the image tool: no registry,
# no download. Each is a program of test/tools/node (a pause image; an
# application that prints the files and env it sees; reloadapp, a program
# that reloads its config in place). They have a folder of their own, keyed
# by their sources, so that changing or adding one rebuilds the images (in
# seconds) and never the kubelet and containerd.
NODE_IMAGE_PROGRAMS := pause app reloadapp tlsonce
NODE_IMAGE_SOURCES   = $(sort $(foreach p,$(NODE_IMAGE_PROGRAMS),$(wildcard $(TOOLS)/node/$(p)/*.go)) \
                       $(filter-out %_test.go,$(wildcard $(TOOLS)/image/*.go)))
NODE_IMAGES := $(BIN)/node-images-$(shell cat $(NODE_IMAGE_SOURCES) $(TOOLS)/node/go.mod $(TOOLS)/node/go.sum $(TOOLS)/image/go.mod $(TOOLS)/image/go.sum | sha256sum | cut -c1-8)
export CONFIGWARD_NODE_IMAGES ?= $(NODE_IMAGES)

# Prometheus as a node image (unmodified, from the binary `make prometheus`
# builds), for the specs that run it on the real node: keyed by its pins.
NODE_PROMETHEUS_IMAGE := $(PROMETHEUS_DIR)/prometheus-image.tar
export CONFIGWARD_NODE_PROMETHEUS_IMAGE ?= $(NODE_PROMETHEUS_IMAGE)

# Alertmanager and Caddy as node images, the same way (unmodified, from the
# binaries `make alertmanager` and `make caddy` build, keyed by their pins).
NODE_ALERTMANAGER_IMAGE := $(ALERTMANAGER_DIR)/alertmanager-image.tar
export CONFIGWARD_NODE_ALERTMANAGER_IMAGE ?= $(NODE_ALERTMANAGER_IMAGE)
NODE_CADDY_IMAGE := $(CADDY_DIR)/caddy-image.tar
export CONFIGWARD_NODE_CADDY_IMAGE ?= $(NODE_CADDY_IMAGE)

.PHONY: node
node: $(NODE_DIR)/.complete $(NODE_IMAGES)/.complete $(NODE_PROMETHEUS_IMAGE) $(NODE_ALERTMANAGER_IMAGE) $(NODE_CADDY_IMAGE) ## Build the real node's kubelet, containerd, runc, CNI plugins (cached; cold about 1½ minutes after the control plane), its test images (cached by their sources) and the Prometheus, Alertmanager and Caddy images (cached by their pins).

$(NODE_DIR)/.complete:
	@echo "Building the kubelet $(K8S_VERSION), containerd, runc and the CNI plugins into $(NODE_DIR)"
	mkdir -p $(NODE_DIR)/cni
	cd $(TOOLS)/controlplane && $(GO) build -ldflags "$(K8S_LDFLAGS)" -o $(NODE_DIR)/ k8s.io/kubernetes/cmd/kubelet
	cd $(TOOLS)/node && $(GO) build -ldflags "-s -w" -o $(NODE_DIR)/ github.com/containerd/containerd/v2/cmd/containerd \
		github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2 github.com/containerd/containerd/v2/cmd/ctr
	# runc's nsenter is C: it is the one binary built with cgo, with
	# seccomp (containerd confines every pod sandbox with the runtime
	# default profile), which needs Debian's libseccomp-dev.
	dpkg -s libseccomp-dev >/dev/null 2>&1 || apt-get install -y libseccomp-dev || (apt-get update && apt-get install -y libseccomp-dev)
	cd $(TOOLS)/node && CGO_ENABLED=1 $(GO) build -tags seccomp -ldflags "-s -w" -o $(NODE_DIR)/runc github.com/opencontainers/runc
	cd $(TOOLS)/node && $(GO) build -ldflags "-s -w" -o $(NODE_DIR)/cni/ github.com/containernetworking/plugins/plugins/main/bridge \
		github.com/containernetworking/plugins/plugins/main/loopback github.com/containernetworking/plugins/plugins/ipam/host-local
	touch $@

$(NODE_IMAGES)/.complete:
	@echo "Building the node's test images ($(NODE_IMAGE_PROGRAMS)) into $(NODE_IMAGES)"
	mkdir -p $(NODE_IMAGES)
	cd $(TOOLS)/node && $(GO) build -ldflags "-s -w" -o $(NODE_IMAGES)/ $(addprefix ./,$(NODE_IMAGE_PROGRAMS))
	for i in $(NODE_IMAGE_PROGRAMS); do (cd $(TOOLS)/image && $(GO) run . -image localhost/configward-test/$$i:test -title $$i -path /$$i \
		-created 0 -bin linux/$$($(GO) env GOARCH)=$(NODE_IMAGES)/$$i -out $(NODE_IMAGES)/$$i.tar); done
	touch $@

$(NODE_PROMETHEUS_IMAGE): $(PROMETHEUS)
	cd $(TOOLS)/image && $(GO) run . -image localhost/configward-test/prometheus:test -title prometheus -path /prometheus \
		-created 0 -bin linux/$$($(GO) env GOARCH)=$(PROMETHEUS) -out $@.tmp
	mv $@.tmp $@

$(NODE_ALERTMANAGER_IMAGE): $(ALERTMANAGER)
	cd $(TOOLS)/image && $(GO) run . -image localhost/configward-test/alertmanager:test -title alertmanager -path /alertmanager \
		-created 0 -bin linux/$$($(GO) env GOARCH)=$(ALERTMANAGER) -out $@.tmp
	mv $@.tmp $@

$(NODE_CADDY_IMAGE): $(CADDY)
	cd $(TOOLS)/image && $(GO) run . -image localhost/configward-test/caddy:test -title caddy -path /caddy \
		-created 0 -bin linux/$$($(GO) env GOARCH)=$(CADDY) -out $@.tmp
	mv $@.tmp $@

.PHONY: helm
helm: $(HELM) ## Build helm (cached).
$(HELM):
	mkdir -p $(dir $@)
	cd $(TOOLS)/helm && $(GO) build -ldflags "$(HELM_LDFLAGS)" -o $@ helm.sh/helm/v3/cmd/helm

.PHONY: codegen
codegen: $(CONTROLLER_GEN) ## Build controller-gen and staticcheck (cached).
$(CONTROLLER_GEN) $(STATICCHECK) &:
	mkdir -p $(CODEGEN_DIR)
	cd $(TOOLS)/codegen && $(GO) build -o $(CODEGEN_DIR)/ sigs.k8s.io/controller-tools/cmd/controller-gen honnef.co/go/tools/cmd/staticcheck

.PHONY: generate
generate: $(CONTROLLER_GEN) ## Generate deepcopy code for the API types.
	$(CONTROLLER_GEN) object paths=./internal/...

.PHONY: manifests
# The chart renders its CRDs from files/crds (templates/crds.yaml), not from
# crds/, so that `helm upgrade` updates them.
manifests: $(CONTROLLER_GEN) ## Generate CRDs, RBAC and webhook manifests into config/, and copy the CRDs (and OpenReports' Report CRD) into the chart.
	$(CONTROLLER_GEN) crd:allowDangerousTypes=true rbac:roleName=configward webhook paths=./internal/... \
		output:crd:artifacts:config=config/crd/bases output:rbac:artifacts:config=config/rbac \
		output:webhook:artifacts:config=config/webhook
	mkdir -p charts/configward/files/crds
	rm -f charts/configward/files/crds/*.yaml
	cp config/crd/bases/*.yaml charts/configward/files/crds/
	mkdir -p charts/configward/files/openreports
	install -m 0644 "$$($(GO) list -m -f '{{.Dir}}' github.com/openreports/reports-api)/config/crd/openreports.io_reports.yaml" \
		charts/configward/files/openreports/

.PHONY: verify-generated
verify-generated: generate manifests ## Fail when committed generated code or manifests are stale.
	@if [ -n "$$(git status --porcelain -- config internal/api charts)" ]; then \
		git status --porcelain -- config internal/api charts; \
		echo "generated files are out of date: run 'make generate manifests' and commit the result"; exit 1; fi

.PHONY: fmt
fmt: ## Format the Go code.
	gofmt -s -w $$(git ls-files '*.go')

.PHONY: vet
vet: ## Run go vet.
	$(GO) vet ./...

.PHONY: lint
lint: vet $(STATICCHECK) ## gofmt check, import groups (standard library, other modules, configward), go vet and staticcheck.
	@out=$$(gofmt -s -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "not gofmt'ed:"; echo "$$out"; exit 1; fi
	git ls-files '*.go' | sed 's|^|$(CURDIR)/|' | (cd $(TOOLS)/importgroups && $(GO) run . -module github.com/configward/configward)
	$(STATICCHECK) ./...

.PHONY: clean
clean: ## Remove built binaries (keeps the cached control plane).
	rm -f $(BIN)/configward $(BIN)/configward-demo $(IMAGE_TAR)
	rm -rf $(IMAGE_LAYOUT) $(IMAGE_BINARIES)

.PHONY: help
help:
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "%-16s %s\n", $$1, $$2}'

.PHONY: bench
bench: controlplane ## Run the benchmarks (admission latency, rule evaluation, inventory and Pod cache heap, the 1,000-Deployment rollout storm) against envtest and a whole cluster.
	$(GO) test ./test/bench/ ./internal/... -count=1 -run '^$$' -bench . -skip 'BenchmarkInventoryHeap|BenchmarkWebhookPodCache|BenchmarkRolloutStorm|BenchmarkDeliveryAnalysis|BenchmarkFleetChange' -benchmem
	$(GO) test ./test/bench/ -count=1 -run '^$$' -bench 'BenchmarkInventoryHeap|BenchmarkWebhookPodCache|BenchmarkRolloutStorm' -benchtime=1x -benchmem -timeout 60m

# The peers of the performance comparison (make bench-peers), each built
# from its Go module in a tools module of its own under test/tools, cached
# under bin/ like the control plane, never part of `make test` (heavy builds:
# Kyverno's binary is 190 MB). Each folder holds the binary and the CRDs
# copied from its module (what the peer's Helm chart installs).
GATEKEEPER_VERSION := $(call modversion,gatekeeper,github.com/open-policy-agent/gatekeeper/v3)
KYVERNO_VERSION    := $(call modversion,kyverno,github.com/kyverno/kyverno)
PEERS              := $(BIN)/peers-gatekeeper-$(GATEKEEPER_VERSION)-kyverno-$(KYVERNO_VERSION)-$(call TOOLS_SUM,gatekeeper)$(call TOOLS_SUM,kyverno)
BENCH_OUT          ?= $(BIN)/bench-peers

.PHONY: peers
peers: $(PEERS)/gatekeeper $(PEERS)/kyverno ## Build Gatekeeper and Kyverno from their Go modules, with their CRDs (cached; not part of make test).

$(PEERS)/gatekeeper:
	@echo "Building Gatekeeper $(GATEKEEPER_VERSION) into $(PEERS) (about 5 minutes cold)"
	mkdir -p $(PEERS)/gatekeeper-crds
	cd $(TOOLS)/gatekeeper && $(GO) build -ldflags "-s -w" -o $@.tmp github.com/open-policy-agent/gatekeeper/v3
	dir=$$(cd $(TOOLS)/gatekeeper && $(GO) list -m -f '{{.Dir}}' github.com/open-policy-agent/gatekeeper/v3) && \
		install -m 0644 "$$dir"/charts/gatekeeper/crds/*.yaml $(PEERS)/gatekeeper-crds/
	mv $@.tmp $@

$(PEERS)/kyverno:
	@echo "Building Kyverno $(KYVERNO_VERSION) into $(PEERS) (about 6 minutes cold, 2.4 GB of memory)"
	mkdir -p $(PEERS)/kyverno-crds
	cd $(TOOLS)/kyverno && $(GO) build -ldflags "-s -w" -o $@.tmp github.com/kyverno/kyverno/cmd/kyverno
	dir=$$(cd $(TOOLS)/kyverno && $(GO) list -m -f '{{.Dir}}' github.com/kyverno/kyverno) && \
		install -m 0644 "$$dir"/config/crds/kyverno/*.yaml "$$dir"/config/crds/policies.kyverno.io/*.yaml \
		"$$dir"/config/crds/reports/*.yaml "$$dir"/config/crds/policyreport/*.yaml $(PEERS)/kyverno-crds/
	mv $@.tmp $@

.PHONY: test-peers
test-peers: controlplane peers ## Check that each peer stack installs, enforces the benchmark's policy and uninstalls cleanly (the try tests make test skips).
	CONFIGWARD_PEERS_DIR=$(PEERS) $(GO) test ./test/bench/peers/ -count=1 -run 'TestGatekeeperStack|TestKyvernoStack' -timeout 30m

.PHONY: bench-peers
bench-peers: controlplane peers ## Measure configward side by side with Gatekeeper, Kyverno, ValidatingAdmissionPolicy, the floor (a webhook that answers at once) and no policy on one control plane (about 25 minutes); tables in $(BENCH_OUT)/results.md, plots in docs/bench.
	CONFIGWARD_PEERS_DIR=$(PEERS) CONFIGWARD_BENCH_OUT=$(BENCH_OUT) CONFIGWARD_K8S_VERSION=$(K8S_VERSION) \
		CONFIGWARD_GATEKEEPER_VERSION=$(GATEKEEPER_VERSION) CONFIGWARD_KYVERNO_VERSION=$(KYVERNO_VERSION) \
		$(GO) test ./test/bench/peers/ -count=1 -run '^$$' -bench BenchmarkPeers -benchtime=1x -timeout 90m
	cd $(TOOLS)/benchplot && $(GO) run . -in $(BENCH_OUT)/results.json -out $(CURDIR)/docs/bench

# How long a delivery's waves take with analysis checks, and how many
# queries they send: BenchmarkDeliveryAnalysis on a whole cluster with a real
# Prometheus (about 7 minutes on 2 cores), never part of `make test` or
# `make bench`. Tables in $(ANALYSIS_OUT)/results.md, plots in docs/bench,
# which docs/evaluate/analysis.md shows.
ANALYSIS_OUT ?= $(BIN)/bench-analysis

.PHONY: bench-analysis
bench-analysis: controlplane prometheus ## Measure wave times and queries per wave of delivery checks against a real Prometheus (about 7 minutes); table in $(ANALYSIS_OUT)/results.md, plots in docs/bench.
	CONFIGWARD_REQUIRE_CLUSTER=1 CONFIGWARD_PROMETHEUS=$(PROMETHEUS) CONFIGWARD_BENCH_OUT=$(ANALYSIS_OUT) \
		$(GO) test ./test/bench/ -count=1 -run '^$$' -bench '^BenchmarkDeliveryAnalysis$$' -benchtime=1x -timeout 20m
	cd $(TOOLS)/benchplot && $(GO) run . -analysis $(ANALYSIS_OUT)/results.json -out $(CURDIR)/docs/bench

# How configward's memory and start-up grow with the cluster: the webhook and
# the controller, each started fresh on an empty cluster and at 1×, 2× and 4×
# of 10,000 Pods (bound to kwok nodes) and as many ConfigMaps and Secrets
# (about 20 minutes on 2 cores, most of it creating the objects); never part
# of `make test`. Table in $(SCALE_OUT)/results.md, plot in docs/bench.
SCALE_OUT ?= $(BIN)/bench-scale

.PHONY: bench-scale
bench-scale: controlplane ## Measure the webhook's and the controller's memory and time to ready on an empty cluster and at 10,000, 20,000 and 40,000 Pods, ConfigMaps and Secrets (about 20 minutes); table in $(SCALE_OUT)/results.md, plot in docs/bench.
	CONFIGWARD_SCALE_OUT=$(SCALE_OUT) $(GO) test ./test/scale/ -count=1 -run '^TestScale$$' -v -timeout 120m
	cd $(TOOLS)/benchplot && $(GO) run . -scale $(SCALE_OUT)/results.json -out $(CURDIR)/docs/bench

# One content change consumed by 5,000 workloads, without delivery and in
# three waves, on a whole cluster (about 25 minutes on 2 cores, most of it
# the 2 × 500 s the default --rollout-rate takes); never part of `make test`
# or `make bench`. Times and the API server's write counts in its log.
.PHONY: bench-fleet
bench-fleet: controlplane ## Time one change consumed by 5,000 workloads, without delivery and in three waves, with the API server's write count (about 25 minutes).
	$(GO) test ./test/bench/ -count=1 -run '^$$' -bench '^BenchmarkFleetChange$$' -benchtime=1x -timeout 60m -v

# The soak is a run of its own, never part of `make test`. Its -timeout is
# SOAK_DURATION plus 15 minutes for the cluster's start and the checks after
# the traffic: Go reads a duration as the sum of its parts, so 30m15m is 45m.
SOAK_DURATION ?= 30m

.PHONY: soak
soak: controlplane ## Run configward for SOAK_DURATION (default 30m) under 100 mixed requests/s on a whole cluster: no failed request, no panic, and heap, goroutines and open fds of the webhook and the controller (sampled each minute) flat after warm-up; numbers in bin/soak-report.txt.
	CONFIGWARD_SOAK_DURATION=$(SOAK_DURATION) $(GO) test ./test/soak/ -count=1 -timeout $(SOAK_DURATION)15m -v

.PHONY: demo
# The demo waits only for what its first step needs. Prometheus, which only
# step 17 reads (1½ to 8 minutes to build cold, by machine), is built in the background
# at low priority while the steps before it run; the demo waits for it there.
DEMO_PROMETHEUS_BUILD := $(BIN)/demo-prometheus-build
demo: controlplane build ## Walk through configward's rules, schemas and rollouts with the sample manifests in config/samples: runs configward's webhook and controller in-process against a local kube-apiserver, then stays up for your own manifests until Ctrl-C.
	$(GO) build -o $(BIN)/configward-demo ./test/demo
	rm -f $(DEMO_PROMETHEUS_BUILD).rc
	if [ ! -x $(PROMETHEUS) ]; then \
		( nice -n 19 $(MAKE) --no-print-directory prometheus > $(DEMO_PROMETHEUS_BUILD).log 2>&1; echo $$? > $(DEMO_PROMETHEUS_BUILD).rc ) & \
	fi; \
	CONFIGWARD_PROMETHEUS=$(PROMETHEUS) CONFIGWARD_DEMO_PROMETHEUS_BUILD=$(DEMO_PROMETHEUS_BUILD) $(BIN)/configward-demo
