#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Benchmark of a running `mambacpp serve` (standard library only; bench/serve_bench.sh starts the
server and runs this):

  1. aggregate decode throughput with 1, 4, 8 and 16 concurrent streams (greedy, ignore_eos), and
     the server's step latency p50/p99 over each run (from /metrics);
  2. time to first token of a ~20-token follow-up chat turn after a ~2,000-token conversation,
     cached (the conversation's turn was just served, so its state is in the prefix cache) and
     cold (the same conversation with a different first line, so nothing is cached).

Usage: serve_bench.py --port P [--streams 1,4,8,16] [--tokens 128] [--context 2000] [--repeats 3] [--json]
(--streams "" skips the throughput runs.)"""

import argparse
import http.client
import json
import statistics
import sys
import threading
import time


class Client:
    def __init__(self, port):
        self.port = port

    def post(self, path, body):
        connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=3600)
        connection.request("POST", path, json.dumps(body), {"Content-Type": "application/json"})
        response = connection.getresponse()
        data = response.read()
        connection.close()
        if response.status != 200:
            raise RuntimeError(f"{path}: {response.status} {data[:300]!r}")
        return json.loads(data)

    def stream(self, path, body):
        """Streams one request; returns (seconds to the first content, seconds to the end, usage)."""
        start = time.perf_counter()
        connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=3600)
        connection.request("POST", path, json.dumps({**body, "stream": True}), {"Content-Type": "application/json"})
        response = connection.getresponse()
        if response.status != 200:
            raise RuntimeError(f"{path}: {response.status} {response.read()[:300]!r}")
        first, usage = None, None
        for raw in response:
            line = raw.decode().strip()
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            chunk = json.loads(line[6:])
            for choice in chunk.get("choices", []):
                piece = choice.get("text") if "text" in choice else choice.get("delta", {}).get("content")
                if first is None and (piece or choice.get("finish_reason")):
                    first = time.perf_counter() - start
            if chunk.get("usage"):
                usage = chunk["usage"]
        connection.close()
        return first, time.perf_counter() - start, usage

    def metrics(self):
        """The server's /metrics: step quantiles by quantile, and every plain counter by name."""
        connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)
        connection.request("GET", "/metrics")
        text = connection.getresponse().read().decode()
        connection.close()
        quantiles, counters = {}, {}
        for line in text.splitlines():
            if line.startswith("mambacpp_step_seconds{quantile="):
                quantiles[line.split('"')[1]] = float(line.split()[-1])
            elif line and not line.startswith("#") and "{" not in line:
                name, value = line.split()
                counters[name] = float(value)
        return quantiles, counters


