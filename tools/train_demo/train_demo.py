#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Trains mambacpp's demo model (data/demo-model/): a small Mamba-2 on the King James Bible.

The corpus is the text of Debian's bible-kjv-text package (public domain), read through the
`bible` program of the bible-kjv package, one verse per line. The script learns a byte-level BPE
tokenizer, trains the model for a fixed wall-clock time on one thread, and writes a Hugging Face
Mamba2ForCausalLM folder: config.json, model.safetensors (bf16) and tokenizer.json. With
--mambacpp it then checks that mambacpp's logits for a prompt equal the PyTorch model's (with the
same bf16-rounded weights) within a small tolerance.

    apt-get install bible-kjv python3-torch python3-numpy
    /usr/bin/python3 tools/train_demo/train_demo.py --out data/demo-model --minutes 34 \
        --mambacpp build/mambacpp --reference tests/data/demo_model/reference.json
"""

import argparse
import json
import math
import os
import random
import struct
import subprocess
import sys
import tempfile
import time

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bpe  # noqa: E402
from mamba2 import Mamba2LM  # noqa: E402


def read_kjv(path):
    """The whole Bible, one verse per line without its number: from `path` if given, else `bible`."""
    if path:
        with open(path, encoding="ascii") as f:
            return f.read()
    raw = subprocess.run(["bible", "-l100000", "Gen1:1-Rev22:21"], check=True, capture_output=True,
                         text=True).stdout
    # Verses are "  N text"; book and chapter headings ("1 Kings 3") start in the first column.
    verses = [line.strip().split(" ", 1)[1] for line in raw.splitlines() if line.startswith(" ")]
    if len(verses) != 31102:
        raise SystemExit(f"expected the 31102 verses of the KJV, got {len(verses)}")
    return "\n".join(verses) + "\n"


def write_safetensors(path, tensors):
    """tensors: name -> torch tensor, written as bf16 (the format: a JSON header, then the bytes)."""
    header, blobs, offset = {"__metadata__": {"format": "pt"}}, [], 0
    for name, t in tensors.items():
        data = t.detach().to(torch.bfloat16).contiguous().view(torch.int16).numpy().tobytes()
        header[name] = {"dtype": "BF16", "shape": list(t.shape), "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    with open(path + ".tmp", "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for blob in blobs:
            f.write(blob)
    os.replace(path + ".tmp", path)


def round_to_bf16(model):
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(p.to(torch.bfloat16).to(torch.float32))


@torch.no_grad()
def evaluate(model, data, seq, batches=8):
    model.eval()
    g = torch.Generator().manual_seed(1)
    losses = []
    for _ in range(batches):
        starts = torch.randint(0, len(data) - seq - 1, (16,), generator=g)
        x = torch.stack([data[s:s + seq] for s in starts])
        y = torch.stack([data[s + 1:s + seq + 1] for s in starts])
        losses.append(F.cross_entropy(model(x).flatten(0, 1), y.flatten()).item())
    model.train()
    return sum(losses) / len(losses)


@torch.no_grad()
def sample(model, tok, prompt, n, temperature=0.8, seed=0):
    """Text from prompt, sampled with a full forward pass per token (slow, but only for the log)."""
    model.eval()
    g = torch.Generator().manual_seed(seed)
    ids = tok.encode(prompt)
    for _ in range(n):
        logits = model(torch.tensor([ids]))[0, -1] / temperature
        ids.append(int(torch.multinomial(torch.softmax(logits, -1), 1, generator=g)))
    model.train()
    return tok.decode(ids)


def train(model, train_data, val_data, args, log):
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr, betas=(0.9, 0.95), weight_decay=0.1)
    budget = args.minutes * 60.0
    start, step, ema = time.time(), 0, float("nan")
    while True:
        elapsed = time.time() - start
        if elapsed >= budget:
            break
        # Warm-up, then a cosine decay over the wall-clock budget, so any budget ends at a low rate.
        frac = elapsed / budget
        lr = args.lr * min(1.0, (step + 1) / 30) * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * frac)))
        for group in opt.param_groups:
            group["lr"] = lr
        starts = torch.randint(0, len(train_data) - args.seq - 1, (args.batch,))
        x = torch.stack([train_data[s:s + args.seq] for s in starts])
        y = torch.stack([train_data[s + 1:s + args.seq + 1] for s in starts])
        loss = F.cross_entropy(model(x).flatten(0, 1), y.flatten())
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        ema = loss.item() if step == 0 else 0.98 * ema + 0.02 * loss.item()
        step += 1
        if step % 50 == 0:
            tokens_s = step * args.batch * args.seq / (time.time() - start)
            log(f"step {step} {elapsed / 60:.1f} min lr {lr:.2e} loss {ema:.3f} ({tokens_s:.0f} tok/s)")
        if step % 250 == 0:
            log(f"  validation loss {evaluate(model, val_data, args.seq, batches=2):.3f}")
    return step, time.time() - start, ema


def write_reference(model, tok, prompt, path):
    """The model's logits at the last position of prompt, for tests/model/demo_model_test.cc."""
    ids = tok.encode(prompt)
    with torch.no_grad():
        model.eval()
        logits = model(torch.tensor([ids]))[0, -1].tolist()
    with open(path, "w") as f:
        json.dump({"prompt": prompt, "tokens": ids, "last_logits": [float(f"{v:.7g}") for v in logits]}, f)
        f.write("\n")


