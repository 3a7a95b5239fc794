// SPDX-License-Identifier: MIT
// Converting checkpoints to GGUF: `mambacpp quantize` and `make-model --format gguf`.
#pragma once

#include <string>

#include "model/gguf_checkpoint.h"

namespace mb {

// Writes the checkpoint at `input` (a Hugging Face or state-spaces folder, or a GGUF file) to
// `output` as a GGUF file of `type`, atomically, with its tokenizer: a folder's tokenizer.json
// (converted, see gguf_tokenizer.h) or a GGUF file's tokenizer.* metadata (copied). A folder
// without a tokenizer.json gives a file without a tokenizer. A folder's chat template (and its
// named templates) is written as llama.cpp's converter writes it (gguf_chat_template.h), with the
// ids of the bos and eos tokens its tokenizer_config.json names where the file has none yet. `input` and
// `output` may be the same file. `name` (general.name) defaults to the folder's name or the file's own.
// `progress`, when set, is told how far the conversion is. Throws mb::Error naming the problem.
void convert_to_gguf(const std::string& input, const std::string& output, GgufFileType type,
                     const std::string& name = "", ProgressLine* progress = nullptr);

}  // namespace mb
