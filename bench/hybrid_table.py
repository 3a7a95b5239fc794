#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Renders bench/hybrid_bench.sh's results (a folder) as the Markdown tables of BENCHMARKS.md:
medians over the rounds of each (model, dtype, threads, prompt length), the decode's read bytes
against the probe's bandwidth, the state sizes, and the served follow-up turn.

Usage: hybrid_table.py OUT_DIR"""

import glob
import json
import os
import re
import statistics
import sys

NAMES = {"micro": "H-Micro (10 of 40 layers)", "tiny": "H-Tiny MoE (10 of 40 layers)",
         "nemo": "Nemotron-H-8B (13 of 52 layers)"}


def bandwidth(out):
    """Read bandwidth by thread count: the mean of the probe's runs (bandwidth*.txt, in name order)."""
    found = {}
    for path in sorted(glob.glob(os.path.join(out, "bandwidth*.txt"))):
        for line in open(path):
            m = re.match(r"threads (\d+): read bandwidth ([\d.]+) GB/s", line)
            if m:
                found.setdefault(int(m.group(1)), []).append(float(m.group(2)))
    return {t: statistics.mean(v) for t, v in found.items()}, found


def load_runs(out):
    runs = {}
    for path in sorted(glob.glob(os.path.join(out, "*-*.jsonl"))):
        name, dtype = os.path.basename(path)[:-6].split("-")[:2]  # NAME-DTYPE[-TAG].jsonl
        for line in open(path):
            if line.startswith("{"):
                r = json.loads(line)
                runs.setdefault((name, dtype, r["threads"], r["prompt_len"]), []).append(r)
    return runs


def med(rows, key, default=0.0):
    values = [r[key] for r in rows if key in r]
    return statistics.median(values) if values else default


def share(rows, kind):
    return statistics.median([r["prefill_block_shares"].get(kind, 0.0) for r in rows])


def main():
    out = sys.argv[1]
    bw, probes = bandwidth(out)
    runs = load_runs(out)
    models = [n for n in NAMES if any(k[0] == n for k in runs)]
    dtypes = sorted({k[1] for k in runs})
    threads = sorted({k[2] for k in runs})
    lengths = sorted({k[3] for k in runs})
    print("Read bandwidth (bandwidth_probe 1024 2, each run): " +
          "; ".join(f"{t} thread{'s' if t > 1 else ''} {' / '.join(f'{v:.2f}' for v in probes[t])} GB/s"
                    for t in sorted(probes)))
    print()
    print("Prefill tok/s (median of the rounds; runs per length in brackets), the attention blocks' share of it "
          "(norm, q/k/v and o products, the attention core), the core alone in parentheses:")
    print()
    print("| model | weights | threads | " + " | ".join(f"T = {t}" for t in lengths) +
          " | step loop tok/s | prefill / step loop at T = %d |" % lengths[0])
    print("|---|---|---|" + "---|" * len(lengths) + "---|---|")
    for n in models:
        for d in dtypes:
            for t in threads:
                if not any(k[:3] == (n, d, t) for k in runs):
                    continue
                cells = []
                for T in lengths:
                    rows = runs.get((n, d, t, T), [])
                    if not rows:
                        cells.append("-")
                        continue
                    cells.append(f"{med(rows, 'prefill_tok_s'):.1f} [{len(rows)}]: attn "
                                 f"{100 * share(rows, 'attention'):.1f} % "
                                 f"({100 * med(rows, 'prefill_attention_core_share'):.1f} %)")
                first = runs.get((n, d, t, lengths[0]), [])
                print(f"| {NAMES[n]} | {d} | {t} | " + " | ".join(cells) +
                      f" | {med(first, 'step_prefill_tok_s'):.2f} | {med(first, 'prefill_speedup_vs_step'):.1f}x |")
    print()
    print(f"Decode at a {lengths[0]}-token context (16 tokens per round, median of the rounds). Bytes per step: the "
          "packed matrices a step reads (MoE: the router, shared MLP and 6 of 64 experts per layer), the KV "
          "read, and the fixed state read and written. 'Bound' is bytes x tok/s over the probe's bandwidth for "
          "the same thread count; 'bytes read <=' is the most a step can have read at the probe's bandwidth, "
          "over the counted bytes (1 / share):")
    print()
    print("| model | weights | threads | decode tok/s | all matrices MB | read per step MB (matrices + KV + "
          "state) | GB/s | share of bandwidth bound | bytes read <= |")
    print("|---|---|---|---|---|---|---|---|---|")
    for n in models:
        for d in dtypes:
            for t in threads:
                rows = runs.get((n, d, t, lengths[0]), [])
                if not rows:
                    continue
                r = rows[0]
                tok_s = med(rows, "decode_tok_s")
                read = med(rows, "decode_read_bytes_per_token")
                kv = r["kv_bytes_per_position"] * (r["prompt_len"] + 0.5 * (r["gen_len"] + 1))
                gbs = read * tok_s / 1e9
                frac = gbs / bw[t] if t in bw else float("nan")
                print(f"| {NAMES[n]} | {d} | {t} | {tok_s:.2f} | {r['weight_bytes'] / 1e6:.1f} | "
                      f"{read / 1e6:.1f} ({r['step_matrix_bytes'] / 1e6:.1f} + {kv / 1e6:.2f} + "
                      f"{2 * r['fixed_state_bytes'] / 1e6:.1f}) | {gbs:.2f} | {100 * frac:.0f} % | {1 / frac:.2f}x |")
    print()
    print("State per sequence: the fixed part (conv + SSM, any context) and the KV bytes per token of context:")
    print()
    print("| model | fixed state MB | KV bytes per token | state at 2,000 tokens MB | at 8,192 tokens MB |")
    print("|---|---|---|---|---|")
    for n in models:
        key = next(k for k in runs if k[0] == n)
        r = runs[key][0]
        fixed, kv = r["fixed_state_bytes"], r["kv_bytes_per_position"]
        print(f"| {NAMES[n]} | {fixed / 1e6:.2f} | {kv} | {(fixed + 2000 * kv) / 1e6:.2f} | "
              f"{(fixed + 8192 * kv) / 1e6:.2f} |")
    follow = [(n, os.path.join(out, f"{n}-followup.json")) for n in models]
    follow = [(n, p) for n, p in follow if os.path.exists(p) and os.path.getsize(p) > 0]
    if follow:
        print()
        print("Served follow-up turn (time to first token, medians):")
        print()
        print("| model | prompt tokens | resumed from the cache | cached | cold | cold / cached |")
        print("|---|---|---|---|---|---|")
        for n, p in follow:
            f = json.load(open(p))["follow_up"]
            print(f"| {NAMES[n]} | {f['prompt_tokens']} | {f['cached_tokens']} | {f['ttft_cached_s'] * 1e3:.0f} ms | "
                  f"{f['ttft_cold_s'] * 1e3:.0f} ms | {f['ttft_cold_s'] / f['ttft_cached_s']:.1f}x |")


if __name__ == "__main__":
    main()
