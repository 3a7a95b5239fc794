// SPDX-License-Identifier: MIT
// Fuzzes chat templates: the fuzzer's bytes are parsed as a Jinja template and rendered over a
// fixed conversation (with and without the generation prompt), under small limits so that every
// input finishes quickly, through both entry points: render() with plain messages and
// render_json() with the same messages, then with tools, tool calls, documents and keyword
// arguments as the hybrids' templates take them. Parsing and rendering must only ever refuse with
// mb::Error; a template that renders must render the same text twice (rendering keeps no state
// between calls); and render() and render_json() of the same plain messages must agree, text or
// error.
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "chat/chat_template.h"
#include "fuzz_support.h"

namespace {

// The text, or the error, of one render.
std::string outcome(const std::function<std::string()>& render) {
  try {
    return "ok:" + render();
  } catch (const mb::Error& e) {
    if (std::string_view(e.what()).starts_with("internal check failed"))
      mb::fuzz::abort_on_internal_check(e.what());
    return std::string("error:") + e.what();
  }
}

void fail(const char* what) {
  std::fprintf(stderr, "%s\n", what);
  std::abort();
}

// The plain messages below as render_json takes them.
constexpr std::string_view kPlainJson =
    R"({"messages": [{"role": "system", "content": "You are helpful."}, {"role": "user", "content": "Hi {{ there }} é 🙂"},
        {"role": "assistant", "content": ""}, {"role": "user", "content": "  bye\n"}]})";

// What the hybrids' templates render besides plain messages: tools (wrapped and flat), tool calls
// with mapping and string arguments, a null content, list contents, reasoning, documents and
// keyword arguments.
constexpr std::string_view kRichJson = R"({
  "messages": [
    {"role": "system", "content": [{"type": "text", "text": "/no_think Be brief."}, {"type": "image"}]},
    {"role": "user", "content": "Weather? /think"},
    {"role": "assistant", "content": null, "reasoning_content": "Look it up.",
     "tool_calls": [{"id": "c1", "type": "function",
                     "function": {"name": "get_weather", "arguments": {"city": "Oslo", "days": 2, "hot": false}}},
                    {"type": "function", "function": {"name": "now", "arguments": "{}"}}]},
    {"role": "tool", "tool_call_id": "c1", "content": "{\"t\": 9.5}"},
    {"role": "tool", "content": "12:00"},
    {"role": "assistant", "content": "<think>ok</think>Nine degrees."}],
  "tools": [{"type": "function", "function": {"name": "get_weather", "description": " Weather. ",
             "parameters": {"type": "object", "properties": {"city": {"type": "string", "enum": ["Oslo"]},
                            "days": {"type": "integer", "default": 1}}, "required": ["city"],
                            "additionalProperties": false}}},
            {"name": "now", "parameters": {}}],
  "documents": [{"doc_id": 1, "title": "T", "text": "Body"}],
  "enable_thinking": false, "truncate_history_thinking": true})";

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view source(reinterpret_cast<const char*>(data), size);
  static const std::vector<mb::ChatMessage> messages = {{"system", "You are helpful."},
                                                        {"user", "Hi {{ there }} é 🙂"},
                                                        {"assistant", ""},
                                                        {"user", "  bye\n"}};
  mb::ChatRenderOptions options;
  options.bos_token = "<s>";
  options.eos_token = "</s>";
  options.now_unix_seconds = 1734611696;
  options.max_output_bytes = 1 << 16;
  options.max_loop_iterations = 2000;
  options.max_recursion_depth = 16;
  mb::fuzz::expect_clean_refusal([&] {
    const mb::ChatTemplate chat_template = mb::ChatTemplate::parse(source);
    for (const bool prompt : {true, false}) {
      options.add_generation_prompt = prompt;
      const std::string plain = outcome([&] { return chat_template.render(messages, options); });
      if (outcome([&] { return chat_template.render(messages, options); }) != plain)
        fail("a chat template rendered differently the second time");
      if (outcome([&] { return chat_template.render_json(kPlainJson, options); }) != plain)
        fail("render_json and render disagree on the same plain messages");
      const std::string rich = outcome([&] { return chat_template.render_json(kRichJson, options); });
      if (outcome([&] { return chat_template.render_json(kRichJson, options); }) != rich)
        fail("a chat template rendered tools and tool calls differently the second time");
    }
  });
  return 0;
}
