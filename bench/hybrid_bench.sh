#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The hybrid table of BENCHMARKS.md (issue 24): random checkpoints shaped as Granite-4.0-H-Micro
# (3B dense), Granite-4.0-H-Tiny (7B MoE, 64 experts, top 6) and Nemotron-H-8B, with the real
# widths, heads, state sizes and vocabularies but FEWER LAYERS (the same mix of layer kinds):
#   micro: 10 of 40 layers (9 Mamba-2 + 1 attention, as 36 + 4), every layer with its SwiGLU MLP
#   tiny:  10 of 40 layers (9 + 1), every layer with its shared MLP and 64 experts
#   nemo:  13 of 52 layers (6 Mamba-2, 6 ReLU^2 MLP, 1 attention, as 24 + 24 + 4)
# so a 2-core machine measures them within the hour; per-token throughput of a layer does not
# depend on the depth, but the share of the LM head does (larger here than in the full models).
#
# For each model and weight type (bf16; Q4_K quantized at load), bench/hybrid_bench loads the
# model once and measures prefill at T = 512 / 2048 / 8192 (attention share from the profile),
# decode at a 512-token context with the bytes a step reads, and the step loop, 1 and 2 threads
# alternating. Then a served follow-up turn after a 2,000-token conversation, cached vs cold
# (bench/serve_bench.sh, bf16, 2 threads). bench/hybrid_table.py renders the tables.
#
#   bench/hybrid_bench.sh [BUILD_DIR] [MODELS_DIR] [OUT_DIR]
# Environment: MODELS_ONLY=1 (make the checkpoints and stop), NAMES ("micro tiny nemo"), PLAN
# (lines "name dtype threads lengths rounds [tag]", default below), FOLLOWUP=0 (skip the served
# follow-up), MICRO / TINY / NEMO (use these checkpoint folders instead of MODELS_DIR's).
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
models=${2:-models}
out=${3:-hybrid-bench-out}
cli=$build/mambacpp
mkdir -p "$models" "$out"

declare -A dir=([micro]=${MICRO:-$models/granite-h-micro-10l} [tiny]=${TINY:-$models/granite-h-tiny-10l}
  [nemo]=${NEMO:-$models/nemotron-h-8b-13l})
make_micro() {
  "$cli" make-model --out "$1" --arch granite-hybrid --d-model 2048 --pattern 'MMMMM*MMMM' --heads 32 \
    --kv-heads 8 --mlp-width 8192 --headdim 64 --d-state 128 --vocab 100352 --attention-multiplier 0.015625 \
    --embedding-multiplier 12 --residual-multiplier 0.22 --logits-scaling 8 --dtype bf16
}
make_tiny() {
  "$cli" make-model --out "$1" --arch granite-hybrid --d-model 1536 --pattern 'MMMMM*MMMM' --heads 12 \
    --kv-heads 4 --mlp-width 1024 --headdim 64 --d-state 128 --vocab 100352 --experts 64 --top-k 6 \
    --expert-width 512 --attention-multiplier 0.0078125 --embedding-multiplier 12 --residual-multiplier 0.22 \
    --logits-scaling 8 --dtype bf16
}
make_nemo() {
  "$cli" make-model --out "$1" --arch nemotron-h --d-model 4096 --pattern 'M-M-M-M*-M-M-' --heads 32 \
    --kv-heads 8 --head-dim 128 --mlp-width 21504 --mamba-heads 128 --headdim 64 --ngroups 8 --d-state 128 \
    --vocab 131072 --untied --dtype bf16
}
names=${NAMES:-micro tiny nemo}
for name in $names; do
  [ -f "${dir[$name]}/config.json" ] || "make_$name" "${dir[$name]}"
done
[ "${MODELS_ONLY:-0}" = 1 ] && exit 0

{
  lscpu | grep -E 'Model name|^CPU\(s\)|Flags' | sed 's/\(Flags:\).*\(avx512f\).*/\1 ... \2 .../'
  date -u +%Y-%m-%dT%H:%MZ
  git rev-parse --short HEAD
  uptime
} >"$out/machine.txt"
"$build/bench/bandwidth_probe" 1024 2 >"$out/bandwidth-start.txt"

# What each model and weight type measures: thread counts, lengths and rounds per length (the
# 2-core machine's hour does not hold every length at both thread counts for every case, so the
# long prefills run where the table shows them). One hybrid_bench call per line loads the model
# once; its output goes to NAME-DTYPE[-TAG].jsonl.
default_plan="micro bf16 1,2 512,2048,8192 3,1,1
micro q4_k 1,2 512,2048 3,1
tiny bf16 1,2 512,2048 3,1
tiny bf16 1 8192 1 long
tiny q4_k 1,2 512,2048 2,1
nemo bf16 1,2 512 1 short
nemo bf16 1 2048,8192 1,1 long
nemo q4_k 1,2 512 1 short
nemo q4_k 1 2048 1 long"
while read -r name dtype threads lengths rounds tag; do
  case " $names " in *" $name "*) ;; *) continue ;; esac
  echo "hybrid_bench: $name $dtype threads $threads T $lengths ($(uptime | sed 's/.*load/load/'))" >&2
  "$build/bench/hybrid_bench" --model "${dir[$name]}" --dtype "$dtype" --threads "$threads" \
    --lengths "$lengths" --rounds "$rounds" --gen-len 16 --step-tokens 16 >"$out/$name-$dtype${tag:+-$tag}.jsonl"
  uptime >>"$out/load.txt"
done <<<"${PLAN:-$default_plan}"

if [ "${FOLLOWUP:-1}" = 1 ]; then
  for name in $names; do
    echo "serve_bench: $name follow-up ($(uptime | sed 's/.*load/load/'))" >&2
    MODEL=${dir[$name]} THREADS=2 SERVE_ARGS="--dtype bf16 --cache-mb 1024" bench/serve_bench.sh "$build" -- \
      --streams "" --context 2000 --repeats "$([ "$name" = nemo ] && echo 2 || echo 3)" --json | sed -n '/^{/,$p' >"$out/$name-followup.json"
  done
fi
"$build/bench/bandwidth_probe" 1024 2 >"$out/bandwidth-end.txt"
python3 bench/hybrid_table.py "$out"
