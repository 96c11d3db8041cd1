#!/usr/bin/env bash
# Added latency of the gateway versus calling the fake upstream directly, on
# loopback, each side in its own process: fake upstream, gateway, load
# generator. Usage (from the repository root):
#
#   bash cmd/polygateway/internal/loadgen/bench.sh [duration]
#
# Prints one JSON line per run. Everything stops by itself.
set -euo pipefail
dur=${1:-10s}
tmp=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$tmp"' EXIT

go build -o "$tmp/loadgen" ./cmd/polygateway/internal/loadgen
go build -o "$tmp/polygateway" ./cmd/polygateway

"$tmp/loadgen" fake -tokens 16 -max 30m >"$tmp/fake.url" &
for _ in $(seq 100); do [ -s "$tmp/fake.url" ] && break; sleep 0.1; done
fake=$(head -1 "$tmp/fake.url")

port=$((20000 + RANDOM % 20000))
env -i PATH="$PATH" HOME="$HOME" \
  PGW_LISTEN_ADDR=127.0.0.1:$port PGW_ROUTES=gpt-4o=LLM PGW_LOG_LEVEL=warn \
  PGW_LIMITER_BACKEND=memory PGW_BREAKER_BACKEND=memory PGW_CACHE_BACKEND=none PGW_TELEMETRY_BACKEND=none \
  LLM__FAKE__1__BASE_URL="$fake" LLM__FAKE__1__API_KEY=none LLM__FAKE__1__MODEL=fake-model \
  LLM__FAKE__1__TIMEOUT_S=30 LLM__FAKE__1__MAX_CONCURRENCY=4096 \
  "$tmp/polygateway" -env-file /dev/null 2>"$tmp/gw.log" &
gw=$!
for _ in $(seq 100); do curl -fs "http://127.0.0.1:$port/healthz" >/dev/null 2>&1 && break; sleep 0.1; done

for rate in 500 2000; do
  "$tmp/loadgen" run -label "direct@$rate" -url "$fake" -rate $rate -duration "$dur"
  "$tmp/loadgen" run -label "gateway@$rate" -url "http://127.0.0.1:$port/v1" -rate $rate -duration "$dur" -pid $gw
done
"$tmp/loadgen" run -label "direct@saturation" -url "$fake" -rate 0 -workers 64 -duration "$dur"
"$tmp/loadgen" run -label "gateway@saturation" -url "http://127.0.0.1:$port/v1" -rate 0 -workers 64 -duration "$dur" -pid $gw