def compare_with_mambacpp(model, tok, out_dir, mambacpp, prompt, log):
    """Checks mambacpp's logits at every position of prompt against the model's; returns the max
    absolute difference."""
    ids = tok.encode(prompt)
    with torch.no_grad():
        model.eval()
        want = model(torch.tensor([ids]))[0].numpy()
    with tempfile.TemporaryDirectory() as tmp:
        npy = os.path.join(tmp, "logits.npy")
        subprocess.run([mambacpp, "logits", "-m", out_dir, "--tokens", ",".join(map(str, ids)), "--out", npy,
                        "--all-positions", "-t", "1"], check=True)
        got = np.load(npy)
        tokenized = subprocess.run([mambacpp, "tokenize", "-m", out_dir, "-p", prompt], capture_output=True,
                                   text=True)
    diff = float(np.abs(got - want).max())
    log(f"mambacpp vs torch logits over {len(ids)} positions: max |diff| {diff:.2e} "
        f"(logit range {want.min():.1f}..{want.max():.1f})")
    log(f"mambacpp tokenize: {tokenized.stdout.strip()[:300]} (ours: {ids})")
    return diff


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True, help="output folder (config.json, model.safetensors, tokenizer.json)")
    ap.add_argument("--corpus", default="", help="the verse-per-line text (default: run `bible`)")
    ap.add_argument("--minutes", type=float, default=34.0, help="training wall-clock budget")
    ap.add_argument("--vocab", type=int, default=2048)
    ap.add_argument("--d-model", type=int, default=192)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--d-state", type=int, default=32)
    ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("--batch", type=int, default=12)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--checkpoint", default="", help="also save the f32 weights here (torch.save)")
    ap.add_argument("--init", default="", help="start from these saved weights (with --minutes 0: export only)")
    ap.add_argument("--mambacpp", default="", help="mambacpp binary: compare its logits with the model's")
    ap.add_argument("--prompt", default="And God said")
    ap.add_argument("--reference", default="",
                    help="write the last-position logits of a prompt here (tests/data/demo_model/reference.json)")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    random.seed(args.seed)
    log = lambda text: print(text, flush=True)  # noqa: E731

    text = read_kjv(args.corpus)
    t0 = time.time()
    tok = bpe.train(text, args.vocab)
    data = torch.tensor(tok.encode(text), dtype=torch.long)
    log(f"corpus: {len(text)} characters, {len(data)} tokens; tokenizer of {len(tok.vocab)} ids "
        f"({time.time() - t0:.0f} s)")
    split = len(data) * 99 // 100  # the last 1% (the end of Revelation) is held out
    model = Mamba2LM(args.vocab, args.d_model, args.layers, args.d_state)
    log(f"model: {sum(p.numel() for p in model.parameters())} parameters, {json.dumps(model.hparams)}")
    if args.init:
        model.load_state_dict(torch.load(args.init))
    steps, seconds, loss = train(model, data[:split], data[split:], args, log)

    if args.checkpoint:
        torch.save(model.state_dict(), args.checkpoint)
    round_to_bf16(model)
    val = evaluate(model, data[split:], args.seq)
    log(f"done: {steps} steps in {seconds / 60:.1f} min, train loss {loss:.3f}, validation loss {val:.3f} "
        f"(bf16 weights)")
    os.makedirs(args.out, exist_ok=True)
    state = {k: v for k, v in model.state_dict().items()}
    write_safetensors(os.path.join(args.out, "model.safetensors"), state)
    tok.write_json(os.path.join(args.out, "tokenizer.json"))
    with open(os.path.join(args.out, "config.json"), "w") as f:
        json.dump(model.hf_config(), f, indent=2)
        f.write("\n")
    for seed in range(2):
        log(f"sample {seed}: {sample(model, tok, args.prompt, 40, seed=seed)!r}")
    if args.reference:
        write_reference(model, tok, args.prompt + " unto Moses, saying", args.reference)
    if args.mambacpp:
        diff = compare_with_mambacpp(model, tok, args.out, args.mambacpp, args.prompt + " unto Moses, saying", log)
        if not diff < 1e-2:
            raise SystemExit(f"mambacpp's logits differ from the model's by {diff}")


if __name__ == "__main__":
    main()
