// SPDX-License-Identifier: MIT
// What a chat request gives its template (src/server/chat_request.h), through the same
// prepare_api_request the server and the Python package run: the messages as sent (contents as
// strings, lists of text parts or null, tool calls, tool results), tools and chat_template_kwargs
// render exactly the Hugging Face goldens of tests/data/chat_templates, key order and number
// spelling included; templates that read strings only get a list content's joined text; and
// every malformed chat field is a 400 naming it.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>

#include "common/test_util.h"
#include "common/timing.h"
#include "server/openai_api.h"

namespace mb::server {
namespace {

using nlohmann::json;
using nlohmann::ordered_json;

const Tokenizer& tokenizer() {
  static const Tokenizer t = [] {
    const std::string path = test::make_temp_dir("chat_request") + "/tokenizer.json";
    write_byte_level_tokenizer_json(path, 400);
    return Tokenizer::from_json_file(path);
  }();
  return t;
}

// The goldens with their key order (the order the requests below send).
const ordered_json& goldens() {
  static const ordered_json g = ordered_json::parse(test::read_data_file("chat_templates/goldens.json"));
  return g;
}

// A template served as `mambacpp serve` serves a model folder's, with the golden's tokens and
// the now it was rendered at.
ServedChatTemplate served_template(const std::string& file, const std::string& bos, const std::string& eos) {
  const std::string dir = test::make_temp_dir("chat_request_template");
  const json config = {{"bos_token", bos},
                       {"eos_token", eos},
                       {"chat_template", test::read_data_file("chat_templates/" + file)}};
  std::ofstream(dir + "/tokenizer_config.json") << config.dump();
  ServedChatTemplate served = load_served_chat_template(dir);
  EXPECT_EQ(served.error, "") << file;
  served.render_options.now_unix_seconds = goldens()["now_unix_seconds"].get<int64_t>();
  return served;
}

ServedChatTemplate served_template(const ordered_json& golden) {
  return served_template(golden["template"], golden["bos_token"], golden["eos_token"]);
}

// The request a client sends for a golden's variables: the messages and tools as they are, and
// every other variable (documents, enable_thinking, ...) in chat_template_kwargs.
ordered_json request_for(const ordered_json& variables) {
  ordered_json body = {{"model", "m"}, {"messages", variables["messages"]}};
  ordered_json kwargs = ordered_json::object();
  for (const auto& [key, value] : variables.items()) {
    if (key == "tools")
      body["tools"] = value;
    else if (key != "messages")
      kwargs[key] = value;
  }
  if (!kwargs.empty()) body["chat_template_kwargs"] = kwargs;
  body["max_tokens"] = 4;
  return body;
}

// The text the request's prompt encodes (the byte-level tokenizer decodes it back exactly).
std::string prompt_text_of(const std::string& body, const ServedChatTemplate& served) {
  const ApiRequest request = prepare_api_request(ApiKind::Chat, body, tokenizer(), served, {}, 1, "m");
  EXPECT_EQ(request.serve.prompt, tokenizer().encode(tokenizer().decode(request.serve.prompt)));
  return tokenizer().decode(request.serve.prompt);
}

std::string prompt_text(const ordered_json& body, const ServedChatTemplate& served) {
  return prompt_text_of(body.dump(), served);
}

bool has_list_content(const ordered_json& message) {
  return message.contains("content") && message["content"].is_array();
}

// The status and message of the ApiError a chat body provokes ("" when it is accepted).
std::pair<int, std::string> failure(const std::string& body, const ServedChatTemplate& served = {}) {
  try {
    prepare_api_request(ApiKind::Chat, body, tokenizer(), served, {}, 1, "m");
  } catch (const ApiError& e) {
    return {e.status, e.code + ": " + e.what()};
  }
  return {0, ""};
}

void expect_400(const std::string& body, const std::string& fragment, const ServedChatTemplate& served = {}) {
  const auto [status, message] = failure(body, served);
  EXPECT_EQ(status, 400) << body;
  EXPECT_NE(message.find(fragment), std::string::npos) << body << " -> " << message;
}

bool has_image_part(const ordered_json& messages) {
  for (const ordered_json& message : messages)
    if (has_list_content(message))
      for (const ordered_json& part : message["content"])
        if (part["type"] != "text") return true;
  return false;
}

TEST(ChatRequest, EveryGoldenWithTheGenerationPromptIsWhatItsRequestRenders) {
  int checked = 0, with_more_than_messages = 0;
  for (const ordered_json& golden : goldens()["cases"]) {
    if (!golden["add_generation_prompt"].get<bool>()) continue;
    const ServedChatTemplate served = served_template(golden);
    ordered_json variables = golden["variables"];
    const std::string where =
        golden["template"].get<std::string>() + " / " + golden["conversation"].get<std::string>();
    if (has_image_part(variables["messages"])) {
      // Granite-4.0's list-content golden holds an image part, which its template skips: the
      // server refuses it, and renders the golden without it.
      expect_400(request_for(variables).dump(), "is an image", served);
      for (ordered_json& message : variables["messages"]) {
        if (!has_list_content(message)) continue;
        ordered_json text_parts = ordered_json::array();
        for (const ordered_json& part : message["content"])
          if (part["type"] == "text") text_parts.push_back(part);
        message["content"] = text_parts;
      }
    }
    EXPECT_EQ(prompt_text(request_for(variables), served), golden["expected"].get<std::string>()) << where;
    with_more_than_messages +=
        variables.size() > 1 || variables["messages"].dump().find("\"tool_calls\"") != std::string::npos;
    ++checked;
  }
  EXPECT_EQ(checked, 118);
  EXPECT_GE(with_more_than_messages, 18);
}

TEST(ChatRequest, PlainMessagesRenderAsTheyDidThroughRender) {
  // Before the server passed whole messages, it rendered role and text through
  // ChatTemplate::render: plain string messages still give exactly that.
  int checked = 0;
  for (const ordered_json& golden : goldens()["cases"]) {
    const ordered_json& variables = golden["variables"];
    if (!golden["add_generation_prompt"].get<bool>() || variables.size() != 1) continue;
    std::vector<ChatMessage> messages;
    for (const ordered_json& m : variables["messages"])
      if (m.size() == 2 && m.contains("content") && m["content"].is_string())
        messages.push_back({m["role"], m["content"]});
    if (messages.size() != variables["messages"].size()) continue;
    const ServedChatTemplate served = served_template(golden);
    EXPECT_EQ(prompt_text(request_for(variables), served),
              served.chat_template.render(messages, served.render_options))
        << golden["template"] << " / " << golden["conversation"];
    ++checked;
  }
  EXPECT_GE(checked, 8 * 9);
}

TEST(ChatRequest, ListContentsGoAsGivenToTemplatesThatReadThemAndAsTextToTheOthers) {
  // Granite-4.0 joins text parts itself; the others read strings only (ChatML would fail on a
  // list, Llama-3 would print its repr), so they get the texts joined as Granite joins them.
  const std::vector<std::pair<std::string, bool>> templates = {{"chatml.jinja", false},
                                                               {"llama-3-instruct.jinja", false},
                                                               {"granite-3.1-instruct.jinja", false},
                                                               {"features.jinja", false},
                                                               {"granite-4.0.jinja", true},
                                                               {"nemotron-nano-9b-v2.jinja", false},
                                                               {"nemotron-h-reasoning.jinja", false},
                                                               {"nemotron-3-nano.jinja", false},
                                                               {"qwen3.jinja", false}};
  for (const auto& [file, takes_parts] : templates)
    EXPECT_EQ(served_template(file, "<s>", "</s>").reading.content_parts, takes_parts) << file;
  EXPECT_TRUE(load_served_chat_template(test::make_temp_dir("chat_request_plain")).reading.content_parts);

  // Every plain golden again, each content split into an empty text part and the text: the
  // joined text is the content, so the golden is the render, whichever way the template got it.
  int checked = 0;
  for (const ordered_json& golden : goldens()["cases"]) {
    const ordered_json& variables = golden["variables"];
    if (!golden["add_generation_prompt"].get<bool>() || variables.size() != 1) continue;
    ordered_json split = variables;
    bool plain = true;
    for (ordered_json& message : split["messages"]) {
      plain = plain && message.size() == 2 && message.contains("content") && message["content"].is_string();
      if (!plain) break;
      message["content"] = ordered_json::array(
          {{{"type", "text"}, {"text", ""}}, {{"type", "text"}, {"text", message["content"]}}});
    }
    if (!plain) continue;
    EXPECT_EQ(prompt_text(request_for(split), served_template(golden)), golden["expected"].get<std::string>())
        << golden["template"] << " / " << golden["conversation"];
    ++checked;
  }
  EXPECT_GE(checked, 8 * 9);

  // Two texts in ChatML: joined with "\n".
  const ServedChatTemplate chatml = served_template("chatml.jinja", "", "<|im_end|>");
  EXPECT_EQ(prompt_text(ordered_json::parse(R"({"messages": [{"role": "user", "content": [
                            {"type": "text", "text": "Describe"}, {"type": "text", "text": "this."}]}]})"),
                        chatml),
            "<|im_start|>user\nDescribe\nthis.<|im_end|>\n<|im_start|>assistant\n");
}

