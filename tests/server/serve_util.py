# SPDX-License-Identifier: MIT
"""Helpers shared by the Python server tests (standard library only): a tiny model, a
`mambacpp serve` child process on 127.0.0.1 and a free port, and a streaming client that parses
server-sent events."""

import http.client
import json
import os
import shlex
import signal
import subprocess
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def cli_command():
    """The command that starts the CLI: $MB_CLI (set by ctest, may start with an emulator), else
    the default build folder's binary."""
    command = os.environ.get("MB_CLI") or os.path.join(HERE, "..", "..", "build", "mambacpp")
    return shlex.split(command)


def make_model(folder, extra=()):
    """A tiny random checkpoint with a tokenizer, as the C++ tests make it."""
    subprocess.run(cli_command() + ["make-model", "--out", folder, "--d-model", "32", "--n-layer", "2",
                                    "--vocab", "301", "--seed", "3", *extra],
                   check=True, stdout=subprocess.DEVNULL)
    return folder


class Server:
    """`mambacpp serve` on 127.0.0.1 and a port the system picks; use as a context manager."""

    def __init__(self, model, *arguments, start_timeout=60):
        self.folder = tempfile.mkdtemp(prefix="mambacpp_serve_py_")
        self.out_path = os.path.join(self.folder, "out.txt")
        self.err_path = os.path.join(self.folder, "err.txt")
        with open(self.out_path, "wb") as out, open(self.err_path, "wb") as err:
            self.process = subprocess.Popen(
                cli_command() + ["serve", "-m", model, "--host", "127.0.0.1", "--port", "0", *arguments],
                stdout=out, stderr=err)
        self.port = None
        deadline = time.monotonic() + start_timeout
        marker = "listening on http://127.0.0.1:"
        while self.port is None:
            text = self.stdout()
            if marker in text and "\n" in text[text.index(marker):]:
                self.port = int(text[text.index(marker) + len(marker):].split()[0])
            elif self.process.poll() is not None:
                raise RuntimeError("the server exited: " + self.stderr())
            elif time.monotonic() > deadline:
                raise RuntimeError("the server printed no port: " + self.stderr())
            else:
                time.sleep(0.02)
        while True:
            try:
                status, _, _ = self.request("GET", "/health")
                if status == 200:
                    break
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError("/health never answered 200: " + self.stderr())
            time.sleep(0.02)

    def stdout(self):
        with open(self.out_path, encoding="utf-8", errors="replace") as f:
            return f.read()

    def stderr(self):
        with open(self.err_path, encoding="utf-8", errors="replace") as f:
            return f.read()

    def connection(self, timeout=60):
        return http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)

    def request(self, method, path, body=None, headers=None, timeout=60):
        """One request; returns (status, headers, body bytes)."""
        connection = self.connection(timeout)
        try:
            data = body if isinstance(body, (bytes, type(None))) else json.dumps(body).encode()
            connection.request(method, path, body=data,
                               headers={"Content-Type": "application/json", **(headers or {})})
            response = connection.getresponse()
            return response.status, dict(response.getheaders()), response.read()
        finally:
            connection.close()

    def post_json(self, path, body, expected=200):
        status, _, data = self.request("POST", path, body)
        if status != expected:
            raise AssertionError(f"{path} {body} -> {status} {data[:300]!r}")
        return json.loads(data)

    def stream(self, path, body, timeout=60):
        """A streamed POST: (status, content type, list of parsed data objects, ended with [DONE])."""
        connection = self.connection(timeout)
        try:
            connection.request("POST", path, body=json.dumps(body).encode(),
                               headers={"Content-Type": "application/json"})
            response = connection.getresponse()
            content_type = response.getheader("Content-Type", "")
            if response.status != 200:
                return response.status, content_type, [json.loads(response.read())], False
            return (response.status, content_type, *parse_sse(response))
        finally:
            connection.close()

    def terminate(self, timeout=60):
        """SIGTERM, then the exit status."""
        self.process.send_signal(signal.SIGTERM)
        return self.process.wait(timeout=timeout)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()


def parse_sse(lines):
    """Server-sent events from an iterable of byte lines: (data objects, ended with [DONE]). Every
    event must be one `data:` line followed by a blank line, and nothing may follow [DONE]."""
    objects, done, pending = [], False, None
    for raw in lines:
        line = raw.decode("utf-8").rstrip("\r\n")
        if line == "":
            if pending is None:
                raise AssertionError("a blank line without an event")
            if pending == "[DONE]":
                done = True
            else:
                objects.append(json.loads(pending))
            pending = None
            continue
        if done:
            raise AssertionError("data after [DONE]: " + line)
        if not line.startswith("data: ") or pending is not None:
            raise AssertionError("not a one-line data event: " + line)
        pending = line[len("data: "):]
    if pending is not None:
        raise AssertionError("an event without its blank line")
    return objects, done


def stream_text(kind, chunks):
    """The text of a stream's chunks, its finish reasons and the usage of its final chunk."""
    text, finishes, usage = "", [], None
    for chunk in chunks:
        if "error" in chunk:
            raise AssertionError("an error in the stream: " + json.dumps(chunk))
        if chunk.get("usage") and chunk["choices"]:
            usage = chunk["usage"]
        for choice in chunk["choices"]:
            text += choice["delta"].get("content", "") if kind == "chat" else choice["text"]
            if choice["finish_reason"] is not None:
                finishes.append(choice["finish_reason"])
    return text, finishes, usage
