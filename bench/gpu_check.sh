#!/usr/bin/env bash
# The GPU check of issue 9, in one script for a machine with a GPU (it also runs on lavapipe):
# configures and builds with the Vulkan backend, runs the Vulkan test suite on the first device,
# then benchmarks Mamba-1 on it (130m and a 370m-shaped checkpoint, bf16 and f32, decode at
# batch 1 and 8, prefill at T = 512 and 4096), and writes everything to a report.
#   bench/gpu_check.sh [build-dir] [report-file]
# Environment:
#   MB_GPU_CHECK_SMALL=1  the lavapipe smoke test: the tiny preset, T = 64 and 128, few tokens,
#                         no 370m model (a CPU device would need an hour for the full sizes)
#   MB_GPU_CHECK_DEVICE   the device flag (default vulkan:0)
#   MB_GPU_CHECK_SKIP_BUILD=1  use an existing build
# On a lent machine without the build packages: build here (`cmake -B build-gpu -DMB_VULKAN=ON
# -DMB_SERVER=OFF -DMB_BUILD_BENCH=OFF`, targets mambacpp and test_vulkan), copy build-gpu/mambacpp
# and build-gpu/tests/test_vulkan into a git-ignored folder of the same shape, carry it with the
# Vulkan loader's and libutf8proc's .deb files, unpack those there (dpkg -x, ldconfig), and run
# with MB_GPU_CHECK_SKIP_BUILD=1 and that folder as build-dir.
# Bounded at 10 minutes: each step has its own timeout, never past the overall deadline, and a
# step that times out or fails is reported as such and does not stop the later ones. The report
# ends with a table of the benchmark figures.
set -uo pipefail
build=${1:-build-gpu}
report=${2:-gpu_check_report.txt}
device=${MB_GPU_CHECK_DEVICE:-vulkan:0}
small=${MB_GPU_CHECK_SMALL:-0}
models=$build/gpu_check_models
cli=$build/mambacpp
start=$(date +%s)
exec > >(tee "$report") 2>&1

deadline=$(( start + ${MB_GPU_CHECK_SECONDS:-580} ))
step() { echo; echo "## $*  (t=$(( $(date +%s) - start )) s)"; }
# Runs a command under a timeout (cut to what is left before the deadline); reports a timeout or
# a failure instead of stopping the script.
bounded() {
  local seconds=$1; shift
  local left=$(( deadline - $(date +%s) ))
  [ "$left" -lt "$seconds" ] && seconds=$left
  if [ "$seconds" -le 0 ]; then echo "SKIPPED (out of time): $*"; return 0; fi
  timeout "$seconds" "$@"
  local rc=$?
  if [ $rc -eq 124 ]; then echo "TIMEOUT after ${seconds}s: $*"; elif [ $rc -ne 0 ]; then echo "FAILED (rc=$rc): $*"; fi
  return 0
}

step "machine"
date -u
uname -m
nproc
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv
git -C "$(dirname "$0")/.." log --oneline -1 2>/dev/null

if [ "${MB_GPU_CHECK_SKIP_BUILD:-0}" != 1 ]; then
  step "build (Release, MB_VULKAN=ON)"
  jobs=$(nproc)
  [ "$small" = 1 ] && jobs=2
  bounded 360 cmake -S "$(dirname "$0")/.." -B "$build" -DCMAKE_BUILD_TYPE=Release -DMB_VULKAN=ON -DMB_BUILD_BENCH=OFF
  bounded 360 nice cmake --build "$build" -j"$jobs" --target mambacpp test_vulkan
fi
[ -x "$cli" ] || { echo "no CLI at $cli; stopping"; exit 1; }

step "devices"
"$cli" devices

step "Vulkan test suite (validation layer on where installed)"
export MB_CLI="$(realpath "$cli")"  # the CLI tests find the CLI here even in a copied build
bounded 240 "$build/tests/test_vulkan" --gtest_brief=1

# Decode at batch 1 and 8 after the short prompt; prefill at the short and the long prompt.
if [ "$small" = 1 ]; then
  presets="tiny"; short=64; long=128; gen=8; repeats=1
else
  presets="130m 370m"; short=512; long=4096; gen=64; repeats=3
fi
mkdir -p "$models"
for preset in $presets; do
  for dtype in bf16 f32; do
    dir=$models/$preset-$dtype
    [ -f "$dir/config.json" ] || bounded 120 "$cli" make-model --out "$dir" --preset "$preset" --dtype "$dtype"
    step "bench $preset $dtype on $device"
    for run in "$short 1 $gen" "$short 8 $gen" "$long 1 4"; do
      set -- $run
      echo -n "RESULT $preset $dtype T=$1 batch=$2: "
      bounded 150 "$cli" bench -m "$dir" --device "$device" --prompt-len "$1" --batch "$2" --gen-len "$3" \
        --repeats "$repeats" --step-tokens 16 --json
    done
  done
done

step "summary"
if command -v python3 >/dev/null; then
  python3 - "$report" <<'PY'
import json, sys
print(f"{'model':<6} {'dtype':<5} {'T':>5} {'batch':>5} {'prefill tok/s':>14} {'us/token':>9} {'decode tok/s':>13}")
for line in open(sys.argv[1]):
    if not line.startswith("RESULT ") or "{" not in line:
        continue
    head, body = line.split(": ", 1)
    _, preset, dtype, t, batch = head.split()
    try:
        r = json.loads(body)
    except ValueError:
        continue
    prefill = r["prefill_tok_s"]
    print(f"{preset:<6} {dtype:<5} {t[2:]:>5} {batch[6:]:>5} {prefill:>14.1f} {1e6 / prefill:>9.1f} {r['decode_tok_s']:>13.1f}")
PY
fi

step "done in $(( $(date +%s) - start )) s; report: $report"
