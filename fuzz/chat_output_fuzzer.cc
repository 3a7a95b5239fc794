// SPDX-License-Identifier: MIT
// Fuzzes the chat output parser (src/server/chat_output.h), which reads what a model writes, and
// a model writes what its prompt steers it to. The first byte picks the tool-call format and the
// options, the second the size of the pieces the rest is fed in. The parse must never throw;
// the streamed deltas must add up to what the parser reports; pieces of any size must give the
// same split as the whole text; and every call it reports must name an offered function and
// carry a JSON object as its arguments.
#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "server/chat_output.h"

namespace {

using mb::server::ChatDelta;
using mb::server::ChatFormat;
using mb::server::ChatOutputParser;
using mb::server::ChatParseOptions;
using mb::server::ToolCallFormat;

void fail(const char* what) {
  std::fprintf(stderr, "chat_output_fuzzer: %s\n", what);
  std::abort();
}

struct Split {
  std::string content, reasoning;
  std::vector<std::pair<std::string, std::string>> calls;
};

Split parse(const ChatFormat& format, const ChatParseOptions& options, std::string_view text, size_t piece) {
  ChatOutputParser parser(format, options);
  Split streamed;
  const auto add = [&](const ChatDelta& delta) {
    streamed.content += delta.content;
    streamed.reasoning += delta.reasoning;
    for (const auto& call : delta.tool_calls) {
      if (call.index != streamed.calls.size()) fail("a call piece out of order");
      streamed.calls.emplace_back(call.name, call.arguments);
    }
  };
  for (size_t at = 0; at < text.size(); at += piece) add(parser.feed(text.substr(at, piece)));
  add(parser.finish());
  if (streamed.content != parser.content() || streamed.reasoning != parser.reasoning() ||
      streamed.calls.size() != parser.tool_calls().size())
    fail("the streamed deltas differ from the parse");
  for (const auto& call : parser.tool_calls()) {
    if (call.id.size() != 29 || call.id.rfind("call_", 0) != 0) fail("a malformed call id");
    bool offered = false;
    for (const auto& name : options.tool_names) offered = offered || name == call.name;
    if (!offered) fail("a call to a function that was not offered");
    const auto arguments = nlohmann::json::parse(call.arguments, nullptr, false);
    if (!arguments.is_object()) fail("a call whose arguments are not a JSON object");
  }
  return streamed;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  const uint8_t flags = data[0];
  const size_t piece = 1 + data[1] % 16;
  const std::string_view text(reinterpret_cast<const char*>(data + 2), size - 2);
  ChatFormat format;
  format.tools = static_cast<ToolCallFormat>(flags % 4);
  if (flags & 4) {
    format.think_open = "<think>";
    format.think_close = "</think>";
  }
  ChatParseOptions options;
  options.reasoning = (flags & 8) == 0;
  options.starts_in_reasoning = (flags & 16) != 0;
  options.tool_calls = (flags & 32) == 0;
  if ((flags & 64) == 0) options.tool_names = {"get_weather", "f"};
  const Split whole = parse(format, options, text, text.empty() ? 1 : text.size());
  const Split pieces = parse(format, options, text, piece);
  if (whole.content != pieces.content || whole.reasoning != pieces.reasoning || whole.calls != pieces.calls)
    fail("pieces split the text differently from the whole");
  return 0;
}
