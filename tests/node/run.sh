#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The official OpenAI and Anthropic Node SDKs against `mambacpp serve` (issue 44, item 6): makes a
# tiny random checkpoint with the Granite-4.0 chat template (a template with a tool format), starts
# the server on a free port with an API key, and runs every *.test.mjs here with node's built-in
# test runner. Exits 77 (ctest's SKIP_RETURN_CODE for node_sdk_test) with a message saying what is
# missing when node or the SDKs (`npm ci` in tests/node) are absent, so CI says clearly that it
# skipped. $MB_CLI is the command that starts the CLI (ctest sets it; it may start with an
# emulator), else the default build folder's binary. Extra arguments go to `node --test`
# (e.g. --test-name-pattern=embeddings).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)

skip() {
  echo "node_sdk_test SKIPPED: $*" >&2
  exit 77
}
command -v node >/dev/null 2>&1 || skip "node is not installed (Debian: apt-get install nodejs npm, then npm ci in tests/node)"
node_major=$(node -p 'process.versions.node.split(".")[0]')
# node --test with --test-concurrency and the SDKs' fetch need node 20.
[ "$node_major" -ge 20 ] || skip "node $(node --version) is older than 20, which the test runner and the SDKs need"
for package in openai @anthropic-ai/sdk; do
  [ -f "$here/node_modules/$package/package.json" ] ||
    skip "the npm package $package is not installed: run 'npm ci' in tests/node (it needs the npm registry)"
done

read -r -a cli <<<"${MB_CLI:-$here/../../build/mambacpp}"
work=$(mktemp -d "${TMPDIR:-/tmp}/mambacpp_node_XXXXXX")
server_pid=""
cleanup() {
  if [ -n "$server_pid" ]; then kill "$server_pid" 2>/dev/null || true; wait "$server_pid" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT

"${cli[@]}" make-model --out "$work/model" --d-model 32 --n-layer 2 --vocab 301 --seed 3 \
  --chat-template "$here/../data/chat_templates/granite-4.0.jinja" >/dev/null 2>"$work/make.txt" ||
  { cat "$work/make.txt" >&2; exit 1; }

api_key="node-sdk-test-key"
# Created here: the background job opens its redirections only once it runs.
: >"$work/out.txt"
"${cli[@]}" serve -m "$work/model" --host 127.0.0.1 --port 0 --api-key "$api_key" \
  >"$work/out.txt" 2>"$work/err.txt" &
server_pid=$!
port=""
for _ in $(seq 1 600); do
  port=$(sed -n 's|.*listening on http://127\.0\.0\.1:\([0-9]*\).*|\1|p' "$work/out.txt" | head -1)
  [ -n "$port" ] && break
  if ! kill -0 "$server_pid" 2>/dev/null; then
    echo "mambacpp serve exited before listening:" >&2
    cat "$work/err.txt" >&2
    exit 1
  fi
  sleep 0.1
done
[ -n "$port" ] || { echo "mambacpp serve printed no port in 60 s:" >&2; cat "$work/err.txt" >&2; exit 1; }

status=0
MB_BASE_URL="http://127.0.0.1:$port" MB_API_KEY="$api_key" \
  node --test --test-concurrency=1 --test-timeout=120000 "$@" "$here"/*.test.mjs || status=$?
if [ "$status" -ne 0 ]; then
  echo "--- the server's stderr (last 40 lines) ---" >&2
  tail -40 "$work/err.txt" >&2
fi
exit "$status"
