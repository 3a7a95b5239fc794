#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The issue-42 families' table of BENCHMARKS.md: random checkpoints with the per-layer shapes of
# Falcon-H1-1.5B, a Jamba-3B, Zamba2-2.7B, Bamba-9B and LFM2-1.2B but FEWER LAYERS (same mix of
# layer kinds), written as GGUF files in bf16 and Q4_K_M by `mambacpp quantize`; each file is
# measured by `mambacpp bench` and, where llama.cpp has the architecture (all but Zamba2),
# by llama.cpp's `llama-bench` on the same file, the two engines alternating per (file, threads).
#
#   bench/family_bench.sh [BUILD_DIR] [MODELS_DIR] [OUT_DIR]
# Environment: LLAMA_BENCH (default /work/llama.cpp/build/bin/llama-bench; empty: ours only),
# NAMES ("falcon jamba zamba2 lfm2 bamba"), THREADS ("1 2"), TYPES ("bf16 q4_k_m").
# Prefill: T = 512 (3 repeats; llama-bench 2) and T = 2048 (1; llama-bench 2); Bamba: T = 512 only, 1 repeat each, chunks of 512 in both
# engines (llama-bench's default ubatch is 512). Decode: 32 tokens, ours after the 512-token
# prompt, llama-bench's tg32 after an empty context (the attention layers read 512 more keys in
# ours). bench/family_table.py renders the medians.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
models=${2:-models}
out=${3:-family-bench-out}
cli=$build/mambacpp
llama=${LLAMA_BENCH-/work/llama.cpp/build/bin/llama-bench}
mkdir -p "$models" "$out"

# Falcon-H1-1.5B (HF's FalconH1 docs table: 24 layers of 2048, 8/2 heads of 128, 48 Mamba heads
# of 64, d_state 256; intermediate 4096 and vocab 65536 assumed): 6 of 24 layers.
make_falcon() {
  "$cli" make-model --out "$1" --arch falcon-h1 --d-model 2048 --n-layer 6 --vocab 65536 --dtype bf16 \
    --set num_attention_heads=8 --set num_key_value_heads=2 --set head_dim=128 --set intermediate_size=4096 \
    --set mamba_d_ssm=3072 --set mamba_n_heads=48 --set mamba_d_head=64 --set mamba_n_groups=1 \
    --set mamba_d_state=256 --set mamba_chunk_size=128
}
# A Jamba-3B (no copy of Jamba Reasoning 3B's config was found: hidden 2560, 20/4 heads of 128,
# MLP 8192, Mamba-1 d_state 16 expand 2, vocab 65536, dense, attention at offset 4 of period 8,
# are assumptions): 6 layers, attention at 4.
make_jamba() {
  "$cli" make-model --out "$1" --arch jamba --d-model 2560 --n-layer 6 --vocab 65536 --dtype bf16 \
    --set num_attention_heads=20 --set num_key_value_heads=4 --set intermediate_size=8192 \
    --set attn_layer_period=8 --set attn_layer_offset=4 --set num_experts=1 --set num_experts_per_tok=1 \
    --set mamba_dt_rank=160
}
# Zamba2-2.7B (specs/hybrids-2.md 4.1: hidden 2560, Mamba-2 d_state 64 of 80 heads of 64, two shared
# blocks of 32 heads of 160 over concat(hidden, embedding), MLP 10240 with LoRA rank 128, vocab
# 32000): 12 of 54 layers, the 2 hybrid ones using the 2 shared blocks (9 of 54 in the real one).
make_zamba2() {
  "$cli" make-model --out "$1" --arch zamba2 --d-model 2560 --n-layer 12 --vocab 32000 --dtype bf16 \
    --set 'layers_block_type=["mamba","mamba","mamba","mamba","mamba","hybrid","mamba","mamba","mamba","mamba","mamba","hybrid"]' \
    --set num_attention_heads=32 --set intermediate_size=10240 --set adapter_rank=128 \
    --set use_shared_attention_adapter=false --set use_mem_rope=false --set mamba_d_state=64 --set n_mamba_heads=80
}
# LFM2-1.2B (hidden 2048, 16 layers of which 6 attention, 32/8 heads, MLP 8192 after the
# auto-adjust of 12288, vocab 65536, tied): 8 of 16 layers, 3 attention.
make_lfm2() {
  "$cli" make-model --out "$1" --arch lfm2 --d-model 2048 --n-layer 8 --vocab 65536 --dtype bf16 \
    --set 'layer_types=["conv","conv","full_attention","conv","conv","full_attention","conv","full_attention"]' \
    --set num_attention_heads=32 --set num_key_value_heads=8 --set block_ff_dim=12288
}
# Bamba-9B (hidden 4096, 32/8 heads, 128 Mamba-2 heads of 64, d_state 128, MLP 14336, vocab
# 128256): 3 of 32 layers (Mamba, attention, Mamba).
make_bamba() {
  "$cli" make-model --out "$1" --arch bamba --d-model 4096 --n-layer 3 --vocab 128256 --dtype bf16 \
    --set 'attn_layer_indices=[1]' --set num_attention_heads=32 --set num_key_value_heads=8 \
    --set intermediate_size=14336 --set mamba_n_heads=128 --set mamba_d_head=64 --set mamba_d_state=128 \
    --set mamba_chunk_size=256
}
names=${NAMES:-falcon jamba zamba2 lfm2 bamba}
types=${TYPES:-bf16 q4_k_m}
for name in $names; do
  dir=$models/$name
  [ -f "$dir/config.json" ] || "make_$name" "$dir"
  for type in $types; do
    [ -f "$models/$name-$type.gguf" ] || "$cli" quantize --type "$type" "$dir" "$models/$name-$type.gguf"
  done
done
[ "${MODELS_ONLY:-0}" = 1 ] && exit 0

{
  lscpu | grep -E 'Model name|^CPU\(s\)'
  date -u +%Y-%m-%dT%H:%MZ
  git rev-parse --short HEAD
  [ -n "$llama" ] && git -C "$(dirname "$llama")/../.." rev-parse --short HEAD 2>/dev/null || true
} >"$out/machine.txt"

for name in $names; do
  lengths="512 2048"
  [ "$name" = bamba ] && lengths=512
  for type in $types; do
    file=$models/$name-$type.gguf
    for t in ${THREADS:-1 2}; do
      tag=$name-$type-t$t
      echo "$tag ($(uptime | sed 's/.*load/load/'))" >&2
      uptime >>"$out/load.txt"
      for len in $lengths; do
        reps=$([ "$len" = 512 ] && [ "$name" != bamba ] && echo 3 || echo 1)
        gen=$([ "$len" = 512 ] && echo 32 || echo 1)
        [ -s "$out/ours-$tag-p$len.json" ] && continue  # a rerun keeps what a stopped run measured
        "$cli" bench -m "$file" --prompt-len "$len" --gen-len "$gen" --step-tokens 1 -t "$t" \
          --repeats "$reps" --chunk 512 --json >"$out/ours-$tag-p$len.json"
      done
      if [ -n "$llama" ] && [ "$name" != zamba2 ] && [ ! -s "$out/llama-$tag.json" ]; then
        "$llama" -m "$file" -t "$t" -p "${lengths// /,}" -n 32 -r "$([ "$name" = bamba ] && echo 1 || echo 2)" -b 2048 -ub 512 -o json \
          >"$out/llama-$tag.json" 2>"$out/llama-$tag.err" || echo "llama-bench failed on $tag" >&2
      fi
    done
  done
done
python3 bench/family_table.py "$out"
