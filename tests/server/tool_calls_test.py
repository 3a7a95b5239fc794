#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Tool calls and reasoning through a real `mambacpp serve` (standard library only), on a tiny
random checkpoint given a published chat template: with Granite-4.0's template and tool_choice
"required" (or a named function) the grammar makes the random model write a call, which comes back
in message.tool_calls / delta.tool_calls with finish_reason "tool_calls", its arguments valid for
the function's schema, and the same call streamed and not; parallel_tool_calls false allows one.
With Nemotron-3-Nano's template (its generation prompt opens the thinking block) the reply is
reasoning_content, as `--reasoning-format none` shows it in the content, and thinking_budget_tokens
closes the block after that many tokens, so the rest is the answer. Bad --reasoning-format and
--reasoning-budget values are refused at start. Run by ctest (server_tool_calls_test)."""

import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from serve_util import Server, cli_command, make_model  # noqa: E402

TEMPLATES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data", "chat_templates")

WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "The weather in a city.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string", "maxLength": 12},
                                                    "days": {"type": "integer"}},
                   "required": ["city", "days"], "additionalProperties": False}}}
TIME = {"type": "function", "function": {"name": "get_time", "parameters": {
    "type": "object", "properties": {"zone": {"type": "string", "enum": ["UTC", "CET"]}},
    "required": ["zone"], "additionalProperties": False}}}


def check(condition, message):
    if not condition:
        raise AssertionError(message)


def model_with_template(folder, template):
    make_model(folder)
    with open(os.path.join(TEMPLATES, template), encoding="utf-8") as f:
        source = f.read()
    config = {"bos_token": "<|endoftext|>", "eos_token": "<|endoftext|>", "chat_template": source}
    with open(os.path.join(folder, "tokenizer_config.json"), "w", encoding="utf-8") as f:
        json.dump(config, f)
    return folder


def chat(server, **fields):
    body = {"messages": [{"role": "user", "content": "Weather in Paris?"}], "temperature": 0, **fields}
    return server.post_json("/v1/chat/completions", body)


def streamed(server, **fields):
    """The streamed reply put together: content, reasoning, the calls by index, finish_reason."""
    body = {"messages": [{"role": "user", "content": "Weather in Paris?"}], "temperature": 0, "stream": True,
            **fields}
    status, _, chunks, done = server.stream("/v1/chat/completions", body)
    check(status == 200 and done, f"stream failed: {status} {chunks}")
    content, reasoning, calls, finish = "", "", [], None
    for chunk in chunks:
        for choice in chunk.get("choices", []):
            delta = choice.get("delta", {})
            content += delta.get("content") or ""
            reasoning += delta.get("reasoning_content") or ""
            for piece in delta.get("tool_calls", []):
                if piece["index"] == len(calls):
                    check(piece.get("id", "").startswith("call_") and piece["type"] == "function" and
                          piece["function"]["arguments"] == "", f"a call's first piece: {piece}")
                    calls.append({"name": piece["function"]["name"], "arguments": ""})
                else:
                    check("id" not in piece, f"a later piece repeats the id: {piece}")
                    calls[piece["index"]]["arguments"] += piece["function"]["arguments"]
            finish = choice.get("finish_reason") or finish
    return content, reasoning, calls, finish


def test_forced_calls(folder):
    model = model_with_template(os.path.join(folder, "granite"), "granite-4.0.jinja")
    with Server(model) as server:
        for choice in ("required", {"type": "function", "function": {"name": "get_time"}}):
            reply = chat(server, tools=[WEATHER, TIME], tool_choice=choice, max_tokens=120, seed=5)
            message = reply["choices"][0]["message"]
            check(reply["choices"][0]["finish_reason"] == "tool_calls", f"finish_reason: {reply}")
            check(message["content"] is None, f"content of a call-only reply: {message}")
            calls = message.get("tool_calls") or []
            check(len(calls) >= 1, f"no call: {message}")
            for call in calls:
                check(call["id"].startswith("call_") and len(call["id"]) == 29, f"call id: {call}")
                arguments = json.loads(call["function"]["arguments"])
                if call["function"]["name"] == "get_weather":
                    check(set(arguments) == {"city", "days"} and isinstance(arguments["days"], int) and
                          isinstance(arguments["city"], str) and len(arguments["city"]) <= 12, f"arguments: {call}")
                else:
                    check(call["function"]["name"] == "get_time" and arguments["zone"] in ("UTC", "CET"),
                          f"the call: {call}")
            if choice != "required":
                check(all(c["function"]["name"] == "get_time" for c in calls), f"named function: {calls}")
            # Streamed, the same calls arrive as a name, then the arguments.
            content, _, streamed_calls, finish = streamed(server, tools=[WEATHER, TIME], tool_choice=choice,
                                                          max_tokens=120, seed=5)
            check(finish == "tool_calls" and content == "", f"streamed: {finish} {content!r}")
            check(streamed_calls == [{"name": c["function"]["name"], "arguments": c["function"]["arguments"]}
                                     for c in calls], f"streamed calls {streamed_calls} != {calls}")
        # parallel_tool_calls false: exactly one call.
        reply = chat(server, tools=[WEATHER, TIME], tool_choice="required", parallel_tool_calls=False,
                     max_tokens=120, seed=9)
        check(len(reply["choices"][0]["message"]["tool_calls"]) == 1, f"one call: {reply}")
        # tool_choice none and auto: the random model's text is content, not a call.
        for choice in ("none", "auto"):
            reply = chat(server, tools=[WEATHER], tool_choice=choice, max_tokens=12)
            check("tool_calls" not in reply["choices"][0]["message"] and
                  reply["choices"][0]["finish_reason"] == "length", f"tool_choice {choice}: {reply}")


def test_reasoning(folder):
    model = model_with_template(os.path.join(folder, "nemotron"), "nemotron-3-nano.jinja")
    # Greedy, the random model writes newlines only; hot seeded sampling writes varied bytes.
    hot = {"temperature": 3.0, "seed": 7}
    with Server(model) as server, Server(model, "--reasoning-format", "none") as plain:
        # The prompt opened the thinking block: the whole reply is reasoning, which the server
        # without the split returns as the content, the same text.
        split = chat(server, max_tokens=16, **hot)["choices"][0]["message"]
        kept = chat(plain, max_tokens=16, **hot)["choices"][0]["message"]
        check(split["content"] == "" and split["reasoning_content"], f"the split reply: {split}")
        check("reasoning_content" not in kept and kept["content"].lstrip() == split["reasoning_content"],
              f"--reasoning-format none: {kept} vs {split}")
        content, reasoning, _, _ = streamed(server, max_tokens=16, **hot)
        check(reasoning == split["reasoning_content"] and content == "", f"streamed reasoning: {reasoning!r}")
        # A budget of 4 tokens: the close marker is forced after them, and the rest is the answer.
        budget = chat(server, max_tokens=40, thinking_budget_tokens=4, **hot)
        message = budget["choices"][0]["message"]
        check(message.get("reasoning_content", "") != split["reasoning_content"] and
              split["reasoning_content"].startswith(message.get("reasoning_content", "").strip()),
              f"the budgeted reasoning: {message} vs {split}")
        check(message["content"], f"no answer after the forced close: {message}")
        # thinking off: nothing is reasoning.
        off = chat(server, max_tokens=8, chat_template_kwargs={"enable_thinking": False}, **hot)["choices"][0]["message"]
        check("reasoning_content" not in off and off["content"], f"enable_thinking false: {off}")


def test_flags(folder):
    # Bad values of the serve flags are refused at start, naming the flag.
    model = make_model(os.path.join(folder, "flags"))
    for flags, message in ((["--reasoning-format", "bogus"], "--reasoning-format must be none or auto"),
                           (["--reasoning-budget", "-2"], "--reasoning-budget must be in [-1,")):
        result = subprocess.run(cli_command() + ["serve", "-m", model, *flags], capture_output=True, text=True,
                                timeout=60)
        check(result.returncode != 0 and message in result.stderr, f"{flags}: {result.returncode} {result.stderr}")


def main():
    folder = tempfile.mkdtemp(prefix="mambacpp_tool_calls_")
    test_flags(folder)
    test_reasoning(folder)
    test_forced_calls(folder)
    print("tool calls test: OK")
    return 0


if __name__ == "__main__":
    sys.exit(main())
