# freshinformer: developer entry points. `make help` lists them.
SHELL := /bin/bash
GO ?= go
STATICCHECK_VERSION ?= v0.8.2
FUZZTIME ?= 60s
BENCHCOUNT ?= 10
PKGS := ./...

.PHONY: help test bench fuzz lint

help: ## List the targets.
	@grep -hE '^[a-zA-Z_-]+:.*?## ' $(MAKEFILE_LIST) | sed -E 's/:.*## /\t/'

test: ## go vet, then every unit test (with fuzz seed corpora) under -race.
	$(GO) vet $(PKGS)
	$(GO) test -race -count=1 $(PKGS)

bench: ## Run benchmarks (BENCHCOUNT runs each) into bench.txt, for benchstat.
	$(GO) test -run '^$$' -bench . -benchmem -count $(BENCHCOUNT) $(PKGS) | tee bench.txt

fuzz: ## Run each fuzz target for FUZZTIME (default 60s).
	@set -e; for pkg in $$($(GO) list $(PKGS)); do \
	  for t in $$($(GO) test -list '^Fuzz' $$pkg | grep '^Fuzz' || true); do \
	    echo "== $$pkg $$t ($(FUZZTIME))"; \
	    $(GO) test -run '^$$' -fuzz "^$$t$$" -fuzztime $(FUZZTIME) $$pkg; \
	  done; \
	done

lint: ## gofmt check, go vet, staticcheck (pinned).
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet $(PKGS)
	$(GO) run honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION) $(PKGS)

# --- real control plane (integration/) -------------------------------------
