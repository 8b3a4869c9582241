# freshinformer: developer entry points. `make help` lists them.
SHELL := /bin/bash
GO ?= go
STATICCHECK_VERSION ?= v0.8.2
FUZZTIME ?= 60s
BENCHCOUNT ?= 10
PKGS := ./...

.PHONY: help test api codegen promtool haproxy bench fuzz lint soak soak-model soak-ranges

help: ## List the targets.
	@grep -hE '^[a-zA-Z_-]+:.*?## ' $(MAKEFILE_LIST) | sed -E 's/:.*## /\t/'

# PROMTOOL=1 installs promtool (Debian's prometheus package) if missing and
# makes the alert rule checks required; without it they run if promtool is
# there and otherwise skip, saying so. CI sets it.
PROMTOOL ?=

test: ## go vet, then every unit test (with fuzz seed corpora) under -race, binary size, generated code current; PROMTOOL=1 also installs promtool for the alert rule checks.
	@if [ "$(PROMTOOL)" = 1 ]; then $(MAKE) --no-print-directory promtool; \
	  elif ! command -v promtool >/dev/null 2>&1; then echo "promtool not installed: the alert rule checks skip (make test PROMTOOL=1 installs it)"; fi
	$(GO) vet $(PKGS)
	FRESHINFORMER_REQUIRE_PROMTOOL=$(PROMTOOL) $(GO) test -race -count=1 $(PKGS)
	cd freshctrl && $(GO) vet ./... && $(GO) test -race -count=1 ./...
	cd examples/crcounter && $(GO) vet ./...
	GO=$(GO) hack/binsize.sh
	GO=$(GO) hack/update-codegen.sh --verify
	cd hack && $(GO) run ./apilist -check

api: ## Rewrite api/*.txt, the exported API of both modules (make test fails when they are not current).
	cd hack && $(GO) run ./apilist

codegen: ## Regenerate examples/crdcontroller's clientset, listers and informers (k8s.io/code-generator at go.mod's client-go); make test fails when they are stale.
	GO=$(GO) hack/update-codegen.sh

promtool: ## Install promtool and prometheus (Debian package prometheus) if missing: the alert rule checks and dashboard-check need them.
	@{ command -v promtool && command -v prometheus; } >/dev/null 2>&1 || { \
	  echo "installing promtool and prometheus (Debian package prometheus), once"; \
	  sudo=; [ "$$(id -u)" = 0 ] || sudo=sudo; \
	  $$sudo apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$sudo apt-get install -y -qq --no-install-recommends prometheus >/dev/null; \
	  command -v promtool >/dev/null && command -v prometheus >/dev/null; }

haproxy: ## Install HAProxy (Debian package haproxy) if missing: the HA control plane (make ha, make demo HA=1, the HA tests of make integration) puts it in front of its kube-apiservers.
	@command -v haproxy >/dev/null 2>&1 || { \
	  echo "installing haproxy (Debian package haproxy), once"; \
	  sudo=; [ "$$(id -u)" = 0 ] || sudo=sudo; \
	  $$sudo apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$sudo apt-get install -y -qq --no-install-recommends haproxy >/dev/null; \
	  command -v haproxy >/dev/null; }

bench: ## Run benchmarks (BENCHCOUNT runs each) into bench.txt, for benchstat.
	$(GO) test -run '^$$' -bench . -benchmem -count $(BENCHCOUNT) $(PKGS) | tee bench.txt

fuzz: ## Run each fuzz target for FUZZTIME (default 60s).
	@set -e; for pkg in $$($(GO) list $(PKGS)); do \
	  for t in $$($(GO) test -list '^Fuzz' $$pkg | grep '^Fuzz' || true); do \
	    echo "== $$pkg $$t ($(FUZZTIME))"; \
	    $(GO) test -run '^$$' -fuzz "^$$t$$" -fuzztime $(FUZZTIME) $$pkg; \
	  done; \
	done

# The model fault suite (cache/fault_test.go over internal/apimodel): make
# test runs 24 seeds; soak-model runs up to SOAK_SEEDS seeds from SOAK_FIRST
# (0: a random first one, printed), for at most SOAK_TIME (0: no limit),
# with SOAK_RACE (default -race). A failure prints the seed and the command
# that replays it. soak-ranges runs the ranges docs/fault-suite.md lists,
# 400 seeds each, without the race detector (SOAK_RANGES_RACE=-race adds it,
# at about three times the time). A seed spends most of its 30 s or so
# asleep (fault phases, backoffs, waits for convergence), using about a
# tenth of a CPU-second without the race detector: SOAK_PARALLEL seeds run
# at once, 48 by default (1 000 seeds under -race in 9 min on 2 cores at 96).
SOAK_SEEDS ?= 5000
SOAK_FIRST ?= 0
SOAK_TIME ?= 10m
SOAK_FAULT_TIME ?= 3s
SOAK_PARALLEL ?= 48
SOAK_RACE ?= -race
SOAK_RANGES ?= 1300000 1400000 1500000 1600000 1700000 1800000 1900000 2100000 2200000 2300000
SOAK_RANGES_RACE ?=

