GO ?= go

.PHONY: test test-repeat bench queuebench bench-gateway faultbench lint demo chaos fuzz

# The test command of the README and of CI. Under CI (CI=true) every test
# runs three times in a row, so a test that depends on timing or order fails
# the build instead of passing by luck; TEST_COUNT sets it by hand.
TEST_COUNT ?= $(if $(filter true,$(CI)),3,1)
test:
	$(GO) test -race -count=$(TEST_COUNT) ./...

# The same suite three times in a row wherever it runs.
test-repeat:
	$(GO) test -race -count=3 ./...

# Benchmarks: each governed arm beside a raw net/http arm in the same run.
bench:
	$(GO) test -run '^$$' -bench . -benchmem -count 1 ./bench/

# The admission queue: callers contending for one concurrency gate through
# each backend's Admitter (memory; Redis on a redis-server of its own):
# utilization of the gate, wait p50/p99 per class, Redis scripts and
# commands per admission and per waiter-second, heap per waiting call;
# then the utilization of each backend at 20, 50, 100 and 200 ms of mean
# service (BenchmarkQueueUtilization, about 45 s). The figures are in
# docs/explanation-benchmarks.md.
QUEUEBENCH_N ?= 2000x
queuebench:
	$(GO) test -run '^$$' -bench BenchmarkQueue -benchtime $(QUEUEBENCH_N) -count 1 ./bench/queue/

# Fuzzing: each target for FUZZTIME (go test -fuzz takes one target per
# run). Seeds are committed under each package's testdata/fuzz/<Target>/;
# what the fuzzer finds beyond them stays in the build cache. A failure
# writes the crasher to testdata/fuzz: fix the bug, keep the file as a seed.
FUZZTIME ?= 10s
FUZZMINIMIZETIME ?= 5s
FUZZ_TARGETS = \
	.:FuzzStructuredRepair \
	./backend/redisstore:FuzzWakeMessage \
	./configfile:FuzzParse \
	./embed:FuzzDecodeEmbeddings \
	./embed:FuzzEmbeddingsErrorBody \
	./internal/config:FuzzDecodePricing \
	./internal/config:FuzzLoad \
	./internal/config:FuzzLoadEnvironments \
	./internal/middleware:FuzzCacheEntry \
	./internal/redact:FuzzCutRunes \
	./internal/redact:FuzzString \
	./internal/transport:FuzzClassifyResponse \
	./internal/transport:FuzzEncodeRequest \
	./internal/transport:FuzzParseChunk \
	./internal/transport:FuzzRetryAfter \
	./internal/transport:FuzzSSE \
	./internal/transport:FuzzStreamText \
	./internal/transport:FuzzThinkFilter \
	./ocr:FuzzCheckDirectory \
	./ocr:FuzzExtractMiddle \
	./ocr:FuzzOCRAnswer \
	./ocr:FuzzParseMiddle \
	./ocr:FuzzResolveDownloadURL \
	./polygatewaytest:FuzzEmbedRequest \
	./polygatewaytest:FuzzSplitContent \
	./proxy:FuzzClientHeaders \
	./proxy:FuzzCountElements \
	./proxy:FuzzParseChat \
	./proxy:FuzzParseChatProperties \
	./proxy:FuzzParseEmbed \
	./proxy:FuzzPlaceHeaders \
	./proxy:FuzzResponsesRequest \
	./proxy:FuzzScrubAddresses \
	./tracing:FuzzHandlerTraceparent

fuzz:
	@set -e; for t in $(FUZZ_TARGETS); do \
		pkg=$${t%%:*}; name=$${t##*:}; \
		echo "fuzz $$pkg $$name ($(FUZZTIME))"; \
		$(GO) test -run '^$$' -fuzz "^$$name\$$" -fuzztime $(FUZZTIME) -fuzzminimizetime $(FUZZMINIMIZETIME) $$pkg; \
	done

# The gateway as its own process against a fake upstream in another, on
# loopback: added latency, throughput, CPU per request and per chunk, TTFT,
# each as a ratio to calling the fake directly (about a minute).
bench-gateway:
	bash cmd/polygateway/internal/loadgen/bench.sh

# The fault patterns through the gateway as its own process, against fakes
# on loopback: each pattern with the defaults, then with the production
# profile (docs/production.env), classified rescued, clean error or wrong.
# Prints the table and writes it into docs/explanation-faults.md (about a
# minute after the build); exits non-zero when an outcome is wrong.
faultbench:
	$(GO) run ./cmd/polygateway/internal/faultbench -go $(GO) -doc docs/explanation-faults.md

# gofmt, go vet, the dependency rule and golangci-lint (.golangci.yml; the
# one on PATH, else the one go install put in the Go bin directory; a run
# waits for another one in progress instead of failing). Without
# golangci-lint the step is skipped, except under CI (CI=true), where
# .ci/run installs it and its absence fails the build.
GOLANGCI_LINT ?= $(or $(shell command -v golangci-lint 2>/dev/null),$(shell gobin=$$($(GO) env GOBIN); echo $${gobin:-$$($(GO) env GOPATH)/bin}/golangci-lint))
lint:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	$(GO) test -run TestDependencyRule .
	@if [ -x "$(GOLANGCI_LINT)" ]; then echo "$(GOLANGCI_LINT) run --allow-serial-runners ./..."; "$(GOLANGCI_LINT)" run --allow-serial-runners ./...; \
	elif [ "$(CI)" = true ]; then echo "golangci-lint not installed (go install github.com/golangci/golangci-lint/v2/cmd/golangci-lint@v2.15.0)"; exit 1; \
	else echo "golangci-lint not installed: skipped"; fi

# The mixed-fault benchmark: 8,000 calls against broken fakes, governed vs
# plain round robin; exits non-zero when a target is missed.
chaos:
	$(GO) run ./examples/chaos

# The offline demo: failover, breaker, cache and telemetry against built-in fakes.
demo:
	$(GO) run ./examples/quickstart
