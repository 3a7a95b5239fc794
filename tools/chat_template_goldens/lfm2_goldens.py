#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Writes tests/data/chat_templates/lfm2_goldens.json: LFM2's published chat templates
(lfm2-8b-a1b.jinja, lfm2.5-instruct.jinja) rendered with Python's jinja2, set up as transformers'
apply_chat_template sets it up (check_python.py's environment), over conversations that reach
every branch they have: a system prompt, tools (as mappings and as strings), tool results, list
contents (tojson), and LFM2.5's thinking of earlier assistant turns (dropped unless
keep_past_thinking). Each case has goldens.json's form. Needs jinja2 only:
python3 tools/chat_template_goldens/lfm2_goldens.py
"""
import json
import pathlib

from check_python import DIR, environment

TEMPLATES = ["lfm2-8b-a1b.jinja", "lfm2.5-instruct.jinja"]
BOS, EOS = "<|startoftext|>", "<|im_end|>"
TOOL = {"type": "function", "function": {"name": "get_weather", "description": "Weather of a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}

CONVERSATIONS = {
    "single_user": {"messages": [{"role": "user", "content": "Hello! How are you?"}]},
    "system_user": {"messages": [{"role": "system", "content": "You are terse."},
                                 {"role": "user", "content": "Name a prime."}]},
    "multi_turn": {"messages": [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello."},
                                {"role": "user", "content": "Sum 2 and 3 {{ not jinja }} <b>&amp;</b>"}]},
    "unicode_empty": {"messages": [{"role": "user", "content": "Grüße, 世界 🌍"},
                                   {"role": "assistant", "content": ""}, {"role": "user", "content": " \n"}]},
    "tools": {"messages": [{"role": "user", "content": "Weather in Paris?"}], "tools": [TOOL]},
    "system_tools_string": {"messages": [{"role": "system", "content": "Be brief."},
                                         {"role": "user", "content": "Weather?"}],
                            "tools": ["{\"name\": \"f\"}", TOOL]},
    "tool_result": {"messages": [{"role": "user", "content": "Weather in Paris?"},
                                 {"role": "assistant",
                                  "content": "<|tool_call_start|>[get_weather(city=\"Paris\")]<|tool_call_end|>"},
                                 {"role": "tool", "content": "{\"temp\": 21}"}], "tools": [TOOL]},
    "list_content": {"messages": [{"role": "user", "content": [{"type": "text", "text": "a"}, 2.0, None]}]},
    "past_thinking": {"messages": [{"role": "user", "content": "Q1"},
                                   {"role": "assistant", "content": "<think>\nhmm\n</think>\n\nA1"},
                                   {"role": "user", "content": "Q2"},
                                   {"role": "assistant", "content": "<think>x</think>A2"}]},
    "past_thinking_kept": {"messages": [{"role": "user", "content": "Q1"},
                                        {"role": "assistant", "content": "<think>hmm</think> A1"},
                                        {"role": "user", "content": "Q2"}], "keep_past_thinking": True},
}


def main():
    env = environment(0)
    cases = []
    for name in TEMPLATES:
        template = env.from_string((DIR / name).read_text(encoding="utf-8"))
        for conversation, variables in CONVERSATIONS.items():
            for add_generation_prompt in (True, False):
                text = template.render(**{"add_generation_prompt": add_generation_prompt, "bos_token": BOS,
                                          "eos_token": EOS, "tools": None, "documents": None, **variables})
                cases.append({"template": name, "conversation": conversation,
                              "add_generation_prompt": add_generation_prompt, "bos_token": BOS, "eos_token": EOS,
                              "variables": variables, "expected": text})
    out = DIR / "lfm2_goldens.json"
    out.write_text(json.dumps({"generator": "tools/chat_template_goldens/lfm2_goldens.py (jinja2 "
                               + __import__("jinja2").__version__ + ")", "cases": cases},
                              ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    print(f"{len(cases)} cases written to {out}")


if __name__ == "__main__":
    main()