TEST(ChatRequest, TheTemplateSeesTheClientsKeyOrderNumbersAndEveryField) {
  ServedChatTemplate served;
  served.chat_template = ChatTemplate::parse(
      "{{ messages | tojson }}|{{ tools | tojson }}|{{ enable_thinking }}|{{ add_generation_prompt }}");
  // Keys out of sorted order, a float written as an integer's digits with a point, an exponent,
  // a repeated key (Python keeps its first place and last value), escapes and other fields.
  const std::string body =
      R"({"temperature": 0, "messages": [{"role": "assistant", "content": null, "zeta": 1,
          "tool_calls": [{"type": "function", "id": "c1", "function": {"name": "f", "arguments": "{\"a\": 1}"}}],
          "reasoning_content": "r", "zeta": 2},
        {"role": "tool", "tool_call_id": "c1", "name": "f", "content": "caf\u00e9 \"q\""}],
       "tools": [{"type": "function", "function": {"name": "f", "parameters": {"z": 2.0, "a": 1e5, "m": -0.5}}}],
       "chat_template_kwargs": {"enable_thinking": false}})";
  EXPECT_EQ(
      prompt_text_of(body, served),
      R"([{"role": "assistant", "content": null, "zeta": 2, "tool_calls": [{"type": "function", "id": "c1", )"
      R"("function": {"name": "f", "arguments": "{\"a\": 1}"}}], "reasoning_content": "r"}, )"
      R"({"role": "tool", "tool_call_id": "c1", "name": "f", "content": "café \"q\""}]|)"
      R"([{"type": "function", "function": {"name": "f", "parameters": {"z": 2.0, "a": 100000.0, "m": -0.5}}}])"
      R"(|False|True)");
  // A repeated messages field counts once, with its last value, and so does a repeated content
  // (this template reads strings only, so a list content is its joined text); no tools is none.
  EXPECT_EQ(prompt_text_of(R"({"messages": [{"role": "user", "content": [{"type": "text", "text": "x"}]}],
                            "messages": [{"role": "user", "content": "b", "content": [
                              {"type": "text", "text": "x"}, {"type": "text", "text": "y"}]}]})",
                           served),
            R"([{"role": "user", "content": "x\ny"}]|null||True)");
}

