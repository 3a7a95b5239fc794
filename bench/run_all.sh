#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Produces every figure of BENCHMARKS.md on this machine: read bandwidth, decode and prefill
# throughput of the 130m preset (f32 and bf16, 1 and 2 threads), the prefill chunk-size curve,
# a per-phase breakdown, and the GEMM comparison against OpenBLAS.
#   bench/run_all.sh [build-dir] [model-dir]
set -euo pipefail
build=${1:-build}
models=${2:-models}
cli=$build/mambacpp
mkdir -p "$models"
[ -f "$models/m130-f32/config.json" ] || "$cli" make-model --out "$models/m130-f32" --preset 130m --dtype f32
[ -f "$models/m130-bf16/config.json" ] || "$cli" make-model --out "$models/m130-bf16" --preset 130m --dtype bf16

echo "## machine"; lscpu | grep -E 'Model name|^CPU\(s\)|L2|L3' ; date -u
echo "## bandwidth"; "$build/bench/bandwidth_probe" 1024 2

echo "## decode and prefill (medians of 5 after a warm-up)"
for dtype in f32 bf16; do
  for threads in 1 2; do
    for T in 128 512 2048; do
      echo -n "$dtype threads=$threads T=$T: "
      "$cli" bench -m "$models/m130-$dtype" --prompt-len "$T" --gen-len 32 --threads "$threads" --repeats 5 \
        --step-tokens 32 --json
    done
  done
done

echo "## bf16 at T=512, the case closest to the 10x target: five more runs per thread count"
for run in 1 2 3 4 5; do
  for threads in 1 2; do
    echo -n "bf16 threads=$threads T=512 run=$run: "
    "$cli" bench -m "$models/m130-bf16" --prompt-len 512 --gen-len 16 --threads "$threads" --repeats 7 \
      --step-tokens 32 --json
  done
done

echo "## chunk-size curve (f32, T=2048, 1 thread)"
for chunk in 16 32 64 128 256 512 1024 2048; do
  echo -n "chunk=$chunk: "
  "$cli" bench -m "$models/m130-f32" --prompt-len 2048 --gen-len 1 --threads 1 --repeats 3 --step-tokens 1 \
    --chunk "$chunk" --json
done

for dtype in f32 bf16; do
  echo "## prefill phases ($dtype, T=512, 1 thread)"
  "$cli" bench -m "$models/m130-$dtype" --prompt-len 512 --gen-len 1 --threads 1 --repeats 3 --step-tokens 1 --profile
done

echo "## GEMM vs OpenBLAS (rows 512; OpenBLAS forced to its AVX-512 kernels)"
for dtype in f32 bf16; do
  for threads in 1 2; do
    OPENBLAS_CORETYPE=SkylakeX "$build/bench/gemm_bench" 512 "$threads" "$dtype"
  done
done
