// SPDX-License-Identifier: MIT
// The committed templates render exactly as Hugging Face's renderer does (goldens written by
// tools/chat_template_goldens/generate.js with @huggingface/jinja), for every conversation and
// with and without the generation prompt.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "chat/chat_template.h"
#include "core/error.h"

namespace mb {
namespace {

using nlohmann::ordered_json;

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in) << path;
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

const std::string kDir = std::string(MB_TEST_DATA_DIR) + "/chat_templates/";

// Whether a case's variables are plain role/content messages and nothing else, which
// ChatTemplate::render takes as well as render_json.
bool plain_messages_only(const ordered_json& variables) {
  if (variables.size() != 1) return false;
  for (const ordered_json& m : variables["messages"]) {
    if (m.size() != 2 || !m.contains("role") || !m.contains("content") || !m["content"].is_string())
      return false;
  }
  return true;
}

TEST(ChatGolden, EveryTemplateMatchesHuggingFace) {
  // Ordered, so that the variables keep the key order tojson prints.
  const ordered_json goldens = ordered_json::parse(read_file(kDir + "goldens.json"));
  ASSERT_GE(goldens["cases"].size(), 200u);
  std::map<std::string, ChatTemplate> templates;
  std::map<std::string, int> per_template;
  int plain = 0;
  for (const ordered_json& c : goldens["cases"]) {
    const std::string file = c["template"];
    if (!templates.count(file)) templates.emplace(file, ChatTemplate::parse(read_file(kDir + file)));
    ChatRenderOptions options;
    options.add_generation_prompt = c["add_generation_prompt"];
    options.bos_token = c["bos_token"];
    options.eos_token = c["eos_token"];
    options.now_unix_seconds = goldens["now_unix_seconds"].get<int64_t>();
    const std::string expected = c["expected"];
    const std::string where = file + " / " + c["conversation"].get<std::string>() +
                              " / add_generation_prompt=" + c["add_generation_prompt"].dump();
    try {
      EXPECT_EQ(templates.at(file).render_json(c["variables"].dump(), options), expected) << where;
    } catch (const Error& e) {
      ADD_FAILURE() << where << ": " << e.what();
    }
    if (plain_messages_only(c["variables"])) {
      std::vector<ChatMessage> messages;
      for (const ordered_json& m : c["variables"]["messages"]) messages.push_back({m["role"], m["content"]});
      EXPECT_EQ(templates.at(file).render(messages, options), expected) << where << " (render)";
      ++plain;
    }
    ++per_template[file];
  }
  // Every template is checked, the hybrids' over their tool, thinking and document cases too.
  EXPECT_EQ(per_template.size(), 9u);
  EXPECT_GE(per_template["granite-4.0.jinja"], 36);
  EXPECT_GE(per_template["nemotron-nano-9b-v2.jinja"], 36);
  EXPECT_GE(per_template["nemotron-3-nano.jinja"], 36);
  EXPECT_GE(per_template["qwen3.jinja"], 30);
  EXPECT_GE(plain, 9 * 18);
  EXPECT_GE(per_template["nemotron-h-reasoning.jinja"], 24);
}

// The dated Granite system prompt comes from strftime_now with the pinned time.
TEST(ChatGolden, GraniteDefaultSystemPromptCarriesTheDate) {
  const ChatTemplate granite = ChatTemplate::parse(read_file(kDir + "granite-3.1-instruct.jinja"));
  ChatRenderOptions options;
  options.now_unix_seconds = 1700000000;  // 2023-11-14 22:13:20 UTC
  const std::vector<ChatMessage> messages = {{"user", "Hi"}};
  const std::string out = granite.render(messages, options);
  EXPECT_NE(out.find("Today's Date: November 14, 2023.\n"), std::string::npos) << out;
  EXPECT_TRUE(out.ends_with("<|start_of_role|>assistant<|end_of_role|>")) << out;
}

}  // namespace
}  // namespace mb