TEST(ChatRequest, NullContentsToolsAndToolCallsFollowTheTemplate) {
  // What transformers refuses is refused, as a 400 naming the template's problem: ChatML adds a
  // null content to a string.
  expect_400(R"({"messages": [{"role": "assistant", "content": null}]})",
             "chat_template_error: the model's chat template cannot render these messages: chat template: "
             "unsupported operand types for +: 'str' and 'NoneType'",
             served_template("chatml.jinja", "", "<|im_end|>"));
  // The plain format shows a null content as empty, and refuses what it cannot show.
  const ServedChatTemplate plain;
  EXPECT_EQ(prompt_text(ordered_json::parse(R"({"messages": [{"role": "user", "content": "hi"},
                                                {"role": "assistant", "content": null}, {"role": "user"}]})"),
                        plain),
            "user: hi\nassistant:\nuser: \nassistant:");
  expect_400(R"({"messages": [{"role": "user", "content": "x"}], "tools": [{"name": "f"}]})",
             "plain chat format (the model has no chat template) cannot show tools");
  expect_400(R"({"messages": [{"role": "assistant", "tool_calls": [{"function": {"name": "f"}}]}]})",
             "cannot show tool calls");
  EXPECT_EQ(failure(R"({"messages": [{"role": "user", "content": "x"}], "tools": []})").first, 0);
}

// Python's json.dumps(value, ensure_ascii=False), which is what transformers' tojson prints.
std::string python_json(const ordered_json& value) {
  std::string text;
  if (value.is_object()) {
    for (const auto& [key, item] : value.items())
      text += (text.empty() ? "{" : ", ") + ordered_json(key).dump() + ": " + python_json(item);
    return text.empty() ? "{}" : text + "}";
  }
  if (value.is_array()) {
    for (const ordered_json& item : value) text += (text.empty() ? "[" : ", ") + python_json(item);
    return text.empty() ? "[]" : text + "]";
  }
  return value.dump();
}

