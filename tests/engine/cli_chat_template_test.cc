// SPDX-License-Identifier: MIT
// Chat templates in GGUF files: `quantize` writes a folder's template (and its named ones) as
// llama.cpp's converter does; every loader reads it back from the file, and `chat`, `run --chat`
// and `serve` say which template they use (or warn that they fall back to the plain format).
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "cli_test_support.h"
#include "common/test_util.h"
#include "engine/gguf_chat_template.h"
#include "io/gguf.h"
#include "server/openai_api.h"

namespace mb {
namespace {

using test::run_cli;

// A small Mamba folder whose tokenizer_config.json lists a default and a named template that
// print the bos and eos texts, so a file that lost them renders differently.
std::string templated_folder(const std::string& name) {
  const std::string dir = test::make_temp_dir(name) + "/model";
  const test::CliOutput made =
      run_cli("make-model --out " + dir + " --d-model 32 --n-layer 2 --vocab 301 --seed 3");
  EXPECT_EQ(made.status, 0) << made.err;
  const nlohmann::json config = {
      {"bos_token", "<|endoftext|>"},
      {"eos_token", "<|endoftext|>"},
      {"chat_template",
       {{{"name", "tool-use"}, {"template", "TOOLS {{ messages[0].content }}"}},
        {{"name", "default"},
         {"template",
          "{{ bos_token }}{% for m in messages %}<{{ m.role }}>{{ m.content }}{{ eos_token }}{% endfor %}"
          "{% if add_generation_prompt %}<assistant>{% endif %}"}}}}};
  std::ofstream(dir + "/tokenizer_config.json") << config.dump();
  return dir;
}

std::string render_hello(const server::ServedChatTemplate& chat) {
  ChatRenderOptions options = chat.render_options;
  return chat.chat_template.render(std::vector<ChatMessage>{{"user", "hello"}}, options);
}

TEST(CliChatTemplate, QuantizeWritesTheFoldersTemplatesAndTheFileRendersAsTheFolderDoes) {
  const std::string folder = templated_folder("cli_template_gguf");
  const std::string gguf = test::make_temp_dir("cli_template_gguf_out") + "/m.gguf";
  const test::CliOutput quantized = run_cli("quantize " + folder + " " + gguf + " --type f32");
  ASSERT_EQ(quantized.status, 0) << quantized.err;
  const GgufFile file(gguf);
  // gguf-py's add_chat_template: the default under tokenizer.chat_template, the others under
  // their names (non-alphanumerics as '_'), listed in tokenizer.chat_templates.
  EXPECT_NE(file.string_value("tokenizer.chat_template").find("{{ bos_token }}"), std::string::npos);
  EXPECT_EQ(file.string_value("tokenizer.chat_template.tool_use"), "TOOLS {{ messages[0].content }}");
  ASSERT_NE(file.find("tokenizer.chat_templates"), nullptr);
  EXPECT_EQ(file.find("tokenizer.chat_templates")->strings, std::vector<std::string>{"tool_use"});

  const server::ServedChatTemplate from_folder = server::load_served_chat_template(folder);
  const server::ServedChatTemplate from_file = server::load_served_chat_template(gguf);
  ASSERT_TRUE(from_file.error.empty()) << from_file.error;
  ASSERT_FALSE(from_file.is_plain());
  EXPECT_EQ(render_hello(from_folder), "<|endoftext|><user>hello<|endoftext|><assistant>");
  EXPECT_EQ(render_hello(from_file), render_hello(from_folder));
  EXPECT_EQ(from_file.hash, from_folder.hash);
  EXPECT_EQ(from_file.named, std::vector<std::string>{"tool_use"});
  EXPECT_NE(server::describe_chat_template(from_file).find("metadata tokenizer.chat_template"),
            std::string::npos)
      << server::describe_chat_template(from_file);
  EXPECT_NE(
      server::describe_chat_template(from_folder).find("tokenizer_config.json (hash " + from_folder.hash),
      std::string::npos)
      << server::describe_chat_template(from_folder);

  // A GGUF file copied to another keeps the template.
  const std::string copy = gguf + ".copy.gguf";
  ASSERT_EQ(run_cli("quantize " + gguf + " " + copy + " --type f32").status, 0);
  EXPECT_EQ(render_hello(server::load_served_chat_template(copy)), render_hello(from_folder));

  // `chat` on the file answers exactly what it answers on the folder, and says where its
  // template came from.
  const std::string input = "printf 'Hello there\\n' | ";
  const std::string flags = " -n 6 --seed 2 --ignore-eos -t 1";
  const test::CliOutput on_folder = run_cli("chat -m " + folder + flags, input);
  const test::CliOutput on_file = run_cli("chat -m " + gguf + flags, input);
  ASSERT_EQ(on_file.status, 0) << on_file.err;
  EXPECT_EQ(on_file.out, on_folder.out);
  EXPECT_NE(on_file.err.find("chat template: " + gguf + " (metadata tokenizer.chat_template) (hash " +
                             from_folder.hash),
            std::string::npos)
      << on_file.err;
  EXPECT_EQ(on_file.err.find("warning"), std::string::npos) << on_file.err;
  const test::CliOutput run_chat = run_cli("run --chat -m " + gguf + " -p 'Hello there'" + flags);
  ASSERT_EQ(run_chat.status, 0) << run_chat.err;
  EXPECT_EQ(run_chat.out, on_file.out);
  EXPECT_NE(run_chat.err.find("(metadata tokenizer.chat_template)"), std::string::npos) << run_chat.err;
}

TEST(CliChatTemplate, AChatWithoutATemplateWarnsThatItUsesThePlainFormat) {
  const std::string dir = test::make_temp_dir("cli_template_plain") + "/model";
  ASSERT_EQ(run_cli("make-model --out " + dir + " --d-model 32 --n-layer 2 --vocab 301 --seed 3").status, 0);
  const test::CliOutput chat = run_cli("chat -m " + dir + " -n 2 -t 1", "printf 'hi\\n' | ");
  ASSERT_EQ(chat.status, 0) << chat.err;
  EXPECT_NE(chat.err.find("chat template: the built-in plain format"), std::string::npos) << chat.err;
  EXPECT_NE(chat.err.find("warning: " + dir + " has no chat template"), std::string::npos) << chat.err;
  const test::CliOutput run = run_cli("run --chat -m " + dir + " -p hi -n 2 -t 1");
  ASSERT_EQ(run.status, 0) << run.err;
  EXPECT_NE(run.err.find("warning: " + dir + " has no chat template"), std::string::npos) << run.err;
  // A GGUF file without one warns as well.
  const std::string gguf = dir + ".gguf";
  ASSERT_EQ(run_cli("quantize " + dir + " " + gguf + " --type f32").status, 0);
  EXPECT_FALSE(find_checkpoint_chat_template(gguf).has_value());
  EXPECT_NE(run_cli("chat -m " + gguf + " -n 2 -t 1", "printf 'hi\\n' | ").err.find("has no chat template"),
            std::string::npos);
}

TEST(CliChatTemplate, ABadTemplateValueInAGgufFileIsNamed) {
  const std::string dir = test::make_temp_dir("cli_template_bad");
  GgufWriter writer;
  writer.set("general.architecture", GgufValue::string("mamba"));
  writer.set("tokenizer.chat_template", GgufValue::u32(5));
  writer.write(dir + "/bad.gguf");
  try {
    gguf_chat_template(GgufFile(dir + "/bad.gguf"));
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("tokenizer.chat_template"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace mb
