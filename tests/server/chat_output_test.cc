// SPDX-License-Identifier: MIT
// The chat output parser (src/server/chat_output.h): each template's format is detected from its
// source; replies in every format split into content, reasoning and tool calls the same whether
// they arrive whole or one byte at a time (so a marker split across pieces is found); malformed
// calls, calls to unknown functions and calls in a model without a tool format stay text.
#include "server/chat_output.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "common/test_util.h"

namespace mb::server {
namespace {

// What a parse produced, from the deltas it streamed (ids left out: they are random).
struct StreamedReply {
  std::string content, reasoning;
  std::vector<std::pair<std::string, std::string>> calls;  // name, arguments
};

void add_delta_to(StreamedReply& reply, const ChatDelta& delta) {
  reply.content += delta.content;
  reply.reasoning += delta.reasoning;
  for (const auto& piece : delta.tool_calls) {
    if (piece.index == reply.calls.size()) reply.calls.emplace_back(piece.name, "");
    ASSERT_LT(piece.index, reply.calls.size());
    reply.calls[piece.index].second += piece.arguments;
  }
}

// Parses `text` in pieces of `piece` bytes (0: whole) and checks that the streamed deltas add up
// to what the parser reports at the end.
StreamedReply parse_reply(const ChatFormat& format, const ChatParseOptions& options, const std::string& text,
                          size_t piece = 0) {
  ChatOutputParser parser(format, options);
  StreamedReply reply;
  if (piece == 0) piece = std::max<size_t>(text.size(), 1);
  for (size_t at = 0; at < text.size(); at += piece) add_delta_to(reply, parser.feed(text.substr(at, piece)));
  add_delta_to(reply, parser.finish());
  EXPECT_EQ(reply.content, parser.content());
  EXPECT_EQ(reply.reasoning, parser.reasoning());
  EXPECT_EQ(reply.calls.size(), parser.tool_calls().size());
  for (size_t i = 0; i < std::min(reply.calls.size(), parser.tool_calls().size()); ++i) {
    EXPECT_EQ(reply.calls[i].first, parser.tool_calls()[i].name);
    EXPECT_EQ(reply.calls[i].second, parser.tool_calls()[i].arguments);
  }
  return reply;
}

// The same reply whole, in pieces of 1, 2, 3 and 7 bytes: every split must give the same parse.
StreamedReply parse_every_way(const ChatFormat& format, const ChatParseOptions& options,
                              const std::string& text) {
  StreamedReply whole = parse_reply(format, options, text);
  for (size_t piece : {1, 2, 3, 7}) {
    StreamedReply split = parse_reply(format, options, text, piece);
    EXPECT_EQ(split.content, whole.content) << "pieces of " << piece;
    EXPECT_EQ(split.reasoning, whole.reasoning) << "pieces of " << piece;
    EXPECT_EQ(split.calls, whole.calls) << "pieces of " << piece;
  }
  return whole;
}

ChatFormat template_format(const std::string& file) {
  return detect_chat_format(test::read_data_file("chat_templates/" + file));
}

ChatParseOptions weather_tools() {
  ChatParseOptions options;
  options.tool_names = {"get_weather", "get_time"};
  return options;
}

using Calls = std::vector<std::pair<std::string, std::string>>;

TEST(ChatOutputFormat, DetectedFromEachTemplate) {
  EXPECT_EQ(template_format("granite-4.0.jinja").tools, ToolCallFormat::JsonInToolCallTags);
  EXPECT_EQ(template_format("qwen3.jinja").tools, ToolCallFormat::JsonInToolCallTags);
  EXPECT_EQ(template_format("qwen3.jinja").think_open, "<think>");
  EXPECT_EQ(template_format("nemotron-nano-9b-v2.jinja").tools, ToolCallFormat::ToolCallList);
  EXPECT_EQ(template_format("nemotron-nano-9b-v2.jinja").think_close, "</think>");
  EXPECT_EQ(template_format("nemotron-3-nano.jinja").tools, ToolCallFormat::XmlFunction);
  EXPECT_EQ(template_format("nemotron-3-nano.jinja").think_open, "<think>");
  EXPECT_EQ(template_format("nemotron-h-reasoning.jinja").tools, ToolCallFormat::None);
  EXPECT_EQ(template_format("nemotron-h-reasoning.jinja").think_open, "<think>");
  for (const char* plain : {"chatml.jinja", "llama-3-instruct.jinja", "granite-3.1-instruct.jinja"}) {
    EXPECT_EQ(template_format(plain).tools, ToolCallFormat::None) << plain;
    EXPECT_EQ(template_format(plain).think_open, "") << plain;
  }
  EXPECT_STREQ(tool_call_format_name(ToolCallFormat::XmlFunction), "xml-function");
}

TEST(ChatOutputParser, JsonInToolCallTagsWithReasoningAndSeveralCalls) {
  const std::string reply =
      "<think>\nThe user wants weather.\n</think>\n\nLet me check.\n<tool_call>\n"
      "{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"days\": 2}}\n</tool_call>\n"
      "<tool_call>\n{\"name\": \"get_time\", \"arguments\": {\"zone\": \"CET\"}}\n</tool_call>";
  StreamedReply parsed = parse_every_way(template_format("qwen3.jinja"), weather_tools(), reply);
  EXPECT_EQ(parsed.reasoning, "The user wants weather.");
  EXPECT_EQ(parsed.content, "Let me check.");
  EXPECT_EQ(parsed.calls,
            (Calls{{"get_weather", R"({"city":"Paris","days":2})"}, {"get_time", R"({"zone":"CET"})"}}));
}

TEST(ChatOutputParser, ToolCallListHoldsSeveralCallsInOneBlock) {
  const std::string reply =
      "<TOOLCALL>[{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\"}}, "
      "{\"name\": \"get_time\", \"arguments\": \"{\\\"zone\\\": \\\"UTC\\\"}\"}]</TOOLCALL>";
  StreamedReply parsed =
      parse_every_way(template_format("nemotron-nano-9b-v2.jinja"), weather_tools(), reply);
  EXPECT_EQ(parsed.content, "");
  EXPECT_EQ(parsed.calls, (Calls{{"get_weather", R"({"city":"Oslo"})"}, {"get_time", R"({"zone":"UTC"})"}}));
}

// parallel_tool_calls false: the first call is the reply's only one, in either kind of block.
TEST(ChatOutputParser, AtMostOneCallWhenParallelCallsAreOff) {
  ChatParseOptions single = weather_tools();
  single.max_tool_calls = 1;
  const std::string tags =
      "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>\n"
      "<tool_call>\n{\"name\": \"get_time\", \"arguments\": {\"zone\": \"CET\"}}\n</tool_call>";
  EXPECT_EQ(parse_every_way(template_format("qwen3.jinja"), single, tags).calls,
            (Calls{{"get_weather", R"({"city":"Paris"})"}}));
  const std::string list =
      "<TOOLCALL>[{\"name\": \"get_time\", \"arguments\": {\"zone\": \"UTC\"}}, "
      "{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\"}}]</TOOLCALL>";
  EXPECT_EQ(parse_every_way(template_format("nemotron-nano-9b-v2.jinja"), single, list).calls,
            (Calls{{"get_time", R"({"zone":"UTC"})"}}));
}

TEST(ChatOutputParser, XmlFunctionParametersBecomeAJsonObject) {
  const std::string reply =
      "<think>short</think>I will call it.\n<tool_call>\n<function=get_weather>\n<parameter=city>\nNew York\n"
      "</parameter>\n<parameter=days>\n3\n</parameter>\n<parameter=options>\n{\"units\": \"metric\"}\n"
      "</parameter>\n<parameter=note>\ntwo\nlines\n</parameter>\n</function>\n</tool_call>\n";
  StreamedReply parsed = parse_every_way(template_format("nemotron-3-nano.jinja"), weather_tools(), reply);
  EXPECT_EQ(parsed.reasoning, "short");
  EXPECT_EQ(parsed.content, "I will call it.");
  EXPECT_EQ(parsed.calls,
            (Calls{{"get_weather",
                    R"({"city":"New York","days":3,"options":{"units":"metric"},"note":"two\nlines"})"}}));
}

TEST(ChatOutputParser, MalformedCallsStayText) {
  const ChatFormat granite = template_format("granite-4.0.jinja");
  const std::vector<std::string> malformed = {
      "<tool_call>{\"name\": \"get_weather\", \"arguments\": {\"city\": }</tool_call>",  // bad JSON
      "<tool_call>{\"name\": \"rm_rf\", \"arguments\": {}}</tool_call>",                 // unknown function
      "<tool_call>{\"name\": \"get_weather\", \"arguments\": [1, 2]}</tool_call>",  // arguments not an object
      "<tool_call>[{\"name\": \"get_weather\", \"arguments\": {}}]</tool_call>",    // a list in this format
      "<tool_call>{\"arguments\": {}}</tool_call>",                                 // no name
  };
  for (const std::string& call : malformed) {
    const std::string reply = "Answer: " + call + " done";
    StreamedReply parsed = parse_every_way(granite, weather_tools(), reply);
    EXPECT_EQ(parsed.content, reply) << call;
    EXPECT_TRUE(parsed.calls.empty()) << call;
  }
  // A malformed XML block and a list with one bad entry are text too, whole.
  const std::string xml =
      "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</function>\n</tool_call>";
  EXPECT_EQ(parse_every_way(template_format("nemotron-3-nano.jinja"), weather_tools(), xml).content, xml);
  const std::string list =
      "<TOOLCALL>[{\"name\": \"get_weather\", \"arguments\": {}}, {\"name\": \"nope\", \"arguments\": "
      "{}}]</TOOLCALL>";
  StreamedReply parsed_list =
      parse_every_way(template_format("nemotron-nano-9b-v2.jinja"), weather_tools(), list);
  EXPECT_EQ(parsed_list.content, list);
  EXPECT_TRUE(parsed_list.calls.empty());
}

TEST(ChatOutputParser, OneGoodCallAndOneMalformedCall) {
  const std::string good = "<tool_call>{\"name\": \"get_time\", \"arguments\": {}}</tool_call>";
  const std::string bad = "<tool_call>{\"name\": \"get_time\"</tool_call>";
  StreamedReply parsed =
      parse_every_way(template_format("granite-4.0.jinja"), weather_tools(), good + "\n" + bad);
  EXPECT_EQ(parsed.calls, (Calls{{"get_time", "{}"}}));
  EXPECT_EQ(parsed.content, bad);
}

TEST(ChatOutputParser, TextThatLooksLikeACallStaysTextWithoutAToolFormatOrTools) {
  const std::string reply = "<tool_call>{\"name\": \"get_weather\", \"arguments\": {}}</tool_call>";
  // A template with no tool format.
  EXPECT_EQ(parse_every_way(template_format("chatml.jinja"), weather_tools(), reply).content, reply);
  // A request without tools, and one with tool_choice "none".
  EXPECT_EQ(parse_every_way(template_format("granite-4.0.jinja"), {}, reply).content, reply);
  ChatParseOptions none = weather_tools();
  none.tool_calls = false;
  StreamedReply parsed = parse_every_way(template_format("granite-4.0.jinja"), none, reply);
  EXPECT_EQ(parsed.content, reply);
  EXPECT_TRUE(parsed.calls.empty());
}

TEST(ChatOutputParser, PlainTextIsUntouched) {
  // Spaces, newlines and lone '<' pass through byte for byte when no marker is involved.
  const std::string reply = "  Hello <b>world</b>\n\n1 < 2 <tool and <think of it  \n";
  EXPECT_EQ(parse_every_way(template_format("chatml.jinja"), {}, reply).content, reply);
  EXPECT_EQ(parse_every_way(template_format("granite-4.0.jinja"), weather_tools(), reply).content, reply);
}

TEST(ChatOutputParser, ReasoningSwitchedOffOrStartedByThePrompt) {
  const ChatFormat qwen = template_format("qwen3.jinja");
  ChatParseOptions off;
  off.reasoning = false;
  const std::string reply = "<think>hmm</think>Hi";
  EXPECT_EQ(parse_every_way(qwen, off, reply).content, reply);
  // The generation prompt opened the block: the reply begins as reasoning.
  ChatParseOptions started;
  started.starts_in_reasoning = true;
  StreamedReply parsed = parse_every_way(qwen, started, "\nFirst, think.\n</think>\n\nThe answer.");
  EXPECT_EQ(parsed.reasoning, "First, think.");
  EXPECT_EQ(parsed.content, "The answer.");
  // A template without markers never splits, whatever the options say.
  EXPECT_EQ(parse_every_way(template_format("granite-4.0.jinja"), started, reply).content, reply);
}

TEST(ChatOutputParser, UnfinishedBlocksAreReleasedAtTheEnd) {
  const ChatFormat qwen = template_format("qwen3.jinja");
  // Cut off inside the thinking block: all of it is reasoning.
  StreamedReply thinking = parse_every_way(qwen, weather_tools(), "<think>still going");
  EXPECT_EQ(thinking.reasoning, "still going");
  EXPECT_EQ(thinking.content, "");
  // Cut off inside a call: its text is content.
  const std::string cut = "<tool_call>{\"name\": \"get_weather\", \"argu";
  StreamedReply call = parse_every_way(qwen, weather_tools(), "Sure.\n" + cut);
  EXPECT_EQ(call.content, "Sure.\n" + cut);
  EXPECT_TRUE(call.calls.empty());
  // A partial marker at the very end is text.
  EXPECT_EQ(parse_every_way(qwen, weather_tools(), "ok <tool_ca").content, "ok <tool_ca");
}

TEST(ChatOutputParser, MarkerPrefixesAreHeldBackUntilDecided) {
  ChatOutputParser parser(template_format("granite-4.0.jinja"), weather_tools());
  EXPECT_EQ(parser.feed("Hi <tool").content, "Hi");
  EXPECT_EQ(parser.feed("box>").content, " <toolbox>");
  ChatDelta call = parser.feed("<tool_call>{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Rome\"}}");
  EXPECT_TRUE(call.empty());  // held until the close marker
  call = parser.feed("</tool_call>");
  ASSERT_EQ(call.tool_calls.size(), 1u);
  EXPECT_EQ(call.tool_calls[0].index, 0u);
  EXPECT_EQ(call.tool_calls[0].name, "get_weather");
  EXPECT_EQ(call.tool_calls[0].arguments, R"({"city":"Rome"})");
  EXPECT_EQ(call.tool_calls[0].id, parser.tool_calls()[0].id);
}

TEST(ChatOutputParser, CallIdsAreCallAnd24Characters) {
  std::mt19937_64 random(7);
  const std::string a = new_tool_call_id(random), b = new_tool_call_id(random);
  EXPECT_NE(a, b);
  for (const std::string& id : {a, b}) {
    ASSERT_EQ(id.size(), 29u);
    EXPECT_EQ(id.substr(0, 5), "call_");
    for (char c : id.substr(5)) EXPECT_TRUE(std::isalnum(static_cast<unsigned char>(c))) << id;
  }
  // Two parsers draw different ids.
  const std::string reply = "<tool_call>{\"name\": \"get_time\", \"arguments\": {}}</tool_call>";
  ChatOutputParser first(template_format("granite-4.0.jinja"), weather_tools());
  ChatOutputParser second(template_format("granite-4.0.jinja"), weather_tools());
  first.feed(reply);
  second.feed(reply);
  ASSERT_EQ(first.tool_calls().size(), 1u);
  ASSERT_EQ(second.tool_calls().size(), 1u);
  EXPECT_NE(first.tool_calls()[0].id, second.tool_calls()[0].id);
}

}  // namespace
}  // namespace mb::server
