// SPDX-License-Identifier: MIT
// make-model --chat-template FILE: the template goes into the checkpoint's tokenizer_config.json
// (a GGUF file's tokenizer.chat_template), so `serve` renders with it; a file that is missing or
// not a template is refused by name before anything is written.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "cli_test_support.h"
#include "common/test_util.h"
#include "io/file_io.h"
#include "io/gguf.h"
#include "server/openai_api.h"

namespace mb {
namespace {

using test::run_cli;

const char* const kTemplateModelFlags = " --d-model 32 --n-layer 2 --vocab 301 --seed 3";

std::string granite_template_path() {
  return std::string(MB_TEST_DATA_DIR) + "/chat_templates/granite-4.0.jinja";
}

// A user turn with one tool, rendered as serve renders a request with `tools`.
std::string render_with_tool(const server::ServedChatTemplate& served) {
  const nlohmann::json variables = {
      {"messages", {{{"role", "user"}, {"content", "Weather in Paris?"}}}},
      {"tools",
       {{{"type", "function"},
         {"function", {{"name", "get_weather"}, {"parameters", {{"type", "object"}}}}}}}}};
  ChatRenderOptions options = served.render_options;
  options.add_generation_prompt = true;
  return served.chat_template.render_json(variables.dump(), options);
}

TEST(CliMakeModelTemplate, TheTemplateIsWrittenIntoTokenizerConfigAndServeRendersWithIt) {
  const std::string dir = test::make_temp_dir("make_model_template") + "/model";
  const test::CliOutput made = run_cli("make-model --out " + dir + kTemplateModelFlags + " --chat-template " +
                                       granite_template_path());
  ASSERT_EQ(made.status, 0) << made.err;
  const std::string source = read_text_file(granite_template_path());
  const nlohmann::json config = nlohmann::json::parse(read_text_file(dir + "/tokenizer_config.json"));
  EXPECT_EQ(config["chat_template"], source);
  // The byte-level tokenizer's one special token, so eos_token renders as a token it knows.
  EXPECT_EQ(config["eos_token"], "<|endoftext|>");

  const server::ServedChatTemplate served = server::load_served_chat_template(dir);
  ASSERT_TRUE(served.error.empty()) << served.error;
  ASSERT_FALSE(served.is_plain());
  ChatRenderOptions options = served.render_options;
  options.add_generation_prompt = true;
  const std::string rendered = render_with_tool(served);
  EXPECT_NE(rendered.find("<tools>"), std::string::npos) << rendered;
  EXPECT_NE(rendered.find("\"get_weather\""), std::string::npos) << rendered;
  server::ServedChatTemplate direct;
  direct.chat_template = ChatTemplate::parse(source);
  direct.render_options = options;
  EXPECT_EQ(rendered, render_with_tool(direct));

  // Without the flag a checkpoint has no template (serve falls back to the plain format).
  const std::string plain = test::make_temp_dir("make_model_template_plain") + "/model";
  ASSERT_EQ(run_cli("make-model --out " + plain + kTemplateModelFlags).status, 0);
  EXPECT_FALSE(std::filesystem::exists(plain + "/tokenizer_config.json"));
  EXPECT_TRUE(server::load_served_chat_template(plain).is_plain());
}

TEST(CliMakeModelTemplate, AGgufFileCarriesTheTemplate) {
  const std::string gguf = test::make_temp_dir("make_model_template_gguf") + "/m.gguf";
  const test::CliOutput made = run_cli("make-model --out " + gguf + kTemplateModelFlags +
                                       " --format gguf --chat-template " + granite_template_path());
  ASSERT_EQ(made.status, 0) << made.err;
  EXPECT_EQ(GgufFile(gguf).string_value("tokenizer.chat_template"), read_text_file(granite_template_path()));
  const server::ServedChatTemplate served = server::load_served_chat_template(gguf);
  ASSERT_TRUE(served.error.empty()) << served.error;
  EXPECT_NE(render_with_tool(served).find("<tools>"), std::string::npos);
}

TEST(CliMakeModelTemplate, AMissingEmptyOrMalformedTemplateIsRefusedByNameAndNothingIsWritten) {
  const std::string folder = test::make_temp_dir("make_model_template_bad");
  std::ofstream(folder + "/bad.jinja") << "{% if %}";
  std::ofstream(folder + "/empty.jinja");
  for (const std::string file : {"bad.jinja", "empty.jinja", "missing.jinja"}) {
    const std::string out = folder + "/model_" + file;
    const test::CliOutput made =
        run_cli("make-model --out " + out + kTemplateModelFlags + " --chat-template " + folder + "/" + file);
    EXPECT_NE(made.status, 0) << file;
    EXPECT_NE(made.err.find("--chat-template"), std::string::npos) << made.err;
    EXPECT_NE(made.err.find(file), std::string::npos) << made.err;
    EXPECT_FALSE(std::filesystem::exists(out)) << file;
  }
}

}  // namespace
}  // namespace mb
