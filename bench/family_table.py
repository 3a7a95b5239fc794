#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
# Renders bench/family_bench.sh's output folder as BENCHMARKS.md's table: per GGUF file and thread
# count, ours (`mambacpp bench --json`: medians of its repeats) beside llama-bench's (the median of
# its samples), prefill at T = 512 and 2048 and decode, with the ratio ours / llama.cpp.
import json
import pathlib
import statistics
import sys

LABELS = {
    "falcon": "Falcon-H1-1.5B (6 of 24 layers)",
    "jamba": "Jamba-3B-like (6 layers, attention at 4)",
    "zamba2": "Zamba2-2.7B (12 of 54 layers, 2 hybrid)",
    "lfm2": "LFM2-1.2B (8 of 16 layers, 3 attention)",
    "bamba": "Bamba-9B (3 of 32 layers, 1 attention)",
}


def ours(out, tag, length):
    path = out / f"ours-{tag}-p{length}.json"
    if not path.exists() or not path.read_text().strip():
        return None
    return json.loads(path.read_text())


def llama(out, tag):
    path = out / f"llama-{tag}.json"
    if not path.exists() or not path.read_text().strip():
        return {}
    runs = {}
    try:
        results = json.loads(path.read_text())
    except json.JSONDecodeError:  # a run still writing, or stopped
        return {}
    for r in results:
        key = f"pp{r['n_prompt']}" if r["n_gen"] == 0 else f"tg{r['n_gen']}"
        runs[key] = statistics.median(r["samples_ts"])
    return runs


def cell(a, b):
    if a is None:
        return "-"
    if b is None:
        return f"{a:.1f}"
    return f"{a:.1f} / {b:.1f} = **{a / b:.2f}x**"


def main():
    out = pathlib.Path(sys.argv[1])
    print("| checkpoint | weights | threads | prefill T = 512 | prefill T = 2048 | decode |")
    print("|---|---|---|---|---|---|")
    for name in LABELS:
        for wtype in ("bf16", "q4_k_m"):
            for t in (1, 2):
                tag = f"{name}-{wtype}-t{t}"
                p512, p2048 = ours(out, tag, 512), ours(out, tag, 2048)
                if p512 is None:
                    continue
                ll = llama(out, tag)
                cells = [
                    cell(p512["prefill_tok_s"], ll.get("pp512")),
                    cell(p2048["prefill_tok_s"], ll.get("pp2048")) if p2048 else "-",
                    cell(p512["decode_tok_s"], ll.get("tg32")),
                ]
                print(f"| {LABELS[name]} | {wtype} | {t} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
