GO ?= go

.PHONY: test bench bench-gateway lint demo chaos

# The test command of the README and of CI.
test:
	$(GO) test -race ./...

# Benchmarks: each governed arm beside a raw net/http arm in the same run.
bench:
	$(GO) test -run '^$$' -bench . -benchmem -count 1 ./bench/

# The gateway as its own process against a fake upstream in another, on
# loopback: added latency, throughput, CPU per request and per chunk, TTFT,
# each as a ratio to calling the fake directly (about a minute).
bench-gateway:
	bash cmd/polygateway/internal/loadgen/bench.sh

lint:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	$(GO) test -run TestDependencyRule .
	@if command -v golangci-lint >/dev/null 2>&1; then golangci-lint run ./...; else echo "golangci-lint not installed: skipped"; fi

# The mixed-fault benchmark: 8,000 calls against broken fakes, governed vs
# plain round robin; exits non-zero when a target is missed.
chaos:
	$(GO) run ./examples/chaos

# The offline demo: failover, breaker, cache and telemetry against built-in fakes.
demo:
	$(GO) run ./examples/quickstart
