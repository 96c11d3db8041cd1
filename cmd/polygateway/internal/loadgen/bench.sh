#!/usr/bin/env bash
# The gateway against calling the fake upstream directly, on loopback, each
# side in its own process (fake upstreams, gateway, load generator): open-loop
# latency at fixed rates, the closed-loop maximum, CPU per request and per
# relayed chunk (from /proc/<pid>/stat) and the time to first token of a
# stream, each as a ratio to direct in the same run. Usage (from the
# repository root; `make bench-gateway` runs it):
#
#   bash cmd/polygateway/internal/loadgen/bench.sh [loadgen bench flags]
#
# GW_DIR=/path/to/another/checkout measures that tree's gateway with this
# load generator (e.g. an export of an older commit). Every run is bounded
# (4 s measured after 1 s of warm-up by default: about a minute in all) and
# everything stops by itself.
set -euo pipefail
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

go build -o "$tmp/loadgen" ./cmd/polygateway/internal/loadgen
(cd "${GW_DIR:-.}" && go build -o "$tmp/polygateway" ./cmd/polygateway)
timeout 300 "$tmp/loadgen" bench -gateway "$tmp/polygateway" "$@"
