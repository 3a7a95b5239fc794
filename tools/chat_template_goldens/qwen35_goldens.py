#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Writes tests/data/chat_templates/qwen35_goldens.json: Qwen3.5's published chat template
(qwen3.5.jinja) rendered with Python's jinja2, set up as transformers' apply_chat_template sets it
up (check_python.py's environment), over conversations that reach its branches: a system prompt,
thinking on and off (enable_thinking, as chat_template_kwargs pass it), a keyword argument the
template does not read, earlier turns' reasoning (reasoning_content, or <think> in the content),
dropped before the last user query and kept after it, tools with and without a system prompt, tool
calls (mapping, list, number, boolean and string arguments; several in one turn; with and without
text), consecutive tool results, list contents with text and image parts. Each case has
goldens.json's form. Needs jinja2 only: python3 tools/chat_template_goldens/qwen35_goldens.py
"""
import json

from check_python import DIR, environment

TEMPLATE = "qwen3.5.jinja"
BOS, EOS = "", "<|im_end|>"
WEATHER = {"type": "function", "function": {"name": "get_weather", "description": "Weather of a city",
           "parameters": {"type": "object", "properties": {"city": {"type": "string"},
                                                           "days": {"type": "integer"}}, "required": ["city"]}}}
SEARCH = {"type": "function", "function": {"name": "search", "description": "Search the web",
          "parameters": {"type": "object", "properties": {"query": {"type": "string"}}}}}
CALL = {"type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris", "days": 3}}}
RICH_CALL = {"id": "call_1", "type": "function",
             "function": {"name": "search", "arguments": {"query": "Grüße \"quoted\"\nline 2",
                                                          "filters": {"lang": "de", "max": 5},
                                                          "sites": ["a.org", "b.org"], "exact": True}}}
Q = {"role": "user", "content": "Weather in Paris?"}

CONVERSATIONS = {
    "single_user": {"messages": [{"role": "user", "content": "Hello! How are you?"}]},
    "system_user": {"messages": [{"role": "system", "content": "  You are terse.\n"},
                                 {"role": "user", "content": "Name a prime."}]},
    "multi_turn": {"messages": [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello."},
                                {"role": "user", "content": "Sum 2 and 3 {{ not jinja }} <b>&amp;</b>"}]},
    "thinking_off": {"messages": [{"role": "user", "content": "Quick: 2+2?"}], "enable_thinking": False},
    "thinking_on": {"messages": [{"role": "user", "content": "Prove it."}], "enable_thinking": True},
    "unread_kwarg": {"messages": [{"role": "user", "content": "Hi"}], "reasoning_effort": "high",
                     "custom_flag": 3},
    "unicode_empty": {"messages": [{"role": "user", "content": "Grüße, 世界 🌍"},
                                   {"role": "assistant", "content": ""}, {"role": "user", "content": " \n x"}]},
    "past_reasoning_dropped": {"messages": [{"role": "user", "content": "Q1"},
                                            {"role": "assistant", "content": "A1", "reasoning_content": "hmm"},
                                            {"role": "user", "content": "Q2"},
                                            {"role": "assistant", "content": "<think>\nx\n</think>\n\nA2"},
                                            {"role": "user", "content": "Q3"}]},
    "reasoning_after_query": {"messages": [{"role": "user", "content": "Q1"},
                                           {"role": "assistant", "content": "\nA1 ",
                                            "reasoning_content": "\n step one\n"}]},
    "think_in_content": {"messages": [{"role": "user", "content": "Q1"},
                                      {"role": "assistant", "content": "<think>\nplan\n</think>\n\nA1"}]},
    "tools": {"messages": [Q], "tools": [WEATHER, SEARCH]},
    "system_tools": {"messages": [{"role": "system", "content": "Be brief."}, Q], "tools": [WEATHER]},
    "system_empty_tools": {"messages": [{"role": "system", "content": "  "}, Q], "tools": [WEATHER]},
    "tool_call": {"messages": [Q, {"role": "assistant", "content": "", "tool_calls": [CALL]}],
                  "tools": [WEATHER]},
    "tool_call_with_text": {"messages": [Q, {"role": "assistant", "content": "Let me check.",
                                             "reasoning_content": "need the tool", "tool_calls": [CALL]}],
                            "tools": [WEATHER]},
    "tool_calls_rich": {"messages": [{"role": "user", "content": "Find things"},
                                     {"role": "assistant", "content": None,
                                      "tool_calls": [RICH_CALL, {"name": "get_weather",
                                                                 "arguments": {"city": "Rome"}}]}],
                        "tools": [WEATHER, SEARCH]},
    "tool_results": {"messages": [Q, {"role": "assistant", "content": "", "tool_calls": [CALL, CALL]},
                                  {"role": "tool", "content": "{\"temp\": 21}"},
                                  {"role": "tool", "content": "sunny"},
                                  {"role": "assistant", "content": "21 and sunny.",
                                   "reasoning_content": "both came back"}],
                     "tools": [WEATHER], "enable_thinking": True},
    "tool_result_then_user": {"messages": [Q, {"role": "assistant", "content": "", "tool_calls": [CALL]},
                                           {"role": "tool", "content": "21"},
                                           {"role": "assistant", "content": "It is 21."},
                                           {"role": "user", "content": "Thanks"}], "tools": [WEATHER]},
    "tool_response_in_user": {"messages": [Q, {"role": "assistant", "content": "", "tool_calls": [CALL]},
                                           {"role": "user", "content": "<tool_response>\n21\n</tool_response>"}],
                              "tools": [WEATHER]},
    "list_content": {"messages": [{"role": "system", "content": [{"type": "text", "text": "Sys"}]},
                                  {"role": "user", "content": [{"type": "text", "text": "Look: "},
                                                               {"type": "image"}, {"type": "text", "text": "ok?"}]}]},
    "list_content_vision_id": {"messages": [{"role": "user", "content": [{"type": "image"}, {"type": "video"},
                                                                         {"type": "image", "image": "x.png"}]}],
                               "add_vision_id": True},
}


def main():
    env = environment(0)
    template = env.from_string((DIR / TEMPLATE).read_text(encoding="utf-8"))
    cases = []
    for conversation, variables in CONVERSATIONS.items():
        for add_generation_prompt in (True, False):
            text = template.render(**{"add_generation_prompt": add_generation_prompt, "bos_token": BOS,
                                      "eos_token": EOS, "tools": None, "documents": None, **variables})
            cases.append({"template": TEMPLATE, "conversation": conversation,
                          "add_generation_prompt": add_generation_prompt, "bos_token": BOS, "eos_token": EOS,
                          "variables": variables, "expected": text})
    out = DIR / "qwen35_goldens.json"
    out.write_text(json.dumps({"generator": "tools/chat_template_goldens/qwen35_goldens.py (jinja2 "
                               + __import__("jinja2").__version__ + ")", "cases": cases},
                              ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    print(f"{len(cases)} cases written to {out}")


if __name__ == "__main__":
    main()