soak: soak-model soak-cluster ## Every soak: the model fault suite, then randomized faults on a real control plane.

soak-model: ## Fault suite over the model API server: SOAK_SEEDS seeds from SOAK_FIRST (0: random), for at most SOAK_TIME, SOAK_RACE (default -race).
	@first=$(SOAK_FIRST); [ "$$first" != 0 ] || first=$$(( (RANDOM << 15 | RANDOM) * 1000 + 1 )); \
	echo "soak-model: seeds from $$first ($(SOAK_SEEDS) at most)"; \
	$(GO) test $(SOAK_RACE) -count=1 -timeout 0 ./cache -run '^TestFaultSuite' \
	  -fault.first=$$first -fault.seeds=$(SOAK_SEEDS) -fault.budget=$(SOAK_TIME) \
	  -fault.time=$(SOAK_FAULT_TIME) -fault.parallel=$(SOAK_PARALLEL)

soak-ranges: ## Fault suite over the ranges of docs/fault-suite.md (SOAK_RANGES), 400 seeds each (about 3 to 5 min a range on 2 cores).
	@set -e; for first in $(SOAK_RANGES); do \
	  echo "== seeds $$first..$$((first + 399))"; \
	  $(MAKE) --no-print-directory soak-model SOAK_FIRST=$$first SOAK_SEEDS=400 SOAK_TIME=0 SOAK_RACE=$(SOAK_RANGES_RACE); \
	done

lint: ## gofmt check, go vet, staticcheck (pinned).
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet $(PKGS)
	$(GO) run honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION) $(PKGS)
	cd freshctrl && $(GO) vet ./... && $(GO) run honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION) ./...

# --- real control plane (integration/) -------------------------------------
# kube-apiserver and etcd are built from Go modules (integration/tools) and
# cached outside the clone; see integration/README.md. KUBE picks the
# kube-apiserver version for every target below (1.35, 1.36, 1.37, or an
# exact v1.37.2; default: DEFAULT_KUBE in integration/hack/build-bins.sh).
BINS := integration/hack/build-bins.sh
KUBE ?=
export KUBE
INTEGRATION_TIMEOUT ?= 20m
DEMO_CMD ?= go run ./examples/demo

.PHONY: bins control-plane-bins integration demo ha

bins: ## Build kube-apiserver, etcd and etcdutl from Go modules once (first run: several minutes), cached in ~/.cache/freshinformer/bins; KUBE=1.35 picks another kube-apiserver.
	@GO=$(GO) $(BINS) --etcdutl >/dev/null

# kube-apiserver and etcd only: what the demo and the benchmarks need
# (etcdutl is for the restore tests).
control-plane-bins:
	@GO=$(GO) $(BINS) >/dev/null

integration: bins haproxy ## Integration tests (-race) against a real etcd + kube-apiserver (and the short HA scenarios behind HAProxy); never leaves processes behind.
	@assets=$$(GO=$(GO) $(BINS) --dir) && cd integration && \
	  KUBEBUILDER_ASSETS=$$assets FRESHINFORMER_REQUIRE_HAPROXY=1 ./hack/with-reaper.sh \
	  $(GO) test -race -count=1 -timeout $(INTEGRATION_TIMEOUT) ./...
	@$(MAKE) --no-print-directory kcm-compat

# integration/kcmbench is a module of its own (it requires k8s.io/kubernetes,
# which no other module may): its test checks that consistency.Store is
# kube-controller-manager's ConsistencyStore, and vet builds the benchmark.
kcm-compat:
	cd integration/kcmbench && GOWORK=off $(GO) vet ./... && GOWORK=off $(GO) test -race -count=1 ./...

# The highly available topology (docs/ha.md): 3 kube-apiservers on a
# 3-member etcd cluster behind HAProxy. make integration runs the scenarios'
# short form; this target their long form, with their tables (-v).
ha: bins haproxy ## The HA scenarios (docs/ha.md) in their long form: 3 kube-apiservers on 3 etcd members behind HAProxy, client-go's factory beside ours, -race; prints their tables.
	@assets=$$(GO=$(GO) $(BINS) --dir) && cd integration && \
	  KUBEBUILDER_ASSETS=$$assets FRESHINFORMER_REQUIRE_HAPROXY=1 FRESHINFORMER_HA_LONG=1 ./hack/with-reaper.sh \
	  $(GO) test -race -count=1 -v -run '^TestHA' -timeout 60m ./e2e/