TEST(ChatRequest, ToolCallArgumentsAsJsonTextRenderAsTheirObjectWhereTheTemplateNeedsOne) {
  // OpenAI's clients send arguments as JSON text. Granite-4.0 and Nemotron-Nano-9B-v2 print that
  // text as it is (json.dumps' spelling prints what tojson prints of the object); Nemotron-3-Nano
  // iterates arguments as a mapping and fails on text under transformers, so it is given the
  // object: every golden with tool calls renders the same with its arguments sent as text.
  for (const char* file : {"chatml.jinja", "llama-3-instruct.jinja", "granite-4.0.jinja",
                           "nemotron-nano-9b-v2.jinja", "nemotron-h-reasoning.jinja", "qwen3.jinja"})
    EXPECT_TRUE(served_template(file, "<s>", "</s>").reading.string_arguments) << file;
  EXPECT_FALSE(served_template("nemotron-3-nano.jinja", "<s>", "</s>").reading.string_arguments);
  int checked = 0;
  for (const ordered_json& golden : goldens()["cases"]) {
    if (!golden["add_generation_prompt"].get<bool>()) continue;
    ordered_json variables = golden["variables"];
    bool converted = false;
    for (ordered_json& message : variables["messages"]) {
      if (!message.contains("tool_calls")) continue;
      for (ordered_json& call : message["tool_calls"]) {
        ordered_json& arguments = call["function"]["arguments"];
        if (!arguments.is_object()) continue;
        arguments = python_json(arguments);
        converted = true;
      }
    }
    if (!converted) continue;
    EXPECT_EQ(prompt_text(request_for(variables), served_template(golden)),
              golden["expected"].get<std::string>())
        << golden["template"] << " / " << golden["conversation"];
    ++checked;
  }
  EXPECT_EQ(checked, 11);
  // Text that is not a JSON object's is passed as it is, and the template's error is the answer.
  expect_400(R"({"messages": [{"role": "user", "content": "x"}, {"role": "assistant", "content": null,
                 "tool_calls": [{"type": "function", "function": {"name": "f", "arguments": "[1, 2]"}}]}]})",
             "items needs a mapping, not 'str'",
             served_template("nemotron-3-nano.jinja", "<s>", "<|im_end|>"));
}

