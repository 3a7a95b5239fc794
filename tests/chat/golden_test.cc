// The committed templates render exactly as Hugging Face's renderer does (goldens written by
// tools/chat_template_goldens/generate.js with @huggingface/jinja), for every conversation and
// with and without the generation prompt.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "chat/chat_template.h"

namespace mb {
namespace {

using nlohmann::json;

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in) << path;
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

const std::string kDir = std::string(MB_TEST_DATA_DIR) + "/chat_templates/";

TEST(ChatGolden, EveryTemplateMatchesHuggingFace) {
  const json goldens = json::parse(read_file(kDir + "goldens.json"));
  ASSERT_GE(goldens["cases"].size(), 60u);
  std::map<std::string, ChatTemplate> templates;
  int checked = 0;
  for (const json& c : goldens["cases"]) {
    const std::string file = c["template"];
    if (!templates.count(file)) templates.emplace(file, ChatTemplate::parse(read_file(kDir + file)));
    std::vector<ChatMessage> messages;
    for (const json& m : c["messages"]) messages.push_back({m["role"], m["content"]});
    ChatRenderOptions options;
    options.add_generation_prompt = c["add_generation_prompt"];
    options.bos_token = c["bos_token"];
    options.eos_token = c["eos_token"];
    options.now_unix_seconds = goldens["now_unix_seconds"].get<int64_t>();
    const std::string rendered = templates.at(file).render(messages, options);
    EXPECT_EQ(rendered, c["expected"].get<std::string>())
        << file << " / " << c["conversation"].get<std::string>()
        << " / add_generation_prompt=" << c["add_generation_prompt"];
    ++checked;
  }
  EXPECT_EQ(checked, static_cast<int>(goldens["cases"].size()));
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
