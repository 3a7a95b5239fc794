#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The quantized-weight figures of BENCHMARKS.md: for the 130m preset (random f32 weights, loaded
# as f32, bf16, q8_0, q4_0 and q4_k) with 1 and 2 threads, decode tok/s, prefill tok/s at T = 512,
# weight bytes streamed per decode step and load time (which includes quantizing); then each
# quantized load's accuracy against the f32 load (max logit difference, KL divergence, top-1
# agreement over 256 positions).
#   bench/quant_run_all.sh [build-dir] [model-dir]
set -euo pipefail
build=${1:-build}
models=${2:-models}
cli=$build/mambacpp
mkdir -p "$models"
[ -f "$models/130m-f32/config.json" ] || "$cli" make-model --preset 130m --out "$models/130m-f32"

echo "## machine"; lscpu | grep -E 'Model name|^CPU\(s\)|L2|L3|Flags' | sed 's/Flags:.*\(avx512_vnni\).*/VNNI: yes/'; date -u
echo "## 130m preset: decode, prefill at T=512, bytes per token, load time"
# ROUNDS (default 1) repeats the whole sweep, dtypes interleaved, so that on a shared machine a
# median over rounds can be taken (each bench line is already the median of its --repeats).
for round in $(seq "${ROUNDS:-1}"); do
  for threads in 1 2; do
    for dtype in f32 bf16 q8_0 q4_0 q4_k; do
      echo -n "round=$round $dtype threads=$threads: "
      "$cli" bench -m "$models/130m-f32" --dtype "$dtype" --prompt-len 512 --gen-len 64 --threads "$threads" \
        --repeats 3 --step-tokens 16 --json
    done
  done
done
echo "## accuracy against the f32 load"
for dtype in q8_0 q4_0 q4_k; do
  "$cli" quant-accuracy -m "$models/130m-f32" --dtype "$dtype" --positions 256 --threads 2 --json
done
