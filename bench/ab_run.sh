#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# A/B of two builds of the CLI on the 130m preset (random f32 weights loaded as f32, bf16 and
# q4_0): decode tok/s and prefill tok/s at T = 512, 1 and 2 threads, the two binaries alternated
# run by run and the whole sweep repeated ROUNDS times, so that on a shared machine every
# comparison is between adjacent runs. Prints one JSON line per run, prefixed by its labels.
#   bench/ab_run.sh BEFORE_CLI AFTER_CLI [model-dir]
set -euo pipefail
before=$1
after=$2
models=${3:-models}
mkdir -p "$models"
[ -f "$models/130m-f32/config.json" ] || "$before" make-model --preset 130m --out "$models/130m-f32"

echo "## machine"; lscpu | grep -E 'Model name|^CPU\(s\)|L2|L3'; date -u
for round in $(seq "${ROUNDS:-3}"); do
  for dtype in f32 bf16 q4_0; do
    for threads in 1 2; do
      for side in before after; do
        cli=$before
        [ "$side" = after ] && cli=$after
        echo -n "round=$round side=$side dtype=$dtype threads=$threads: "
        "$cli" bench -m "$models/130m-f32" --dtype "$dtype" --prompt-len 512 --gen-len 64 --threads "$threads" \
          --repeats 3 --step-tokens 16 --json
      done
    done
  done
done
date -u
