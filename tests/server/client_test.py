#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""`mambacpp serve` driven by Python's standard library (urllib, http.client) and by curl: the
endpoints, streaming chat and completions parsed as server-sent events, seeded sampling that
streams the same text it returns whole, OpenAI-shaped errors, and a SIGTERM that exits 0.
Run by ctest (server_client_test); exits non-zero on the first failure."""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import urllib.error
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from serve_util import Server, make_model, stream_text  # noqa: E402


def check(condition, message):
    if not condition:
        raise AssertionError(message)


def urllib_post(port, path, body):
    request = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=60) as response:
        return response.status, json.loads(response.read())


def urllib_error(port, path, data):
    request = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=data,
                                     headers={"Content-Type": "application/json"})
    try:
        urllib.request.urlopen(request, timeout=60)
    except urllib.error.HTTPError as e:
        body = json.loads(e.read())
        check(set(body["error"]) >= {"message", "type", "code"}, f"error shape: {body}")
        return e.code, body["error"]
    raise AssertionError(f"{path} {data[:60]!r} was accepted")


def test_urllib(server):
    status, completion = urllib_post(server.port, "/v1/completions",
                                     {"prompt": "Hello", "max_tokens": 6, "temperature": 0, "ignore_eos": True})
    check(status == 200 and completion["object"] == "text_completion", completion)
    check(completion["choices"][0]["finish_reason"] == "length", completion)
    usage = completion["usage"]
    check(usage["completion_tokens"] == 6 and usage["total_tokens"] == usage["prompt_tokens"] + 6, usage)
    check("cached_tokens" in usage["prompt_tokens_details"], usage)

    status, tokens = urllib_post(server.port, "/tokenize", {"content": "Hello world"})
    _, text = urllib_post(server.port, "/detokenize", tokens)
    check(text["content"] == "Hello world", text)

    with urllib.request.urlopen(f"http://127.0.0.1:{server.port}/v1/models", timeout=60) as response:
        models = json.loads(response.read())
    check(models["object"] == "list" and models["data"][0]["object"] == "model", models)

    code, error = urllib_error(server.port, "/v1/completions", b'{"prompt": "x", ')
    check(code == 400 and error["type"] == "invalid_request_error", error)
    code, error = urllib_error(server.port, "/v1/chat/completions", b'{"messages": [], "max_tokens": 3}')
    check(code == 400 and "messages must not be empty" in error["message"], error)
    code, error = urllib_error(server.port, "/v1/completions", b'{"prompt": "x", "top_k": "ten"}')
    check(code == 400 and "top_k" in error["message"], error)
    code, error = urllib_error(server.port, "/v2/anything", b"{}")
    check(code == 404, error)


def test_streaming(server):
    # Seeded sampling: streaming and not streaming give the same text.
    chat = {"messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Tell a story."}],
            "max_tokens": 20, "temperature": 0.9, "seed": 42, "ignore_eos": True}
    whole = server.post_json("/v1/chat/completions", chat)
    status, content_type, chunks, done = server.stream("/v1/chat/completions",
                                                       {**chat, "stream": True,
                                                        "stream_options": {"include_usage": True}})
    check(status == 200 and content_type.startswith("text/event-stream"), (status, content_type))
    check(done, "the stream did not end with [DONE]")
    check(chunks[0]["choices"][0]["delta"].get("role") == "assistant", chunks[0])
    check(len({c["id"] for c in chunks}) == 1, "one id per stream")
    text, finishes, usage = stream_text("chat", chunks)
    check(text == whole["choices"][0]["message"]["content"], (text, whole))
    check(finishes == ["length"], finishes)
    check(usage["completion_tokens"] == 20, usage)
    check(chunks[-1]["choices"] == [] and chunks[-1]["usage"]["completion_tokens"] == 20, chunks[-1])

    # Completions with a stop string: the text ends before it and the finish reason is "stop".
    base = {"prompt": "Once upon a time", "max_tokens": 40, "temperature": 0, "ignore_eos": True}
    free = server.post_json("/v1/completions", base)["choices"][0]["text"]
    check(len(free) > 4, free)
    stop = free[len(free) // 2:len(free) // 2 + 2]
    stopped = server.post_json("/v1/completions", {**base, "stop": [stop]})["choices"][0]
    check(stopped["finish_reason"] == "stop" and stopped["text"] == free[:free.index(stop)], (stopped, free, stop))
    _, _, chunks, done = server.stream("/v1/completions", {**base, "stop": stop, "stream": True, "logprobs": 2})
    text, finishes, _ = stream_text("completion", chunks)
    check(done and text == stopped["text"] and finishes == ["stop"], (text, finishes))
    for chunk in chunks[:-1]:
        logprobs = chunk["choices"][0]["logprobs"]
        check(len(logprobs["tokens"]) == 1 and len(logprobs["top_logprobs"][0]) <= 2, logprobs)


def test_curl(server):
    curl = shutil.which("curl")
    if curl is None:
        print("curl not found: its part is skipped")
        return
    url = f"http://127.0.0.1:{server.port}"
    out = subprocess.run([curl, "-sS", "-N", url + "/v1/chat/completions", "-H", "Content-Type: application/json",
                          "-d", json.dumps({"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 5,
                                            "stream": True, "ignore_eos": True})],
                         check=True, capture_output=True, timeout=60).stdout
    lines = [line for line in out.decode().split("\n") if line]
    check(lines[-1] == "data: [DONE]", lines[-3:])
    check(all(line.startswith("data: ") for line in lines), lines)
    check(json.loads(lines[-2][6:])["choices"][0]["finish_reason"] == "length", lines[-2])
    health = subprocess.run([curl, "-sS", url + "/health"], check=True, capture_output=True, timeout=60).stdout
    check(json.loads(health) == {"status": "ok"}, health)
    code = subprocess.run([curl, "-sS", "-o", os.devnull, "-w", "%{http_code}", url + "/v1/completions",
                           "-d", '{"prompt": 5}'], check=True, capture_output=True, timeout=60).stdout
    check(code == b"400", code)


def main():
    folder = tempfile.mkdtemp(prefix="mambacpp_client_test_")
    model = make_model(os.path.join(folder, "tiny"))
    with Server(model, "-t", "1", "-c", "512") as server:
        test_urllib(server)
        test_streaming(server)
        test_curl(server)
        status = server.terminate()
        check(status == 0, f"exit status {status} after SIGTERM: {server.stderr()}")
    print("client_test: all checks passed")


if __name__ == "__main__":
    main()
