#!/usr/bin/env bash
# Memory of the gateway under many concurrent large request bodies, on
# loopback, each side in its own process: a slow fake upstream (so that
# admitted calls stay in flight), the gateway with PGW_MAX_IN_FLIGHT=4, and
# 40 workers posting chat completions whose user message is 7.9 MB. Prints
# the load generator's JSON line and the gateway's resident memory (VmRSS
# before the run, peak VmHWM after it). Usage (from the repository root):
#
#   bash cmd/polygateway/internal/loadgen/bodies.sh [duration]
#
# GW_DIR=/path/to/another/checkout measures that tree's gateway with this
# load generator (e.g. an export of an older commit); MAX_IN_FLIGHT=0 runs
# the gateway without an in-flight cap (default 4). Everything stops by
# itself.
set -euo pipefail
dur=${1:-10s}
tmp=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$tmp"' EXIT

go build -o "$tmp/loadgen" ./cmd/polygateway/internal/loadgen
(cd "${GW_DIR:-.}" && go build -o "$tmp/polygateway" ./cmd/polygateway)

"$tmp/loadgen" fake -tokens 16 -latency 1s -max 30m >"$tmp/fake.url" &
for _ in $(seq 100); do [ -s "$tmp/fake.url" ] && break; sleep 0.1; done
fake=$(head -1 "$tmp/fake.url")

port=$((20000 + RANDOM % 20000))
env -i PATH="$PATH" HOME="$HOME" \
  PGW_LISTEN_ADDR=127.0.0.1:$port PGW_ROUTES=gpt-4o=LLM PGW_LOG_LEVEL=error PGW_MAX_IN_FLIGHT="${MAX_IN_FLIGHT:-4}" \
  PGW_LIMITER_BACKEND=memory PGW_BREAKER_BACKEND=memory PGW_CACHE_BACKEND=none PGW_TELEMETRY_BACKEND=none \
  LLM__FAKE__1__BASE_URL="$fake" LLM__FAKE__1__API_KEY=none LLM__FAKE__1__MODEL=fake-model \
  LLM__FAKE__1__TIMEOUT_S=30 LLM__FAKE__1__MAX_CONCURRENCY=4096 \
  "$tmp/polygateway" -env-file /dev/null 2>"$tmp/gw.log" &
gw=$!
for _ in $(seq 100); do curl -fs "http://127.0.0.1:$port/healthz" >/dev/null 2>&1 && break; sleep 0.1; done

rss() { awk -v f="$1:" '$1 == f {print $2}' "/proc/$gw/status"; }
before=$(rss VmRSS)
"$tmp/loadgen" run -label "bodies" -url "http://127.0.0.1:$port/v1" -rate 0 -workers 40 -payload 7900000 \
  -warmup 1s -duration "$dur" -pid $gw
echo "{\"gateway_rss_before_kib\": $before, \"gateway_rss_peak_kib\": $(rss VmHWM), \"gateway_rss_after_kib\": $(rss VmRSS)}"
