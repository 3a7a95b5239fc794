#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Load test over loopback: 32 clients stream at once (greedy and seeded requests, completions and
chat, some with log-probabilities and stop strings), and every response must be complete, well
formed and identical to the same request served alone. Bounded in time (LOAD_TEST_SECONDS,
default 120); run by ctest as server_load_test.

Usage: load_test.py [--clients N] [--parallel NP] [--threads T]"""

import argparse
import os
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from serve_util import Server, make_model, stream_text  # noqa: E402


def requests(count):
    """`count` distinct requests: (path, kind, body)."""
    out = []
    for i in range(count):
        body = {"max_tokens": 16 + (i % 5) * 8, "stream": True, "ignore_eos": i % 3 != 0}
        if i % 2:
            body.update(temperature=0.9, seed=1000 + i, top_k=50, top_p=0.95)
        else:
            body.update(temperature=0)
        if i % 4 == 1:
            body["stop"] = ["the", "\n\n"]
        if i % 3 == 2:
            body["messages"] = [{"role": "user", "content": f"Request {i}: tell me about tide pools."}]
            if i % 4 == 2:
                body.update(logprobs=True, top_logprobs=2)
            out.append(("/v1/chat/completions", "chat", body))
        else:
            body["prompt"] = f"Story number {i}. Once upon a time"
            if i % 4 == 0:
                body["logprobs"] = 2
            out.append(("/v1/completions", "completion", body))
    return out


def outcome(kind, status, content_type, chunks, done):
    """What must match between a request served alone and under load: the text, the finish
    reasons, the token counts and every log-probability. Checks the stream's form on the way."""
    if status != 200 or not content_type.startswith("text/event-stream"):
        raise AssertionError(f"status {status}, content type {content_type}: {chunks}")
    if not done:
        raise AssertionError("the stream did not end with [DONE]")
    if len({chunk["id"] for chunk in chunks}) != 1:
        raise AssertionError("chunks of one stream carry different ids")
    text, finishes, usage = stream_text(kind, chunks)
    if len(finishes) != 1 or finishes[0] not in ("stop", "length") or usage is None:
        raise AssertionError(f"finish reasons {finishes}, usage {usage}")
    logprobs = [c["choices"][0]["logprobs"] for c in chunks if c["choices"] and c["choices"][0]["logprobs"]]
    return text, finishes[0], usage["prompt_tokens"], usage["completion_tokens"], logprobs


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--clients", type=int, default=32)
    parser.add_argument("--parallel", type=int, default=8)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    deadline = time.monotonic() + float(os.environ.get("LOAD_TEST_SECONDS", "120"))
    model = make_model(os.path.join(tempfile.mkdtemp(prefix="mambacpp_load_test_"), "tiny"))
    work = requests(args.clients)
    with Server(model, "-t", str(args.threads), "-np", str(args.parallel), "--max-queue", str(args.clients)) as server:
        alone = []
        solo_start = time.monotonic()
        for path, kind, body in work:
            alone.append(outcome(kind, *server.stream(path, body)))
            if time.monotonic() > deadline:
                raise AssertionError("out of time serving the requests one at a time")
        solo_seconds = time.monotonic() - solo_start

        results = [None] * len(work)
        start = threading.Barrier(len(work))

        def client(index):
            path, kind, body = work[index]
            try:
                start.wait(timeout=60)
                results[index] = outcome(kind, *server.stream(path, body, timeout=max(deadline - time.monotonic(), 1)))
            except Exception as e:  # reported below with the request that failed
                results[index] = e

        threads = [threading.Thread(target=client, args=(i,), daemon=True) for i in range(len(work))]
        began = time.monotonic()
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=max(deadline - time.monotonic(), 0))
        elapsed = time.monotonic() - began
        failures = []
        for index, (expected, got) in enumerate(zip(alone, results)):
            if got is None:
                failures.append(f"request {index}: no answer before the deadline")
            elif isinstance(got, Exception):
                failures.append(f"request {index}: {got!r}")
            elif got != expected:
                failures.append(f"request {index}: differs under load:\n  alone {expected[:4]}\n  load  {got[:4]}")
        status = server.terminate()
        if status != 0:
            failures.append(f"exit status {status} after SIGTERM: {server.stderr()[-500:]}")
        if failures:
            print("\n".join(failures))
            sys.exit(1)
    tokens = sum(r[3] for r in results)
    print(f"load_test: {len(work)} concurrent streams identical to the same requests alone "
          f"({tokens} tokens in {elapsed:.2f} s under load, {solo_seconds:.2f} s one at a time)")


if __name__ == "__main__":
    main()
