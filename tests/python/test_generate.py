# SPDX-License-Identifier: MIT
"""The Python package's generation: generate, create_completion and create_chat_completion,
whole and streamed, their OpenAI response shapes, the prefix cache, errors and Ctrl-C."""

import json
import os
import shutil
import signal
import subprocess
import threading
import time

import pytest

import mambacpp
from conftest import cli


def test_generate_matches_the_cli(lm, models):
    text = lm.generate("The state space model", max_tokens=12, temperature=0)
    assert isinstance(text, str) and text
    result = subprocess.run(cli() + ["run", "-m", models["lm"], "-p", "The state space model", "-n", "12",
                                     "--temp", "0", "-t", "1"],
                            check=True, capture_output=True, text=True)
    assert text in result.stdout


@pytest.mark.parametrize("sampling", [dict(temperature=0), dict(temperature=0.9, seed=7, top_k=0, min_p=0)])
def test_streaming_equals_whole(lm, sampling):
    whole = lm.generate("Once upon a time", max_tokens=20, **sampling)
    pieces = list(lm.generate("Once upon a time", max_tokens=20, stream=True, **sampling))
    assert len(pieces) > 1 and all(isinstance(p, str) for p in pieces)
    assert "".join(pieces) == whole
    ids = lm.tokenize("Once upon a time")
    assert lm.generate(ids, max_tokens=20, **sampling) == whole


def test_a_seed_fixes_the_sample(lm):
    runs = [lm.generate("abc", max_tokens=16, temperature=1.0, seed=11, top_k=0, min_p=0) for _ in range(2)]
    assert runs[0] == runs[1]


def test_completion_shapes(lm):
    response = lm.create_completion("Hello", max_tokens=5, temperature=0)
    assert response["object"] == "text_completion" and response["id"].startswith("cmpl-")
    assert isinstance(response["created"], int) and response["model"]
    choice = response["choices"][0]
    assert choice["index"] == 0 and choice["finish_reason"] in ("length", "stop")
    assert choice["text"] == lm.generate("Hello", max_tokens=5, temperature=0)
    usage = response["usage"]
    assert usage["prompt_tokens"] == len(lm.tokenize("Hello"))
    assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"]
    chunks = list(lm.create_completion("Hello", max_tokens=5, temperature=0, stream=True))
    assert all(chunk["object"] == "text_completion" for chunk in chunks)
    assert "".join(chunk["choices"][0]["text"] for chunk in chunks if chunk["choices"]) == choice["text"]
    assert chunks[-1]["choices"][0]["finish_reason"] == choice["finish_reason"]


def test_n_choices_equal_their_solo_requests_whole_and_streamed(lm):
    base = dict(prompt="Once", max_tokens=6, temperature=1.0, top_k=0, min_p=0, presence_penalty=0.5,
                logprobs=1)
    response = lm._request("completion", json.dumps(dict(base, n=3, seed=21)), False)
    assert [choice["index"] for choice in response["choices"]] == [0, 1, 2]
    solos = [lm._request("completion", json.dumps(dict(base, seed=21 + i)), False) for i in range(3)]
    for choice, solo in zip(response["choices"], solos):
        assert choice["text"] == solo["choices"][0]["text"]
        assert choice["logprobs"]["token_logprobs"] == solo["choices"][0]["logprobs"]["token_logprobs"]
    assert response["usage"]["prompt_tokens"] == solos[0]["usage"]["prompt_tokens"]
    assert response["usage"]["completion_tokens"] == sum(s["usage"]["completion_tokens"] for s in solos)
    streamed = ["", "", ""]
    for chunk in lm._request("completion", json.dumps(dict(base, n=3, seed=21, stream=True)), True):
        for choice in chunk["choices"]:
            streamed[choice["index"]] += choice["text"]
    assert streamed == [solo["choices"][0]["text"] for solo in solos]


def test_chat_completion_whole_streamed_and_cached(lm):
    messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi there"}]
    response = lm.create_chat_completion(messages, max_tokens=8, temperature=0)
    assert response["object"] == "chat.completion" and response["id"].startswith("chatcmpl-")
    message = response["choices"][0]["message"]
    assert message["role"] == "assistant" and isinstance(message["content"], str)
    chunks = list(lm.create_chat_completion(messages, max_tokens=8, temperature=0, stream=True))
    assert chunks[0]["choices"][0]["delta"].get("role") == "assistant"
    streamed = "".join(c["choices"][0]["delta"].get("content", "") for c in chunks if c["choices"])
    assert streamed == message["content"]
    # The follow-up turn repeats the conversation: its prefix comes from the cache.
    follow_up = messages + [message, {"role": "user", "content": "And then?"}]
    second = lm.create_chat_completion(follow_up, max_tokens=4, temperature=0)
    assert second["usage"]["prompt_tokens_details"]["cached_tokens"] > 0


