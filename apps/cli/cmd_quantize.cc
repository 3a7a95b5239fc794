// SPDX-License-Identifier: MIT
#include <cstdio>

#include "commands.h"
#include "engine/gguf_convert.h"

namespace mb::cli {

void add_quantize(CLI::App& app) {
  struct Args {
    std::string input, output, type = "q8_0";
  };
  auto args = std::make_shared<Args>();
  CLI::App* cmd = app.add_subcommand("quantize", "Write a checkpoint folder or GGUF file as a GGUF file");
  cmd->add_option("input", args->input, "Checkpoint folder or .gguf file")->required();
  cmd->add_option("output", args->output, "The .gguf file to write")->required();
  cmd->add_option("--type", args->type,
                  "Storage of the matrices: q8_0 | q4_0 | q4_k_m | f16 | bf16 | f32 (norms, conv, A, D and "
                  "biases stay f32, as in llama.cpp)")
      ->capture_default_str();
  cmd->callback([args] {
    {
      ProgressLine progress("quantizing");  // erased before the line below
      convert_to_gguf(args->input, args->output, parse_gguf_file_type(args->type), "", &progress);
    }
    std::fprintf(stderr, "wrote %s (%s)\n", args->output.c_str(), args->type.c_str());
  });
}

}  // namespace mb::cli
