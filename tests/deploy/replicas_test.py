#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Two `mambacpp serve` replicas behind HAProxy, started by deploy/replicas.sh on loopback ports
with a shared --slot-save-path and --slot-persist: a conversation's turns carry X-Session-Id and
stay on one replica (turn 2 reports cached tokens); that replica is then killed, and turn 3 lands
on the other one, which resumes from the state file the first one wrote (cached tokens and the
prefix-store metrics say so). Requests without the header keep succeeding throughout, and every
answer equals a cold single server's answer to the same request. Before that, 200 concurrent
streams pass through HAProxy without one error and both replicas stay in rotation: every request
reaches a replica from HAProxy's address, which the replicas' per-address cap used to refuse (59 to
72 of the 200 got 502, and a healthy replica was marked down); the replicas now trust HAProxy's
X-Forwarded-For (--trusted-proxy) and log the client it names. Exits 77 (a ctest skip) when
haproxy is not installed."""

import http.client
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "server"))
from serve_util import Server, cli_command, make_model, parse_sse, stream_text  # noqa: E402

SCRIPT = os.path.join(HERE, "..", "..", "deploy", "replicas.sh")
DEADLINE = time.monotonic() + 150  # the whole test, start-up included


def check(condition, message):
    if not condition:
        raise AssertionError(message)


def free_ports(count):
    sockets = [socket.socket() for _ in range(count)]
    for s in sockets:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in sockets]
    for s in sockets:
        s.close()
    return ports


def request(port, method, path, body=None, headers=None, timeout=60):
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        data = None if body is None else json.dumps(body).encode()
        connection.request(method, path, body=data, headers={"Content-Type": "application/json", **(headers or {})})
        response = connection.getresponse()
        return response.status, {k.lower(): v for k, v in response.getheaders()}, response.read()
    finally:
        connection.close()


def post(port, path, body, headers=None):
    status, response_headers, data = request(port, "POST", path, body, headers)
    check(status == 200, f"{path} -> {status} {data[:300]!r}")
    return json.loads(data), response_headers


def metric(port, name):
    status, _, data = request(port, "GET", "/metrics")
    check(status == 200, f"/metrics -> {status}")
    for line in data.decode().splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    raise AssertionError(f"no metric {name}")


def wait_until(what, condition):
    while not condition():
        check(time.monotonic() < DEADLINE, f"timed out waiting for {what}")
        time.sleep(0.05)


def healthy(port):
    try:
        return request(port, "GET", "/health", timeout=5)[0] == 200
    except OSError:
        return False


def replicas_up(port):
    try:
        status, _, data = request(port, "GET", "/haproxy/replicas-up", timeout=5)
        return int(data) if status == 200 else 0
    except (OSError, ValueError):
        return 0


def chat(messages):
    # Greedy and a fixed length, so an answer is a function of the request alone.
    return {"messages": messages, "max_tokens": 8, "temperature": 0, "ignore_eos": True}


def answer(completion):
    return completion["choices"][0]["message"]["content"]


def main():
    if shutil.which("haproxy") is None:
        print("haproxy is not installed: skipped")
        return 77
    folder = tempfile.mkdtemp(prefix="mambacpp_replicas_test_")
    model = make_model(os.path.join(folder, "model"))
    run_dir = os.path.join(folder, "run")
    front, *replica_ports = free_ports(3)
    env = dict(os.environ, MAMBACPP=" ".join(cli_command()))
    launcher = subprocess.Popen(["bash", SCRIPT, "-m", model, "--port", str(front), "--replica-ports",
                                 ",".join(map(str, replica_ports)), "--run-dir", run_dir, "--check-inter", "200ms",
                                 "--", "-t", "1", "--parallel", "2"],
                                env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    names = {f"replica-{i}": port for i, port in enumerate(replica_ports)}
    try:
        with Server(model, "-t", "1") as cold:
            wait_until("the replicas' /health", lambda: all(healthy(p) for p in replica_ports))
            wait_until("HAProxy to put both replicas in rotation", lambda: replicas_up(front) == 2)
            run(front, names, run_dir, cold)
    finally:
        if launcher.poll() is None:
            launcher.send_signal(signal.SIGTERM)
        output = launcher.communicate(timeout=60)[0].decode(errors="replace")
    check(launcher.returncode == 0 and "replicas.sh: stopped" in output,
          f"the launcher did not stop cleanly ({launcher.returncode}): {output}")
    shutil.rmtree(folder, ignore_errors=True)
    print("replicas test passed")
    return 0


def concurrent_streams(front, run_dir, cold, count=200):
    """`count` streams at once through HAProxy, each from 127.0.0.1: every one must end with [DONE]
    and the cold server's text; one request from 127.0.0.9 is logged by its replica as that
    client's, not HAProxy's."""
    # Long enough that the streams are all open at once (8 tokens each ended before the last began).
    body = {**chat([{"role": "user", "content": "Name a colour."}]), "stream": True, "max_tokens": 128}
    expected = answer(cold.post_json("/v1/chat/completions", {**body, "stream": False}))
    start, errors = threading.Barrier(count), []

    def one_stream():
        try:
            connection = http.client.HTTPConnection("127.0.0.1", front, timeout=60)
            start.wait(timeout=30)
            connection.request("POST", "/v1/chat/completions", body=json.dumps(body).encode(),
                               headers={"Content-Type": "application/json"})
            response = connection.getresponse()
            if response.status != 200:
                errors.append(f"{response.status} {response.read()[:200]!r}")
                return
            chunks, done = parse_sse(response)
            connection.close()
            if not done or stream_text("chat", chunks)[0] != expected:
                errors.append(f"a stream ended early or differs: {chunks[-1:]!r}")
        except Exception as e:  # noqa: BLE001 - any failure is what the test counts
            errors.append(repr(e))

    # A replica still loading when HAProxy first checked it was marked down then: only what the
    # log says from here on counts.
    haproxy_log_path = os.path.join(run_dir, "haproxy.log")
    log_before = os.path.getsize(haproxy_log_path)
    threads = [threading.Thread(target=one_stream) for _ in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    check(not errors, f"{len(errors)} of {count} concurrent streams failed: {errors[:3]}")
    check(replicas_up(front) == 2, "a replica left the rotation during the concurrent streams")
    with open(haproxy_log_path, errors="replace") as f:
        haproxy_log = f.read()[log_before:]
    check(" is DOWN" not in haproxy_log, f"HAProxy marked a replica down: {haproxy_log[-600:]}")

    connection = http.client.HTTPConnection("127.0.0.1", front, timeout=60, source_address=("127.0.0.9", 0))
    connection.request("POST", "/v1/chat/completions", body=json.dumps(chat([{"role": "user", "content": "Hi"}])),
                       headers={"Content-Type": "application/json", "X-Forwarded-For": "6.6.6.6"})
    response = connection.getresponse()
    check(response.status == 200, f"from 127.0.0.9: {response.status}")
    request_id = json.loads(response.read())["id"]
    connection.close()
    logs = ""
    for name in sorted(os.listdir(run_dir)):
        if name.startswith("replica-") and name.endswith(".log"):
            with open(os.path.join(run_dir, name), errors="replace") as f:
                logs += f.read()
    # HAProxy drops what the client claimed (6.6.6.6) and forwards the address it saw.
    check(f"request {request_id} from 127.0.0.9: " in logs, f"no log line of {request_id} from 127.0.0.9")


def run(front, names, run_dir, cold):
    session = {"X-Session-Id": "conversation-1"}
    messages = [{"role": "user", "content": "Tell me about the sea."}]
    first, headers = post(front, "/v1/chat/completions", chat(messages), session)
    home = headers["x-mambacpp-replica"]
    check(home in names, f"unknown replica {home}")
    check(answer(first) == answer(cold.post_json("/v1/chat/completions", chat(messages))), "turn 1 != cold")

    messages += [{"role": "assistant", "content": answer(first)}, {"role": "user", "content": "And the sky?"}]
    second, headers = post(front, "/v1/chat/completions", chat(messages), session)
    check(headers["x-mambacpp-replica"] == home, f"turn 2 went to {headers['x-mambacpp-replica']}, not {home}")
    check(second["usage"]["prompt_tokens_details"]["cached_tokens"] > 0, f"turn 2 resumed nothing: {second}")
    check(answer(second) == answer(cold.post_json("/v1/chat/completions", chat(messages))), "turn 2 != cold")
    # Turns 1 and 2 each write their prompt's and their end's state; the home replica is killed
    # only once they are on disk.
    wait_until("the state files", lambda: metric(names[home], "mambacpp_prefix_store_written_total") >= 4)
    # With both replicas up (and turn 2's states on disk, which the streams' writes do not disturb).
    concurrent_streams(front, run_dir, cold)
    # The streams' state files are written in the background; the kill below waits until they are,
    # so that it meets the replicas as idle as before.
    def store_writes():
        return [metric(port, "mambacpp_prefix_store_written_total") for port in names.values()]

    settled = [None]

    def writes_settled():
        now = store_writes()
        if now == settled[0]:
            return True
        settled[0] = now
        time.sleep(0.5)
        return False

    wait_until("the streams' state files", writes_settled)

    # Requests without the header run all along, on both replicas, across the kill.
    plain = chat([{"role": "user", "content": "Count to three."}])
    expected = answer(cold.post_json("/v1/chat/completions", plain))
    results, stop = [], threading.Event()

    def plain_requests():
        while not stop.is_set():
            try:
                completion, _ = post(front, "/v1/chat/completions", plain)
                results.append(answer(completion) == expected)
            except Exception as e:  # noqa: BLE001 - any failure is what the test counts
                results.append(repr(e))

    # A stream passes through HAProxy as server-sent events, with the same text.
    connection = http.client.HTTPConnection("127.0.0.1", front, timeout=60)
    connection.request("POST", "/v1/chat/completions", body=json.dumps({**plain, "stream": True}).encode(),
                       headers={"Content-Type": "application/json", **session})
    response = connection.getresponse()
    check(response.status == 200 and response.getheader("Content-Type", "").startswith("text/event-stream"),
          f"stream: {response.status} {response.getheader('Content-Type')}")
    chunks, done = parse_sse(response)
    connection.close()
    check(done and stream_text("chat", chunks)[0] == expected, "the stream through HAProxy differs")

    thread = threading.Thread(target=plain_requests)
    thread.start()
    try:
        wait_until("requests before the kill", lambda: len(results) >= 3)
        with open(os.path.join(run_dir, f"{home}.pid")) as f:
            os.kill(int(f.read()), signal.SIGKILL)
        count = len(results)
        wait_until("requests after the kill", lambda: len(results) >= count + 3)

        messages += [{"role": "assistant", "content": answer(second)}, {"role": "user", "content": "Why blue?"}]
        third, headers = post(front, "/v1/chat/completions", chat(messages), session)
        other = headers["x-mambacpp-replica"]
        check(other != home and other in names, f"turn 3 went to {other}")
        cached = third["usage"]["prompt_tokens_details"]["cached_tokens"]
        check(cached >= second["usage"]["prompt_tokens"], f"turn 3 did not resume turn 2's prompt: {third['usage']}")
        check(metric(names[other], "mambacpp_prompt_tokens_stored_total") >= cached,
              "turn 3's cached tokens did not come from the shared folder")
        check(metric(names[other], "mambacpp_prefix_store_rejected_total") == 0, "a state file was rejected")
        check(answer(third) == answer(cold.post_json("/v1/chat/completions", chat(messages))), "turn 3 != cold")
        wait_until("requests after turn 3", lambda: len(results) >= count + 6)
    finally:
        stop.set()
        thread.join()
    # The one request the replica was answering when it was killed may be cut off mid-response:
    # once a response's head has left, HAProxy cannot retry it elsewhere, and no server could
    # finish it. Every other request must succeed.
    def cut_by_the_kill(index, result):
        return index in (count - 1, count) and "IncompleteRead" in str(result)

    failures = [r for i, r in enumerate(results) if r is not True and not cut_by_the_kill(i, r)]
    check(not failures, f"{len(failures)} of {len(results)} requests without the header failed: {failures[:3]}")


if __name__ == "__main__":
    sys.exit(main())
