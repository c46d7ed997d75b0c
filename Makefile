# hatchery-vsphere — developer entry points.
GO      ?= go
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
COMMIT  ?= $(shell git rev-parse HEAD 2>/dev/null || echo dev)
LDFLAGS := -X main.version=$(VERSION) -X main.commit=$(COMMIT)
MOCKGEN ?= $(shell $(GO) env GOPATH)/bin/mockgen

.PHONY: build test test-under-load generate lint bench bench-latency bench-pool bench-records demo check-generate conformance soak package

build:
	$(GO) build -ldflags "$(LDFLAGS)" -o bin/hatchery-vsphere ./cmd/hatchery-vsphere

## test: the README's test command (vet, format, generated code current, race tests)
test:
	bash .ci/test

## test-under-load: the whole `make test` beside a CPU hog on every core (.ci/under-load; HOGS=N for another count): a test that depends on the machine's speed fails here, about twice as long as `make test`
test-under-load:
	TEST_UNDER_LOAD=1 bash .ci/under-load bash .ci/test

$(MOCKGEN):
	$(GO) install github.com/golang/mock/mockgen@v1.6.0

## generate: regenerate mock_vsphere from the port interfaces (internal/vctypes)
generate: $(MOCKGEN)
	PATH="$(dir $(MOCKGEN)):$$PATH" $(GO) generate ./internal/vctypes/...

## check-generate: fail when mock_vsphere is not what `make generate` writes
check-generate: generate
	git diff --exit-code -- mock_vsphere

lint:
	$(GO) vet ./...
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || (gofmt -l $$(git ls-files '*.go'); exit 1)

## bench: vCenter cost of the whole-object baseline (test-only), listing, shared and watch inventory modes on vcsim (1,000 and 5,000 VMs), then the idle cost and peak heap of config new's defaults and of a scoped configuration on a shared vCenter (1,000 and 10,000 VMs: the line `idle default configuration: …`; docs/inventory-watch.md), ~12 min
bench:
	$(GO) test -run '^$$' -bench BenchmarkInventoryModes -benchtime 1x -timeout 20m ./internal/vsphere/
	$(GO) test -run '^$$' -bench BenchmarkSpawnPaths -benchtime 1x -timeout 10m ./internal/vsphere/

## bench-latency: (LATENCY_MODEL=FILE: the figures `vcenter check --latency-model FILE` measured) job-start latency and the hatchery's overhead per pool strategy and clone mode (instant clones included), then per spawn path (one job alone) the waiting beyond the modelled operations and the SOAP requests by method, on vcsim taught the latency model (docs/architecture.md), ~2 min
bench-latency:
	LATENCY_MODEL='$(LATENCY_MODEL)' $(GO) test -run '^$$' -bench 'BenchmarkJobStartLatency|BenchmarkSpawnPaths' -benchtime 1x -timeout 10m ./internal/vsphere/
	$(MAKE) bench-pool

## bench-pool: a synthetic week of job arrivals (internal/poolsize, seed in the code) replayed against the demand-driven warm pool and the best fixed pool, clone times from the latency model (docs/warm-pools.md), ~5 s
bench-pool:
	$(GO) test -run '^$$' -bench BenchmarkDemandPool -benchtime 1x ./internal/poolsize/

## bench-records: the heap a day of sdk/hatchery's per-job records holds (spawned-job record and attempt counter, kept 24 h after a job's last attempt), V1 and V2 jobs at 300 and 1,000 jobs an hour, on a fake clock (docs/operations.md#soak), ~30 s
bench-records:
	$(GO) test -run '^$$' -bench BenchmarkDayOfJobRecords -benchtime 1x ./sdk/hatchery/

## conformance: the real daemon against a real CDS API, CDN and worker ($$CDS_REAL, else ../shared/cds-real), one line per scenario (docs/conformance.md), ~5 min
conformance:
	$(GO) test -c -tags conformance -o bin/conformance.test ./internal/conformance
	cd internal/conformance && ../../bin/conformance.test -test.count=1 -test.timeout=30m

## demo: the hatchery against in-process simulators (DEMO_FLAGS="--jobs 6 --once")
demo:
	$(GO) run -tags demo -ldflags "$(LDFLAGS)" ./cmd/hatchery-vsphere demo $(DEMO_FLAGS)

## soak: the demo's trickle of jobs (every kind of model, warm pool, two placements, instant parents) for $$SOAK (default 20m; SOAK=2h), then its --once checks; prints the heap, goroutines and open files, fails on growth that does not level off or on a WARN (docs/operations.md#soak)
SOAK ?= 20m
soak:
	$(GO) run -tags demo -ldflags "$(LDFLAGS)" ./cmd/hatchery-vsphere demo --soak $(SOAK)

## package: the Debian package (nfpm v2.45.2) and the tarball into dist/, with dist/SHA256SUMS, version from git describe (docs/install.md); PACKAGE_ARCHS="amd64 arm64" builds both
PACKAGE_ARCHS ?= amd64
package:
	VERSION=$(VERSION) COMMIT=$(COMMIT) GO=$(GO) bash packaging/build $(PACKAGE_ARCHS)
