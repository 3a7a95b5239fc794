#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Produces the Mamba-2 figures of BENCHMARKS.md on this machine: read bandwidth; prefill of a
# 130m-shaped Mamba-2 (d_model 768, 24 layers, d_state 128, headdim 64) in the sequential and the
# chunked SSD form at T = 128/512/2048 with 1 and 2 threads, against the step loop; decode; the
# prefill phase breakdown; the scan op's two forms; and decode of a 2.7b-shaped model in bf16.
#   bench/mamba2_run_all.sh [build-dir] [model-dir]
set -euo pipefail
build=${1:-build}
models=${2:-models}
cli=$build/mambacpp
mkdir -p "$models"
for dtype in f32 bf16; do
  [ -f "$models/m2-130m-$dtype/config.json" ] ||
    "$cli" make-model --arch mamba2 --preset 130m --dtype "$dtype" --out "$models/m2-130m-$dtype"
done
[ -f "$models/m2-2.7b-bf16/config.json" ] ||
  "$cli" make-model --arch mamba2 --preset 130m --d-model 2560 --n-layer 64 --dtype bf16 --out "$models/m2-2.7b-bf16"

echo "## machine"; lscpu | grep -E 'Model name|^CPU\(s\)|L2|L3'; date -u
echo "## bandwidth"; "$build/bench/bandwidth_probe" 1024 2

echo "## 130m-shaped Mamba-2, bf16: prefill (sequential and chunked SSD) vs the step loop, decode"
for threads in 1 2; do
  for T in 128 512 2048; do
    for scan in sequential chunked; do
      echo -n "bf16 threads=$threads T=$T scan=$scan: "
      "$cli" bench -m "$models/m2-130m-bf16" --prompt-len "$T" --gen-len 32 --threads "$threads" --repeats 3 \
        --step-tokens 32 --scan "$scan" --ssd-chunk 64 --json
    done
  done
done
echo "## 130m-shaped Mamba-2, f32, T=512"
for threads in 1 2; do
  echo -n "f32 threads=$threads T=512: "
  "$cli" bench -m "$models/m2-130m-f32" --prompt-len 512 --gen-len 32 --threads "$threads" --repeats 3 \
    --step-tokens 32 --json
done

echo "## prefill phases (bf16, T=512, 1 thread)"
"$cli" bench -m "$models/m2-130m-bf16" --prompt-len 512 --gen-len 1 --threads 1 --repeats 3 --step-tokens 1 --profile

echo "## the scan op alone (one layer, 1 thread): sequential vs chunked SSD"
"$build/bench/mamba2_op_bench" --lengths 64,512,2048 --chunks 32,64,128,256 --repeats 3

echo "## 2.7b-shaped Mamba-2 (d_model 2560, 64 layers), bf16: decode"
for threads in 1 2; do
  echo -n "2.7b bf16 threads=$threads: "
  "$cli" bench -m "$models/m2-2.7b-bf16" --prompt-len 16 --gen-len 16 --threads "$threads" --repeats 3 \
    --step-tokens 1 --json
done
