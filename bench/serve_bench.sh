#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Serving benchmark: starts `mambacpp serve` on the 130m preset (a random bf16 checkpoint made
# once in models/m130-serve) on a free loopback port, runs bench/serve_bench.py against it
# (aggregate decode tok/s with 1/4/8/16 streams, step latency p50/p99, time to first token of a
# follow-up chat turn after a 2,000-token conversation, cached vs cold), then stops the server.
#
#   bench/serve_bench.sh [BUILD_DIR] [-- serve_bench.py options]
#   e.g. bench/serve_bench.sh build -- --tokens 64 --json
# Environment: MODEL (checkpoint folder), THREADS (-t, default 0 = all cores), PRESET (130m),
# SERVE_ARGS (more `serve` options, e.g. "--dtype q4_k --cache-mb 1024").
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
shift || true
[ "${1:-}" = "--" ] && shift
cli="$build/mambacpp"
preset=${PRESET:-130m}
model=${MODEL:-models/m$preset-serve}
if [ ! -f "$model/config.json" ]; then
  "$cli" make-model --out "$model" --preset "$preset" --dtype bf16
fi
log=$(mktemp -d)/serve.log
OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-PASSIVE} "$cli" serve -m "$model" --host 127.0.0.1 --port 0 \
  -np 16 -t "${THREADS:-0}" --max-queue 64 ${SERVE_ARGS:-} >"$log" 2>&1 &
server=$!
trap 'kill "$server" 2>/dev/null || true' EXIT
port=""
for _ in $(seq 1 600); do
  port=$(sed -n 's/.*listening on http:\/\/127\.0\.0\.1:\([0-9]*\).*/\1/p' "$log")
  [ -n "$port" ] && curl -sf "http://127.0.0.1:$port/health" >/dev/null 2>&1 && break
  kill -0 "$server" 2>/dev/null || { cat "$log" >&2; exit 1; }
  sleep 0.2
done
echo "serve_bench: $model on port $port, $(nproc) cores, $(date -u +%Y-%m-%dT%H:%MZ)"
python3 bench/serve_bench.py --port "$port" "$@"
kill -TERM "$server"
wait "$server"
trap - EXIT
