// SPDX-License-Identifier: MIT
// find_chat_template on model folders: tokenizer_config.json's string or named templates,
// chat_template.jinja and chat_template.json, bos/eos in either form, and malformed files.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "chat/chat_template.h"
#include "core/error.h"

namespace mb {
namespace {

namespace fs = std::filesystem;

class FindChatTemplate : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("mb_chat_find_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  void write(const std::string& name, const std::string& text) {
    std::ofstream out(dir_ / name, std::ios::binary);
    out << text;
  }
  std::string error() {
    try {
      find_chat_template(dir_.string());
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  }
  fs::path dir_;
};

TEST_F(FindChatTemplate, NoneWhenTheFolderHasNoTemplate) {
  EXPECT_FALSE(find_chat_template(dir_.string()).has_value());
  write("tokenizer_config.json", R"({"bos_token": "<s>"})");
  EXPECT_FALSE(find_chat_template(dir_.string()).has_value());
}

TEST_F(FindChatTemplate, StringTemplateWithTokens) {
  write("tokenizer_config.json",
        R"({"chat_template": "{{ bos_token }}{{ messages[0].content }}", "bos_token": "<s>",
            "eos_token": {"content": "</s>", "lstrip": false}})");
  const auto found = find_chat_template(dir_.string());
  ASSERT_TRUE(found.has_value());
  EXPECT_EQ(found->source, "{{ bos_token }}{{ messages[0].content }}");
  EXPECT_EQ(found->options.bos_token, "<s>");
  EXPECT_EQ(found->options.eos_token, "</s>");
  const std::vector<ChatMessage> messages = {{"user", "hi"}};
  EXPECT_EQ(ChatTemplate::parse(found->source).render(messages, found->options), "<s>hi");
}

TEST_F(FindChatTemplate, NamedTemplatesUseDefault) {
  write(
      "tokenizer_config.json",
      R"({"chat_template": [{"name": "tool_use", "template": "tools"}, {"name": "default", "template": "plain"}]})");
  EXPECT_EQ(find_chat_template(dir_.string())->source, "plain");
  write("tokenizer_config.json", R"({"chat_template": [{"name": "tool_use", "template": "tools"}]})");
  EXPECT_NE(error().find("none is named 'default'"), std::string::npos) << error();
  write("tokenizer_config.json", R"({"chat_template": [{"name": 1}]})");
  EXPECT_NE(error().find("tokenizer_config.json"), std::string::npos) << error();
}

TEST_F(FindChatTemplate, JinjaAndJsonFilesWhenTheConfigHasNone) {
  write("tokenizer_config.json", R"({"eos_token": "<|im_end|>"})");
  write("chat_template.json", R"({"chat_template": "from json"})");
  EXPECT_EQ(find_chat_template(dir_.string())->source, "from json");
  write("chat_template.jinja", "from jinja\n");
  const auto found = find_chat_template(dir_.string());
  EXPECT_EQ(found->source, "from jinja\n");
  EXPECT_EQ(found->options.eos_token, "<|im_end|>");
  // The config's own template wins over the files.
  write("tokenizer_config.json", R"({"chat_template": "from config"})");
  EXPECT_EQ(find_chat_template(dir_.string())->source, "from config");
}

TEST_F(FindChatTemplate, MalformedFilesNameTheFile) {
  write("tokenizer_config.json", "{not json");
  EXPECT_NE(error().find("tokenizer_config.json"), std::string::npos) << error();
  write("tokenizer_config.json", R"({"chat_template": 5})");
  EXPECT_NE(error().find("must be a string or a list"), std::string::npos) << error();
  write("tokenizer_config.json", R"({"bos_token": 5})");
  EXPECT_NE(error().find("'bos_token'"), std::string::npos) << error();
  write("tokenizer_config.json", "{}");
  write("chat_template.json", R"(["x"])");
  EXPECT_NE(error().find("chat_template.json"), std::string::npos) << error();
}

}  // namespace
}  // namespace mb
