#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""`mambacpp serve --device vulkan` answers as `serve --device cpu` does, for Mamba-1, Mamba-2 and
Mamba-3 checkpoints: the same greedy and seeded completions, streamed or whole, cold and resumed from
the prefix cache, over a batch of concurrent requests. On a device with an exact fma (lavapipe) the Vulkan model gives the CPU's logits bit for
bit, so the texts are equal. Exits 77 (skipped) when no Vulkan device exists; run by ctest
(server_device_test) in builds with the Vulkan backend."""

import json
import os
import subprocess
import sys
import tempfile
import threading

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from serve_util import Server, cli_command, make_model, stream_text  # noqa: E402

SKIP = 77


def check(condition, message):
    if not condition:
        raise AssertionError(message)


def vulkan_device_exists():
    listing = subprocess.run(cli_command() + ["devices"], capture_output=True, text=True)
    return listing.returncode == 0 and "Vulkan device 0" in listing.stdout


def answers(server):
    """Completions of a fixed set of requests: alone, streamed, as a follow-up that resumes from the
    prefix cache, and four at once (one batched forward per step)."""
    prompt = "The lighthouse keeper climbed the stair"
    greedy = {"prompt": prompt, "max_tokens": 12, "temperature": 0, "ignore_eos": True}
    seeded = {"prompt": prompt, "max_tokens": 12, "temperature": 0.8, "seed": 7, "ignore_eos": True}
    out = {"greedy": server.post_json("/v1/completions", greedy)["choices"][0]["text"],
           "seeded": server.post_json("/v1/completions", seeded)["choices"][0]["text"]}
    _, _, chunks, done = server.stream("/v1/completions", {**greedy, "stream": True})
    check(done, "the stream did not end with [DONE]")
    out["streamed"] = stream_text("completion", chunks)[0]
    follow_up = server.post_json("/v1/completions", {**greedy, "prompt": prompt + out["greedy"] + " and"})
    out["follow_up"] = follow_up["choices"][0]["text"]
    out["follow_up_cached"] = follow_up["usage"]["prompt_tokens_details"]["cached_tokens"]
    batch = [None] * 4

    def one(i):
        body = {"prompt": f"Keeper {i} of the northern light", "max_tokens": 10, "temperature": 0,
                "ignore_eos": True}
        batch[i] = server.post_json("/v1/completions", body)["choices"][0]["text"]

    threads = [threading.Thread(target=one, args=(i,)) for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    out["batch"] = batch
    return out


def main():
    if not vulkan_device_exists():
        print("no Vulkan device: skipped")
        return SKIP
    folder = tempfile.mkdtemp(prefix="mambacpp_serve_device_")
    for arch in ("mamba1", "mamba2", "mamba3"):
        model = make_model(os.path.join(folder, arch), ("--arch", arch))
        results = {}
        for device in ("cpu", "vulkan"):
            with Server(model, "-t", "1", "-np", "4", "--cache-every", "8", "--device", device) as server:
                results[device] = answers(server)
                check(f"device {device}" in server.stdout(),
                      f"the server did not report its device: {server.stdout()}")
                check(server.terminate() == 0, server.stderr())
        cpu, gpu = results["cpu"], results["vulkan"]
        check(cpu["streamed"] == cpu["greedy"], f"cpu: streamed {cpu['streamed']!r} != whole {cpu['greedy']!r}")
        check(cpu["follow_up_cached"] > 0, f"the follow-up resumed nothing from the cache: {cpu}")
        for key in cpu:
            check(gpu[key] == cpu[key], f"{arch} {key}: vulkan {json.dumps(gpu[key])} != cpu {json.dumps(cpu[key])}")
        print(f"{arch}: serve --device vulkan answers as --device cpu:", json.dumps(gpu["greedy"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
