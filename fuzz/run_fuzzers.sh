#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Runs libFuzzer harnesses from a MB_BUILD_FUZZERS build for a bounded time each.
#   fuzz/run_fuzzers.sh BUILD_DIR SECONDS [HARNESS...]   (default: every harness)
# Each harness starts from its committed seeds (fuzz/corpus/<name>) plus whatever earlier runs
# left in BUILD_DIR/fuzz-corpus/<name>, where new inputs go (the committed seeds stay as they
# are). Crashes, leaks, timeouts and out-of-memory inputs are written to
# BUILD_DIR/fuzz-artifacts/ and make the script fail; each run's log ends with libFuzzer's
# final statistics (BUILD_DIR/fuzz-logs/<name>.log).
set -euo pipefail
cd "$(dirname "$0")/.."

if [ $# -lt 2 ]; then
  echo "usage: $0 BUILD_DIR SECONDS [HARNESS...]" >&2
  exit 2
fi
build=$1
seconds=$2
shift 2
harnesses=("$@")
if [ ${#harnesses[@]} -eq 0 ]; then
  harnesses=(safetensors safetensors_index config tokenizer tokenizer_pipeline state_file slot_file npy torch_checkpoint torch_pickle chat_template gguf http_request embeddings_request gbnf agent_request)
fi

dict_of() {
  case $1 in
    safetensors | safetensors_index) echo safetensors ;;
    tokenizer_pipeline) echo tokenizer ;;
    *) echo "$1" ;;
  esac
}

mkdir -p "$build/fuzz-artifacts" "$build/fuzz-logs"
failed=()
for name in "${harnesses[@]}"; do
  binary="$build/fuzz/${name}_fuzzer"
  work="$build/fuzz-corpus/$name"
  log="$build/fuzz-logs/$name.log"
  mkdir -p "$work"
  start=$(date +%s)
  # -timeout: one input taking over 10 s is a hang; -rss_limit_mb: more than 2 GiB is an
  # unbounded allocation. Both count as failures, like crashes and leaks.
  if "$binary" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
    -dict="fuzz/dicts/$(dict_of "$name").dict" -artifact_prefix="$build/fuzz-artifacts/$name-" \
    "$work" "fuzz/corpus/$name" >"$log" 2>&1; then
    status=ok
  else
    status=FAILED
    failed+=("$name")
  fi
  runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || true)
  cov=$(grep -o 'cov: [0-9]* ft: [0-9]*' "$log" | tail -1 || true)
  echo "$name: $status in $(($(date +%s) - start)) s, ${runs:-?} runs, ${cov:-no coverage line}, corpus $(ls "$work" | wc -l) files"
done

if [ ${#failed[@]} -gt 0 ]; then
  for name in "${failed[@]}"; do
    echo "== $name: last lines of $build/fuzz-logs/$name.log ==" >&2
    tail -n 60 "$build/fuzz-logs/$name.log" >&2
  done
  echo "fuzzing failed: ${failed[*]} (inputs in $build/fuzz-artifacts/)" >&2
  exit 1
fi
