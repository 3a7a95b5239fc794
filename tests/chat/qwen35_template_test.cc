// SPDX-License-Identifier: MIT
// Qwen3.5's published chat template (tests/data/chat_templates/README.md: qwen3.5.jinja, from
// llama.cpp's models/templates/Qwen3.5-4B.jinja) rendered byte for byte as Python's jinja2 renders
// it under transformers' setup: qwen35_goldens.json, written by
// tools/chat_template_goldens/qwen35_goldens.py. The cases cover the system prompt, thinking on and
// off (enable_thinking), a keyword argument the template does not read, earlier turns' reasoning,
// tools, tool calls in the Qwen3-Coder XML form, tool results and list contents; the template's
// own refusals are checked here as errors naming its message.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "chat_test_support.h"

namespace mb {
namespace {

using nlohmann::ordered_json;

std::string read_qwen35_template_file(const std::string& name) {
  const std::string path = std::string(MB_TEST_DATA_DIR) + "/chat_templates/" + name;
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in) << path;
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

TEST(Qwen35ChatTemplate, RendersAsPythonsJinja2) {
  const ordered_json goldens = ordered_json::parse(read_qwen35_template_file("qwen35_goldens.json"));
  ASSERT_EQ(goldens["cases"].size(), 42u);
  const ChatTemplate chat = ChatTemplate::parse(read_qwen35_template_file("qwen3.5.jinja"));
  for (const ordered_json& c : goldens["cases"]) {
    ChatRenderOptions options;
    options.add_generation_prompt = c["add_generation_prompt"];
    options.bos_token = c["bos_token"];
    options.eos_token = c["eos_token"];
    const std::string where = c["conversation"].get<std::string>() +
                              " / add_generation_prompt=" + c["add_generation_prompt"].dump();
    try {
      EXPECT_EQ(chat.render_json(c["variables"].dump(), options), c["expected"].get<std::string>()) << where;
    } catch (const Error& e) {
      ADD_FAILURE() << where << ": " << e.what();
    }
  }
}

TEST(Qwen35ChatTemplate, ThinkingSwitchShapesTheGenerationPrompt) {
  const ChatTemplate chat = ChatTemplate::parse(read_qwen35_template_file("qwen3.5.jinja"));
  ChatRenderOptions options;
  options.add_generation_prompt = true;
  const std::string user = R"({"messages": [{"role": "user", "content": "Hi"}])";
  const std::string prefix = "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n";
  EXPECT_EQ(chat.render_json(user + "}", options), prefix + "<think>\n");
  EXPECT_EQ(chat.render_json(user + R"(, "enable_thinking": true})", options), prefix + "<think>\n");
  EXPECT_EQ(chat.render_json(user + R"(, "enable_thinking": false})", options),
            prefix + "<think>\n\n</think>\n\n");
  // `is false` is a test of the value itself: a falsy non-boolean leaves thinking on.
  EXPECT_EQ(chat.render_json(user + R"(, "enable_thinking": 0})", options), prefix + "<think>\n");
}

TEST(Qwen35ChatTemplate, TemplateRefusalsAreErrorsNamingTheirMessage) {
  const ChatTemplate chat = ChatTemplate::parse(read_qwen35_template_file("qwen3.5.jinja"));
  const std::vector<std::pair<std::string, std::string>> cases = {
      {R"({"messages": []})", "No messages provided."},
      {R"({"messages": [{"role": "system", "content": "s"}]})", "No user query found in messages."},
      {R"({"messages": [{"role": "user", "content": "a"}, {"role": "system", "content": "s"}]})",
       "System message must be at the beginning."},
      {R"({"messages": [{"role": "narrator", "content": "a"}, {"role": "user", "content": "b"}]})",
       "Unexpected message role."},
      {R"({"messages": [{"role": "system", "content": [{"type": "image"}]}, {"role": "user", "content": "b"}]})",
       "System message cannot contain images."},
      {R"({"messages": [{"role": "user", "content": 5}]})", "Unexpected content type."},
  };
  for (const auto& [variables, message] : cases) {
    try {
      chat.render_json(variables, ChatRenderOptions{});
      ADD_FAILURE() << variables << " rendered";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(message), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace mb
