// SPDX-License-Identifier: MIT
#include <cstdio>

#include "commands.h"
#include "core/error.h"
#include "engine/gguf_tokenizer.h"
#include "io/file_io.h"
#include "tokenizer/tokenizer.h"

namespace mb::cli {

void add_tokenize(CLI::App& app) {
  struct Args {
    std::string model, tokenizer, prompt, file, decode;
  };
  auto args = std::make_shared<Args>();
  CLI::App* cmd = app.add_subcommand("tokenize", "Print the token ids of a text, or the text of token ids");
  auto* model =
      cmd->add_option("-m,--model", args->model, "Checkpoint folder with tokenizer.json, or a .gguf file");
  auto* file_tok = cmd->add_option("--tokenizer", args->tokenizer, "A tokenizer.json file");
  model->excludes(file_tok);
  auto* prompt = cmd->add_option("-p,--prompt", args->prompt, "Text to encode");
  auto* file = cmd->add_option("-f,--file", args->file, "Encode the contents of this file");
  auto* decode = cmd->add_option("--decode", args->decode, "Comma-separated ids to decode");
  prompt->excludes(file);
  decode->excludes(prompt)->excludes(file);
  cmd->callback([args] {
    if (args->model.empty() && args->tokenizer.empty()) throw Error("give -m DIR or --tokenizer FILE");
    const Tokenizer tokenizer =
        args->model.empty() ? Tokenizer::from_json_file(args->tokenizer) : load_tokenizer(args->model);
    if (!args->decode.empty()) {
      const std::string text = tokenizer.decode(parse_token_list(args->decode));
      std::fwrite(text.data(), 1, text.size(), stdout);
      std::fputs("\n", stdout);
      return;
    }
    const std::string text =
        args->file.empty() ? args->prompt : read_file_limited(args->file, kMaxPromptFileBytes, "prompt file");
    std::printf("%s\n", join_ids(tokenizer.encode(text)).c_str());
  });
}

}  // namespace mb::cli