# DEMO_KUBECONFIG=path runs the demo against that cluster; without it, the
# demo runs on a throwaway embedded control plane, whatever KUBECONFIG says.
DEMO_KUBECONFIG ?=
# HA=1 runs the demo on the highly available plane: 3 kube-apiservers on a
# 3-member etcd cluster behind HAProxy (docs/ha.md).
HA ?=

demo: $(if $(HA),haproxy) ## Run DEMO_CMD (default: go run ./examples/demo) on a throwaway real control plane (HA=1: three kube-apiservers on three etcd members behind HAProxy), or on DEMO_KUBECONFIG's cluster when set; it removes what it made.
	@if [ -n "$(DEMO_KUBECONFIG)" ]; then \
	  echo "[demo] DEMO_KUBECONFIG is set: running against $(DEMO_KUBECONFIG)"; \
	  KUBECONFIG="$(DEMO_KUBECONFIG)" $(DEMO_CMD); \
	else \
	  GO=$(GO) $(BINS) >/dev/null && \
	  assets=$$(GO=$(GO) $(BINS) --dir) && \
	  (cd integration && $(GO) build -o bin/withcluster ./cmd/withcluster) && \
	  KUBEBUILDER_ASSETS=$$assets integration/hack/with-reaper.sh \
	  integration/bin/withcluster $(if $(HA),-ha) -- $(DEMO_CMD); \
	fi

# --- the dashboard on a real Prometheus, the supported servers --------------
# dashboard-check: docs/metrics.md. support-matrix: docs/support-matrix.md;
# SUPPORT_VERSIONS picks the versions (default: every
# integration/tools/kube-<minor>), SUPPORT_MATRIX_DOC is the file whose report
# it rewrites (empty: print only), SUPPORT_TESTS replaces the smoke tests.
DASHBOARD_CHECK_ARGS ?=
SUPPORT_VERSIONS ?=
SUPPORT_TESTS ?=
SUPPORT_MATRIX_DOC ?= docs/support-matrix.md

.PHONY: dashboard-check support-matrix

dashboard-check: control-plane-bins promtool ## The Grafana dashboard against a real Prometheus (Debian's) scraping the demo, default and detailed metrics: prints each panel's queries and whether they returned data; fails if one returns nothing (about 2 min once built).
	@assets=$$(GO=$(GO) $(BINS) --dir) && \
	  $(GO) build -o integration/bin/demo ./examples/demo && \
	  (cd integration && $(GO) build -o bin/withcluster ./cmd/withcluster && $(GO) build -o bin/dashboardcheck ./cmd/dashboardcheck) && \
	  KUBEBUILDER_ASSETS=$$assets integration/hack/with-reaper.sh \
	  integration/bin/withcluster -- integration/bin/dashboardcheck -demo integration/bin/demo \
	  -dashboard metrics/monitoring/dashboard.json $(DASHBOARD_CHECK_ARGS)

support-matrix: ## The integration smoke (demo -check, server behaviour, quiet and restore tests) on every supported kube-apiserver (1.35, 1.36, 1.37; each built once, 10 to 15 min cold on 2 cores, then about 6 min a version): a Markdown report into docs/support-matrix.md.
	GO=$(GO) SUPPORT_MATRIX_DOC=$(SUPPORT_MATRIX_DOC) SUPPORT_TESTS='$(SUPPORT_TESTS)' integration/hack/support-matrix.sh $(SUPPORT_VERSIONS)

# --- upstream's own tests against the library (integration/conformance) ----
# See docs/conformance.md. CONFORMANCE_ARGS adds flags (-suite=cr_cache runs
# one suite).
CONFORMANCE_ARGS ?=

.PHONY: conformance

conformance: control-plane-bins ## client-go's shared informer tests, controller-runtime's pkg/cache and cache-backed pkg/client specs, sample-controller's unit tests (10 runs of 100), kube-controller-manager's ReplicaSet, Job, DaemonSet and StatefulSet unit tests, against the library and upstream (control), -race (about 7 min).
	@assets=$$(GO=$(GO) $(BINS) --dir) && cd integration && \
	  KUBEBUILDER_ASSETS=$$assets ./hack/with-reaper.sh \
	  $(GO) run ./conformance/cmd/conformance -race -docs ../docs/conformance.md $(CONFORMANCE_ARGS)

# --- faults and scale on the real control plane (integration/) --------------
SOAK_DURATION ?= 5m
SOAK_SEED ?=
SCALE_ARGS ?=
QUIETBENCH_ARGS ?=
RESTARTCOST_ARGS ?=

.PHONY: soak-cluster scale quiet-bench restart-cost kcm-bench kcm-compat
KCMBENCH_ARGS ?=

