#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Renders every case of tests/data/chat_templates/goldens.json with Python's jinja2, set up as
transformers' apply_chat_template sets it up (an ImmutableSandboxedEnvironment with trim_blocks,
lstrip_blocks, loop controls and the {% generation %} tag; tojson as json.dumps with
ensure_ascii=False; raise_exception; strftime_now), and reports every case whose text differs from
the @huggingface/jinja golden. The goldens avoid the constructs where the two renderers disagree
(see README.md), so a difference here is a case to drop or to pin in the C++ tests. Needs jinja2
only: python3 tools/chat_template_goldens/check_python.py
"""
import datetime
import json
import pathlib
import sys

import jinja2
from jinja2.ext import Extension
from jinja2.sandbox import ImmutableSandboxedEnvironment

ROOT = pathlib.Path(__file__).resolve().parents[2]
DIR = ROOT / "tests" / "data" / "chat_templates"


class AssistantTracker(Extension):
    """transformers' {% generation %} ... {% endgeneration %}: renders its body."""

    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(["name:endgeneration"], drop_needle=True)
        return jinja2.nodes.CallBlock(self.call_method("_render", []), [], [], body).set_lineno(lineno)

    def _render(self, caller):
        return caller()


def environment(now_unix_seconds):
    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    def strftime_now(format):
        return datetime.datetime.fromtimestamp(now_unix_seconds, datetime.timezone.utc).strftime(format)

    env = ImmutableSandboxedEnvironment(
        trim_blocks=True, lstrip_blocks=True, extensions=[AssistantTracker, jinja2.ext.loopcontrols]
    )
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env


def main():
    goldens = json.loads((DIR / "goldens.json").read_text(encoding="utf-8"))
    env = environment(goldens["now_unix_seconds"])
    templates = {}
    differ = 0
    for case in goldens["cases"]:
        name = case["template"]
        if name not in templates:
            # As transformers reads a chat_template.jinja: text mode, so "\r\n" reads as "\n".
            templates[name] = env.from_string((DIR / name).read_text(encoding="utf-8"))
        variables = {
            "add_generation_prompt": case["add_generation_prompt"],
            "bos_token": case["bos_token"],
            "eos_token": case["eos_token"],
            "tools": None,
            "documents": None,
            **case["variables"],
        }
        where = f'{name} / {case["conversation"]} / add_generation_prompt={case["add_generation_prompt"]}'
        try:
            text = templates[name].render(**variables)
        except Exception as e:  # a template error is a difference too
            text = f"<{type(e).__name__}: {e}>"
        if text != case["expected"]:
            differ += 1
            print(f"DIFFERS {where}\n  python: {text!r}\n  golden: {case['expected']!r}")
    print(f"{len(goldens['cases'])} cases, {differ} differ from Python's jinja2 {jinja2.__version__}")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
