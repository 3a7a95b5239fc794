// SPDX-License-Identifier: MIT
// LFM2's published chat templates (tests/data/chat_templates/README.md: lfm2-8b-a1b.jinja and
// lfm2.5-instruct.jinja, from llama.cpp's models/templates) rendered byte for byte as Python's
// jinja2 renders them under transformers' setup: lfm2_goldens.json, written by
// tools/chat_template_goldens/lfm2_goldens.py. The cases reach every branch of both templates: the
// system prompt, tools as mappings and as strings (with and without a system prompt), tool
// results, list contents through tojson, and LFM2.5's dropping of earlier turns' thinking.
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "chat_test_support.h"

namespace mb {
namespace {

using nlohmann::ordered_json;

std::string read_lfm2_template_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in) << path;
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

TEST(Lfm2ChatTemplate, RendersAsPythonsJinja2) {
  const std::string dir = std::string(MB_TEST_DATA_DIR) + "/chat_templates/";
  const ordered_json goldens = ordered_json::parse(read_lfm2_template_file(dir + "lfm2_goldens.json"));
  ASSERT_EQ(goldens["cases"].size(), 40u);
  std::map<std::string, ChatTemplate> templates;
  for (const ordered_json& c : goldens["cases"]) {
    const std::string file = c["template"];
    if (!templates.count(file))
      templates.emplace(file, ChatTemplate::parse(read_lfm2_template_file(dir + file)));
    ChatRenderOptions options;
    options.add_generation_prompt = c["add_generation_prompt"];
    options.bos_token = c["bos_token"];
    options.eos_token = c["eos_token"];
    const std::string where = file + " / " + c["conversation"].get<std::string>() +
                              " / add_generation_prompt=" + c["add_generation_prompt"].dump();
    try {
      EXPECT_EQ(templates.at(file).render_json(c["variables"].dump(), options),
                c["expected"].get<std::string>())
          << where;
    } catch (const Error& e) {
      ADD_FAILURE() << where << ": " << e.what();
    }
  }
  EXPECT_EQ(templates.size(), 2u);
}

}  // namespace
}  // namespace mb