soak-cluster: bins ## Randomized faults on a real control plane (kill -9, restarts, compaction, etcd restores) for SOAK_DURATION (default 5m); SOAK_SEED replays one.
	@assets=$$(GO=$(GO) $(BINS) --dir) && cd integration && \
	  KUBEBUILDER_ASSETS=$$assets FRESHINFORMER_SOAK=$(SOAK_DURATION) FRESHINFORMER_SOAK_SEED=$(SOAK_SEED) \
	  ./hack/with-reaper.sh $(GO) test -race -count=1 -v -run '^TestSoakCluster$$' -timeout 2h ./e2e/

scale: control-plane-bins ## FreshInformer vs client-go's informer on a real apiserver: 10k/30k sync, update stream, shared-stream latency, relist, idle waiters (about 7 min); prints a Markdown table.
	@assets=$$(GO=$(GO) $(BINS) --dir) && cd integration && \
	  $(GO) build -o bin/scale ./cmd/scale && \
	  KUBEBUILDER_ASSETS=$$assets ./hack/with-reaper.sh bin/scale $(SCALE_ARGS)

quiet-bench: control-plane-bins ## Quiet resources (issue 21) on a real apiserver: WaitForFreshness and Sync latency and probe cost per size, kind (watch cache or none) and probe route, or -mode=curve for the snapshot cost curve; QUIETBENCH_ARGS adds flags (-help lists them); prints Markdown tables.
	@assets=$$(GO=$(GO) $(BINS) --dir) && cd integration && \
	  $(GO) build -o bin/quietbench ./cmd/quietbench && \
	  KUBEBUILDER_ASSETS=$$assets ./hack/with-reaper.sh bin/quietbench $(QUIETBENCH_ARGS)

restart-cost: control-plane-bins ## What a kube-apiserver restart costs 100 informers (20 namespaces x 5 kinds, 50 and 500 objects each), client-go's factory vs ours side by side behind counting proxies: requests, bytes, write-to-lister/wait latency (about 4 min); RESTARTCOST_ARGS adds flags (-help lists them); prints Markdown tables.
	@assets=$$(GO=$(GO) $(BINS) --dir) && cd integration && \
	  $(GO) build -o bin/restartcost ./cmd/restartcost && \
	  KUBEBUILDER_ASSETS=$$assets ./hack/with-reaper.sh bin/restartcost $(RESTARTCOST_ARGS)

kcm-bench: bins ## kube-controller-manager v1.37.2's own ReplicaSet and Job controllers (each configuration's in a process of its own) on a real apiserver: client-go's factory with upstream's Noop (P) and Real (K) ConsistencyStore, and our factory and consistency.Store (F), idle and under watch lag, or across etcd restores (-restore nobump,bump); prints Markdown tables (docs/benchmarks.md); KCMBENCH_ARGS adds flags (-help lists them); KCMBENCH_CPUPROFILE=DIR writes each controller process's CPU profile there.
	@assets=$$(GO=$(GO) $(BINS) --dir) && \
	  (cd integration && $(GO) build -o bin/withcluster ./cmd/withcluster) && \
	  (cd integration/kcmbench && GOWORK=off $(GO) build -o ../bin/kcmbench .) && \
	  KUBEBUILDER_ASSETS=$$assets integration/hack/with-reaper.sh integration/bin/withcluster -control -- integration/bin/kcmbench $(KCMBENCH_ARGS)

# --- heap soak (integration/cmd/heapsoak, docs/heap-soak.md) ----------------
HEAPSOAK_ARGS ?=

.PHONY: soak-heap

soak-heap: control-plane-bins ## A controller with write recording, requeue and metrics on a real control plane, owners created and deleted without end, for 10 min: fails unless heap and goroutines stay flat; HEAPSOAK_ARGS adds flags.
	@assets=$$(GO=$(GO) $(BINS) --dir) && cd integration && \
	  $(GO) build -o bin/heapsoak ./cmd/heapsoak && \
	  KUBEBUILDER_ASSETS=$$assets ./hack/with-reaper.sh bin/heapsoak $(HEAPSOAK_ARGS)

# --- modules and supported versions (hack/, docs/releasing.md) -------------
.PHONY: compat scratch apidiff tidy

compat: ## Each module alone, built, vetted and unit-tested on every supported client-go / controller-runtime combination (hack/lib.sh).
	GO=$(GO) hack/compat-matrix.sh

scratch: ## From an empty module: go get both modules (served from the working tree), build and run the README's code on every combination.
	GO=$(GO) hack/scratch-module.sh

apidiff: ## No incompatible API change since each module's latest release tag (or REF=<git ref>).
	GO=$(GO) hack/apidiff.sh $(REF)

tidy: ## go mod tidy in every module (go mod tidy ignores go.work).
	GO=$(GO) hack/tidy.sh