// A request whose tool schema has `keys` properties: a mapping with many keys must not cost the
// square of their size to read in order (an ordered map that searches its keys would).
std::string wide_request(int keys) {
  std::string properties;
  for (int k = 0; k < keys; ++k)
    properties += (k ? ", \"p" : "\"p") + std::to_string(keys - k) + "\": {\"type\": \"integer\"}";
  return R"({"messages": [{"role": "user", "content": [{"type": "text", "text": "x"}]}],
             "tools": [{"type": "function", "function": {"name": "f", "parameters": {"properties": {)" +
         properties + "}}}}]}";
}

TEST(ChatRequest, WideRequestsAreReadInLinearTime) {
  const auto work = [&](int keys) {
    const std::string body = wide_request(keys);
    const ApiRequest request = parse_api_request(ApiKind::Chat, body, {}, 1);
    EXPECT_GT(request.chat.tools.size(), static_cast<size_t>(keys) * 20);
  };
  EXPECT_LT(test::least_cpu_seconds([&] { work(40000); }, 1), test::scaled_seconds(1.0));
  EXPECT_LT(test::growth_for_4x(work, 10000), 8.0);
  // And the whole request, rendered and encoded, is served.
  const ServedChatTemplate served = served_template("granite-4.0.jinja", "", "");
  const std::string body = wide_request(2000);
  EXPECT_GT(prepare_api_request(ApiKind::Chat, body, tokenizer(), served, {}, 1, "m").serve.prompt.size(),
            40000u);
}

TEST(ChatRequest, MalformedChatFieldsAreA400NamingTheField) {
  const std::string user = R"({"role": "user", "content": "x"})";
  const auto with = [&](const std::string& fields) {
    return R"({"messages": [)" + user + "]" + fields + "}";
  };
  expect_400(R"({"messages": [5]})", "messages[0] must be an object, got 5");
  expect_400(R"({"messages": [{"role": "user", "content": "x"}, "hi"]})", "messages[1] must be an object");
  expect_400(R"({"messages": [{"role": 3, "content": "x"}]})", "messages[0].role must be a non-empty string");
  expect_400(R"({"messages": [{"role": "", "content": "x"}]})",
             "messages[0].role must be a non-empty string");
  expect_400(R"({"messages": [{"role": "user", "content": {"text": "x"}}]})",
             "messages[0].content must be a string, null or a list of text parts");
  expect_400(R"({"messages": [{"role": "user", "content": [{"type": "text", "text": "a"},
                 {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}]}]})",
             "messages[0].content[1] is an image (\"image_url\" part): the models this server runs read "
             "text only");
  expect_400(R"({"messages": [{"role": "user", "content": [{"type": "input_audio"}]}]})",
             "messages[0].content[0]: only {\"type\": \"text\", \"text\": ...} parts are supported");
  expect_400(R"({"messages": [{"role": "user", "content": ["x"]}]})", "messages[0].content[0]: only");
  expect_400(R"({"messages": [{"role": "user", "content": [{"type": "text", "text": 7}]}]})",
             "messages[0].content[0].text must be a string, got 7");
  expect_400(R"({"messages": [{"role": "assistant", "tool_calls": {"id": "1"}}]})",
             "messages[0].tool_calls must be a list of tool calls");
  expect_400(R"({"messages": [{"role": "assistant", "tool_calls": ["f"]}]})",
             "messages[0].tool_calls[0] must be an object");
  expect_400(R"({"messages": [{"role": "assistant", "tool_calls": [{"function": "f"}]}]})",
             "messages[0].tool_calls[0].function must be an object");
  expect_400(R"({"messages": [{"role": "assistant", "tool_calls": [{"function": {"name": 1}}]}]})",
             "messages[0].tool_calls[0].function.name must be a string");
  expect_400(
      R"({"messages": [{"role": "assistant", "tool_calls": [{"function": {"name": "f", "arguments": 1}}]}]})",
      "messages[0].tool_calls[0].function.arguments must be a string or an object");
  expect_400(R"({"messages": [{"role": "tool", "content": "x", "tool_call_id": 4}]})",
             "messages[0].tool_call_id must be a string");
  expect_400(R"({"messages": [{"role": "tool", "content": "x", "name": ["f"]}]})",
             "messages[0].name must be a string");
  expect_400(with(R"(, "tools": {"name": "f"})"), "tools must be a list of tool definitions");
  expect_400(with(R"(, "tools": ["f"])"), "tools[0] must be an object");
  // tool_choice (server/chat_tools.h): the forms OpenAI defines, naming a defined function, and a
  // forced call only where the template has a tool-call format (the plain format has none).
  const std::string f_tool = R"(, "tools": [{"type": "function", "function": {"name": "f"}}])";
  expect_400(with(R"(, "tool_choice": "required")"), "tool_choice \"required\" needs tools");
  expect_400(with(R"(, "tool_choice": "sometimes")"), "tool_choice must be \"auto\", \"none\", \"required\"");
  expect_400(with(R"(, "tool_choice": {"type": "function"})"), "tool_choice must be");
  expect_400(with(R"(, "tool_choice": {"type": "function", "function": {"name": "g"}})" + f_tool),
             "tool_choice names the function \"g\", which the request's tools do not define");
  const ServedChatTemplate chatml = served_template("chatml.jinja", "", "");
  expect_400(with(R"(, "tool_choice": "required")" + f_tool),
             "the model's chat template has no tool-call format", chatml);
  expect_400(with(R"(, "tools": [{"type": "function", "function": {"name": ""}}])"),
             "tools[0].function.name must be a non-empty string");
  expect_400(with(R"(, "thinking_budget_tokens": -2)"), "thinking_budget_tokens must be an integer from -1");
  expect_400(with(R"(, "parallel_tool_calls": "no")"), "parallel_tool_calls must be true or false");
  EXPECT_EQ(failure(with(R"(, "tool_choice": "none", "parallel_tool_calls": false)" + f_tool), chatml).first,
            0);
  EXPECT_EQ(
      failure(with(R"(, "tool_choice": "required")" + f_tool), served_template("granite-4.0.jinja", "", ""))
          .first,
      0);
  expect_400(with(R"(, "chat_template_kwargs": [1])"), "chat_template_kwargs must be an object");
  expect_400(with(R"(, "chat_template_kwargs": {"messages": []})"),
             "chat_template_kwargs cannot set messages");
  expect_400(with(R"(, "chat_template_kwargs": {"tools": []})"), "chat_template_kwargs cannot set tools");
  // The defaults and nulls are accepted.
  EXPECT_EQ(failure(with(R"(, "tool_choice": "auto", "parallel_tool_calls": true, "tools": null,
                             "chat_template_kwargs": null)"))
                .first,
            0);
  EXPECT_EQ(failure(with(R"(, "chat_template_kwargs": {})")).first, 0);
}

}  // namespace
}  // namespace mb::server
