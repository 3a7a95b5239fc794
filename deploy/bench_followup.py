#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Follow-up turn latency through HAProxy (deploy/replicas.sh, two replicas): a conversation
with a long history gets a short follow-up, answered (a) cold, nothing cached (the same lengths,
its history changed at the first character), (b) by its home replica from the in-memory prefix
cache, (c) by the other replica from the shared --slot-persist folder (the conversation moved).
Prints the median wall time of each over the trials and the cached tokens reported.

  deploy/bench_followup.py -m MODEL [--history-chars 6000] [--trials 5] [--max-tokens 16] [-- serve flags]

Standard library only; MAMBACPP names the binary as for replicas.sh."""

import argparse
import http.client
import json
import os
import random
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def free_ports(count):
    sockets = [socket.socket() for _ in range(count)]
    for s in sockets:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in sockets]
    for s in sockets:
        s.close()
    return ports


def post(port, body, session=None):
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
    headers = {"Content-Type": "application/json", **({"X-Session-Id": session} if session else {})}
    start = time.monotonic()
    connection.request("POST", "/v1/chat/completions", body=json.dumps(body).encode(), headers=headers)
    response = connection.getresponse()
    data = response.read()
    seconds = time.monotonic() - start
    connection.close()
    if response.status != 200:
        raise RuntimeError(f"{response.status} {data[:200]!r}")
    return json.loads(data), response.getheader("X-Mambacpp-Replica"), seconds


def get(port, path):
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        connection.request("GET", path)
        response = connection.getresponse()
        return response.status, response.read().decode()
    finally:
        connection.close()


def metric(port, name):
    for line in get(port, "/metrics")[1].splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    raise RuntimeError("no metric " + name)


def wait_healthy(ports, deadline):
    for port in ports:
        while True:
            try:
                if get(port, "/health")[0] == 200:
                    break
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError("replicas did not become healthy")
            time.sleep(0.1)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("-m", "--model", required=True)
    parser.add_argument("--history-chars", type=int, default=6000)
    parser.add_argument("--trials", type=int, default=5)
    parser.add_argument("--max-tokens", type=int, default=16)
    parser.add_argument("serve_flags", nargs="*")
    args = parser.parse_args()

    front, *replica_ports = free_ports(3)
    run_dir = tempfile.mkdtemp(prefix="mambacpp_bench_followup_")
    launcher = subprocess.Popen(["bash", os.path.join(HERE, "replicas.sh"), "-m", args.model, "--port", str(front),
                                 "--replica-ports", ",".join(map(str, replica_ports)), "--run-dir", run_dir,
                                 "--check-inter", "500ms", "--", *args.serve_flags],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_healthy(replica_ports, time.monotonic() + 120)
        while True:  # until HAProxy has both replicas in rotation
            try:
                if get(front, "/haproxy/replicas-up")[1].strip() == "2":
                    break
            except OSError:
                pass
            time.sleep(0.1)
        ports = {f"replica-{i}": port for i, port in enumerate(replica_ports)}
        # Session ids that hash to each replica, learnt from one-token probes.
        by_replica = {}
        for k in range(200):
            _, replica, _ = post(front, {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 1}, f"probe-{k}")
            by_replica.setdefault(replica, f"probe-{k}")
            if len(by_replica) == 2:
                break
        home_session, away_session = by_replica["replica-0"], by_replica["replica-1"]
        words = "sea sky wind stone river light field bird cloud rain tree road hill snow fire".split()
        rows = {"cold": [], "memory": [], "moved": []}
        cached = {"cold": [], "memory": [], "moved": []}
        for trial in range(args.trials):
            rng = random.Random(trial)
            history = " ".join(rng.choice(words) for _ in range(args.history_chars // 5))[: args.history_chars]
            greedy = {"max_tokens": args.max_tokens, "temperature": 0, "ignore_eos": True}
            first = [{"role": "user", "content": history}]
            written = metric(ports["replica-0"], "mambacpp_prefix_store_written_total")
            reply, _, _ = post(front, {"messages": first, **greedy}, home_session)
            follow = first + [{"role": "assistant", "content": reply["choices"][0]["message"]["content"]}]
            # The first turn's prompt and end states are on disk before the follow-ups are timed.
            while metric(ports["replica-0"], "mambacpp_prefix_store_written_total") < written + 2:
                time.sleep(0.05)
            # Cold: the same lengths, the history changed at its first character, so nothing matches.
            cold = [{"role": "user", "content": "X" + history[1:]}] + follow[1:]
            for kind, messages, session in (("cold", cold, home_session),
                                            ("memory", follow, home_session),
                                            ("moved", follow, away_session)):
                time.sleep(0.5)  # the previous request's state files are written (fsync) before this one is timed
                body = {"messages": messages + [{"role": "user", "content": f"And then ({kind})?"}], **greedy}
                result, replica, seconds = post(front, body, session)
                rows[kind].append(seconds)
                cached[kind].append(result["usage"]["prompt_tokens_details"]["cached_tokens"])
                prompt_tokens = result["usage"]["prompt_tokens"]
        print(f"follow-up of {prompt_tokens} prompt tokens, {args.max_tokens} generated, {args.trials} trials")
        for kind in rows:
            print(f"  {kind:6s}: median {statistics.median(rows[kind]) * 1000:8.1f} ms, "
                  f"cached tokens {sorted(set(cached[kind]))}")
        print(f"  stored prompt tokens on replica-1: {metric(ports['replica-1'], 'mambacpp_prompt_tokens_stored_total'):.0f}")
    finally:
        launcher.send_signal(signal.SIGTERM)
        launcher.wait(timeout=120)
    return 0


if __name__ == "__main__":
    sys.exit(main())