def throughput(client, streams, tokens):
    starts, firsts, ends, counts = [], [], [], []
    lock = threading.Lock()
    barrier = threading.Barrier(streams)

    def one(index):
        barrier.wait()
        begin = time.perf_counter()
        first, total, usage = client.stream("/v1/completions", {
            "prompt": f"Stream {index}: the history of the lighthouse keepers of the northern coast",
            "max_tokens": tokens, "temperature": 0, "ignore_eos": True})
        with lock:
            starts.append(begin)
            firsts.append(begin + first)
            ends.append(begin + total)
            counts.append(usage["completion_tokens"])

    _, before = client.metrics()
    threads = [threading.Thread(target=one, args=(i,)) for i in range(streams)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    # Decode throughput: tokens after each stream's first, over the time from the first stream's
    # first token to the last stream's end (prefill of the short prompts is left out).
    decode_seconds = max(ends) - min(firsts)
    quantiles, after = client.metrics()
    wall = max(ends) - min(starts)
    steps = after["mambacpp_step_seconds_count"] - before["mambacpp_step_seconds_count"]
    busy = after["mambacpp_step_seconds_sum"] - before["mambacpp_step_seconds_sum"]
    rows = after["mambacpp_step_rows_total"] - before["mambacpp_step_rows_total"]
    # busy_share: the part of the wall time the scheduler spent in forward steps (the rest is
    # HTTP, tokenization, streaming and the clients, which share the machine).
    return {"streams": streams, "tokens": sum(counts),
            "aggregate_decode_tok_s": (sum(counts) - streams) / decode_seconds,
            "wall_s": wall, "steps": steps, "rows_per_step": rows / max(steps, 1),
            "busy_share": busy / wall, "step_seconds": quantiles}


def conversation(client, context_tokens, nonce):
    """Chat messages of about `context_tokens` tokens, opening with `nonce`."""
    paragraph = ("The keeper climbed the spiral stair at dusk, trimmed the wick, wound the clockwork and "
                 "watched the beam sweep the grey water until the morning boats came home. ")
    per_paragraph = len(client.post("/tokenize", {"content": paragraph})["tokens"])
    messages, total, turn = [{"role": "system", "content": f"Log {nonce}. You are a careful archivist."}], 0, 0
    while total < context_tokens:
        count = max(1, min(6, (context_tokens - total) // per_paragraph))
        messages.append({"role": "user" if turn % 2 == 0 else "assistant", "content": paragraph * count})
        total += count * per_paragraph
        turn += 1
    if messages[-1]["role"] == "user":
        messages.append({"role": "assistant", "content": "Noted."})
    return messages


def follow_up_ttft(client, context_tokens, repeats):
    follow_up = {"role": "user", "content": "In one sentence, what did the keeper do at dusk each night?"}
    cached, cold, cached_tokens = [], [], []
    for repeat in range(repeats):
        # Cached: the conversation's last turn was just served, so the follow-up resumes from it.
        messages = conversation(client, context_tokens, f"warm-{repeat}")
        reply = client.post("/v1/chat/completions", {"messages": messages[:-1], "max_tokens": 8, "temperature": 0})
        messages[-1] = {"role": "assistant", "content": reply["choices"][0]["message"]["content"]}
        first, _, usage = client.stream("/v1/chat/completions",
                                        {"messages": messages + [follow_up], "max_tokens": 1, "temperature": 0})
        cached.append(first)
        cached_tokens.append(usage["prompt_tokens_details"]["cached_tokens"])
        prompt_tokens = usage["prompt_tokens"]
        # Cold: a conversation never seen before.
        messages = conversation(client, context_tokens, f"cold-{repeat}")
        first, _, _ = client.stream("/v1/chat/completions",
                                   {"messages": messages + [follow_up], "max_tokens": 1, "temperature": 0})
        cold.append(first)
    return {"prompt_tokens": prompt_tokens, "cached_tokens": cached_tokens,
            "ttft_cached_s": statistics.median(cached), "ttft_cold_s": statistics.median(cold)}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--streams", default="1,4,8,16")
    parser.add_argument("--tokens", type=int, default=128)
    parser.add_argument("--context", type=int, default=2000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    client = Client(args.port)
    client.post("/v1/completions", {"prompt": "warm up", "max_tokens": 4})
    results = {"throughput": [], "follow_up": None}
    # --streams "" measures the follow-up turn alone.
    for streams in [int(s) for s in args.streams.split(",") if s]:
        row = throughput(client, streams, args.tokens)
        results["throughput"].append(row)
        if not args.json:
            q = row["step_seconds"]
            print(f"{streams:3d} streams: {row['aggregate_decode_tok_s']:9.1f} tok/s aggregate decode "
                  f"({row['tokens']} tokens, {row['wall_s']:.2f} s); step p50 {q.get('0.5', 0) * 1e3:.2f} ms, "
                  f"p99 {q.get('0.99', 0) * 1e3:.2f} ms; {row['steps']:.0f} steps of {row['rows_per_step']:.1f} rows, "
                  f"busy {row['busy_share'] * 100:.0f} %", flush=True)
    results["follow_up"] = follow_up_ttft(client, args.context, args.repeats)
    if args.json:
        json.dump(results, sys.stdout, indent=1)
        print()
    else:
        f = results["follow_up"]
        print(f"follow-up turn after a {f['prompt_tokens']}-token conversation: time to first token "
              f"{f['ttft_cached_s'] * 1e3:.1f} ms cached ({f['cached_tokens']} tokens resumed), "
              f"{f['ttft_cold_s'] * 1e3:.1f} ms cold (medians of {args.repeats})")


if __name__ == "__main__":
    main()
