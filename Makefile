# Redrive: build, run and test. `make help` lists the targets.
#
# `make run` and `make test` work on a fresh Debian or Ubuntu machine: run
# as root, they install what is missing (scripts/deps.sh), and nothing
# depends on a service started by hand. The test suite starts its own
# throwaway Postgres unless DATABASE_URL names one. Go (the release go.mod
# names) is checked, never installed: scripts/deps.sh says where to get it.

SHELL := /bin/bash
.SHELLFLAGS := -euo pipefail -c
.DEFAULT_GOAL := help
MAKEFLAGS += --no-print-directory

GO ?= go
export GO # scripts/deps.sh checks this go
BIN := bin/redrive

# make fuzz FUZZTIME=5m; make test runs each fuzz target for FUZZTIME_TEST
FUZZTIME ?= 2m
FUZZTIME_TEST ?= 2s

# make gobench BENCH=DeadLetters PKGS=./seed/ COUNT=10
BENCH ?= .
PKGS ?= ./...
COUNT ?= 5

# make bench QUICK=1: small sizes, one run each, to check the harness.
# make bench ONLY="drain best": only the steps whose name contains ONLY.
# make bench ENGINE=Redrive: only that engine (an A/B of two builds).
# make bench RUNS=1: one run of each figure instead of three (a quick look).
# make bench SCALE=10M: instead of the suite, the console seeded at a million
#   and at SCALE side by side, with a retention purge at SCALE
#   (docs/performance.md#from-one-to-ten-million-letters); without SCALE,
#   the suite's console step at a million, as ever. SCALE_FROM=100k: the
#   smaller size instead of a million (a tenfold step on a smaller disk).
QUICK ?=
ONLY ?=
ENGINE ?=
RUNS ?=
SCALE ?=
SCALE_FROM ?=
BENCH_OUT := $(if $(SCALE),bench/scale.md,$(if $(QUICK),bench/quick.md,bench/latest.md))

.PHONY: help
help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-9s %s\n", $$1, $$2}'

.PHONY: run
run: ## install PostgreSQL if missing, build, and run everything locally (redrive dev)
	@scripts/deps.sh run
	@$(MAKE) build
	./$(BIN) dev

# go-check stops with a message saying where to get Go when it is missing or
# older than go.mod's go line (run and test check it through deps.sh).
.PHONY: go-check
go-check:
	@scripts/deps.sh go

.PHONY: build
build: go-check ## build bin/redrive
	$(GO) build -trimpath -ldflags "-X github.com/redrive/redrive/cli.version=$$(git describe --always --dirty 2>/dev/null || echo dev)" -o $(BIN) .

.PHONY: generate
generate: ## regenerate the templ views
	$(GO) tool templ generate

.PHONY: test
test: ## install what tests need, then vet, lint, check formatting and generated code, run every test
	@start=$$SECONDS; \
	driver=$$(scripts/deps.sh test | tail -n 1); \
	$(MAKE) vet lint fmt-check generate-check; \
	echo "go test (browser driver: $$driver)"; \
	PLAYWRIGHT_DRIVER_PATH="$$driver" $(GO) test -count=1 -timeout 20m ./...; \
	$(MAKE) py-test; \
	FUZZTIME=$(FUZZTIME_TEST) GO=$(GO) scripts/fuzz.sh; \
	echo "make test: passed in $$((SECONDS - start))s"

# The Celery integration's own tests, on Debian's Python (another may come
# first on PATH); its end-to-end test with a real worker is in e2e/.
.PHONY: py-test
py-test:
	cd integrations/celery && /usr/bin/python3 -B -m unittest discover -s tests -t .

.PHONY: reliability
reliability: ## run the reliability suites at full size (minutes) and print their figures (docs/architecture.md#reliability)
	@scripts/deps.sh run
	$(GO) test -count=1 -timeout 60m -v -run . ./reliability/ -args -long 2>&1 | tee reliability.log | grep -E '^(--- |ok|FAIL|PASS)|figures:|_test.go:'

.PHONY: fuzz
fuzz: ## run every fuzz target for FUZZTIME each (default 2m)
	@scripts/deps.sh run
	FUZZTIME=$(FUZZTIME) GO=$(GO) scripts/fuzz.sh

.PHONY: vet
vet:
	$(GO) vet ./...
	@# The benchmark harness is its own module over Redrive's: vetting it
	@# here catches a dependency of Redrive's it has not taken yet, which
	@# would otherwise stop make bench.
	cd benchmarks && $(GO) vet ./...

# go.mod says what the code imports (a direct dependency is never marked
# indirect), and staticcheck (a tool dependency, so the version is pinned in
# go.mod) finds nothing; staticcheck.conf adds package comments to its defaults.
.PHONY: lint
lint: ## check go.mod is tidy and run staticcheck
	$(GO) mod tidy -diff
	$(GO) tool staticcheck ./...

# Every Go file git would see: tracked, or new and not ignored (so never the
# driver's node_modules under .cache).
.PHONY: fmt-check
fmt-check:
	@unformatted=$$(git ls-files -z --cached --others --exclude-standard -- '*.go' | xargs -0 -r gofmt -l); \
	if [ -n "$$unformatted" ]; then echo "not gofmt-ed (run gofmt -w):"; echo "$$unformatted"; exit 1; fi

# The generated *_templ.go files are committed; regenerating must change
# nothing. Compared before and after rather than with git diff, so that
# work in progress in views/ does not count as a failure.
.PHONY: generate-check
generate-check:
	@if ! compgen -G 'views/*.templ' >/dev/null; then echo "no templ files: skipping the generated-code check"; exit 0; fi; \
	before=$$(cat views/*_templ.go 2>/dev/null | sha256sum); \
	if ! out=$$($(GO) tool templ generate 2>&1); then echo "$$out"; exit 1; fi; \
	after=$$(cat views/*_templ.go | sha256sum); \
	if [ "$$before" != "$$after" ]; then \
		echo "views/*_templ.go were stale and have been regenerated: commit them (git diff -- views/)"; exit 1; \
	fi

.PHONY: bench
bench: ## Redrive vs River on a private cluster: one table, also in bench/latest.md (QUICK=1: a few minutes)
	@scripts/deps.sh run
	@$(MAKE) build
	cd benchmarks && $(GO) test -count=1 ./... && $(GO) build -o ../bin/redrive-bench .
	./bin/redrive-bench --redrive $(BIN) --out $(BENCH_OUT) $(if $(QUICK),--quick) $(if $(ONLY),--only "$(ONLY)") \
		$(if $(ENGINE),--engine "$(ENGINE)") $(if $(RUNS),--runs $(RUNS)) $(if $(SCALE),--scale "$(SCALE)" $(if $(SCALE_FROM),--scale-from "$(SCALE_FROM)")) --version "$$(git describe --always --dirty 2>/dev/null || echo dev)"

.PHONY: gobench
gobench: ## run the Go benchmarks COUNT times each and print medians (benchstat); raw output in bench/
	@mkdir -p bench
	$(GO) test -run '^$$' -bench '$(BENCH)' -benchmem -count $(COUNT) -timeout 60m $(PKGS) | tee bench/latest.txt
	$(GO) tool benchstat bench/latest.txt

# The dev cluster may live outside the checkout (under /var/lib/redrive when
# root runs a clone below a private folder): only redrive knows where, so
# `redrive dev --reset` removes it. go run, not bin/redrive, which may be
# missing or older than --reset.
.PHONY: clean
clean: ## remove build output, benchmark results, screenshots and the dev cluster with its data (keeps .cache)
	$(GO) run . dev --reset
	rm -rf bin bench e2e/screenshots