def test_chat_completion_gives_the_template_tools_tool_calls_and_keyword_arguments(models, tmp_path):
    # A template that prints what it is given, in a copy of the checkpoint.
    folder = tmp_path / "templated"
    shutil.copytree(models["lm"], folder)
    (folder / "tokenizer_config.json").write_text(json.dumps({"chat_template": (
        "{{ tools | tojson }}|{% for m in messages %}{{ m | tojson }};{% endfor %}{{ enable_thinking }}"
        "{% if add_generation_prompt %}>{% endif %}")}))
    model = mambacpp.Model(str(folder), threads=1)
    tools = [{"type": "function", "function": {"name": "weather", "parameters": {"type": "object"}}}]
    messages = [{"role": "user", "content": [{"type": "text", "text": "Weather?"}]},
                {"role": "assistant", "content": None, "tool_calls": [
                    {"id": "c1", "type": "function", "function": {"name": "weather", "arguments": "{}"}}]},
                {"role": "tool", "tool_call_id": "c1", "content": "9 \u00b0C"}]
    # What transformers renders: Python's json.dumps is its tojson; this template prints a list
    # content's JSON, so it is given the text instead.
    given = [dict(messages[0], content="Weather?")] + messages[1:]
    expected = (json.dumps(tools, ensure_ascii=False) + "|"
                + "".join(json.dumps(m, ensure_ascii=False) + ";" for m in given) + "False>")
    # The prompt is the expected text's tokens: it resumes in full from the state that text left.
    prompt_tokens = model.create_completion(expected, max_tokens=1)["usage"]["prompt_tokens"]
    reply = model.create_chat_completion(messages, tools=tools, chat_template_kwargs={"enable_thinking": False},
                                         max_tokens=2)
    assert reply["usage"]["prompt_tokens"] == prompt_tokens
    assert reply["usage"]["prompt_tokens_details"]["cached_tokens"] == prompt_tokens
    with pytest.raises(mambacpp.Error, match="is an image"):
        model.create_chat_completion([{"role": "user", "content": [{"type": "image_url", "image_url": {}}]}])
    with pytest.raises(mambacpp.Error, match="cannot show tools"):
        mambacpp.Model(models["lm"], threads=1).create_chat_completion(messages, tools=tools, max_tokens=2)


def test_bad_requests_raise_errors(lm):
    for bad in (dict(temperature=-1), dict(top_p=2.0), dict(top_k=-3), dict(min_p=1.5), dict(max_tokens=-1),
                dict(repeat_penalty=0)):
        with pytest.raises(mambacpp.Error):
            lm.generate("x", **bad)
    with pytest.raises(mambacpp.Error, match="outside the vocabulary|token id"):
        lm.generate([1, 99999], max_tokens=2)
    with pytest.raises(mambacpp.Error):
        lm.generate("", max_tokens=2)
    with pytest.raises(mambacpp.Error):
        lm.create_chat_completion([{"content": "no role"}], max_tokens=2)
    with pytest.raises(mambacpp.Error):
        lm.create_chat_completion("not a list", max_tokens=2)
    with pytest.raises(mambacpp.Error):
        lm.create_completion("x", stream=True, temperature=float("nan"))
    assert lm.generate("x", max_tokens=2, temperature=0) is not None  # still serving


def test_a_stream_closed_early_frees_its_slot(lm):
    for _ in range(8):  # more than the scheduler's slots
        stream = lm.generate("abc", max_tokens=1000, temperature=0, stream=True, ignore_eos=True)
        next(stream)
        stream.close()
    assert lm.generate("abc", max_tokens=3, temperature=0) == lm.generate("abc", max_tokens=3, temperature=0)


def test_generations_from_threads_equal_serial_ones(lm):
    prompts = ["one", "two two", "three three three"]
    expected = [lm.generate(p, max_tokens=10, temperature=0) for p in prompts]
    results = {}

    def work(i):
        results[i] = lm.generate(prompts[i], max_tokens=10, temperature=0)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(len(prompts))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert [results[i] for i in range(len(prompts))] == expected


@pytest.mark.skipif(threading.current_thread() is not threading.main_thread(), reason="signals need the main thread")
def test_ctrl_c_stops_a_generation(lm):
    timer = threading.Timer(0.3, lambda: os.kill(os.getpid(), signal.SIGINT))
    start = time.monotonic()
    timer.start()
    with pytest.raises(KeyboardInterrupt):
        lm.generate("abc", max_tokens=10**7, temperature=0, ignore_eos=True)
    assert time.monotonic() - start < 30
    timer.join()
    assert lm.generate("abc", max_tokens=2, temperature=0) is not None  # the model still works
