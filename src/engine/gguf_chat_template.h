// SPDX-License-Identifier: MIT
// Chat templates in GGUF metadata, as llama.cpp's convert_hf_to_gguf.py writes them (gguf-py's
// GGUFWriter.add_chat_template): the folder's template under tokenizer.chat_template; a folder's
// list of named templates as its "default" there, each other one under
// tokenizer.chat_template.NAME (the name with every character but ASCII letters and digits turned
// into '_'), and their names in tokenizer.chat_templates. The template's bos_token and eos_token
// are the texts of tokenizer.ggml.bos_token_id and eos_token_id, as llama.cpp renders them.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "chat/chat_template.h"
#include "io/gguf.h"

namespace mb {

// The template of a GGUF file, its origin "PATH (metadata tokenizer.chat_template)"; std::nullopt
// when the file has no tokenizer.chat_template. Throws mb::Error naming the file and the key for a
// value that is not a string (or token ids that are not ids of its vocabulary).
std::optional<ModelChatTemplate> gguf_chat_template(const GgufFile& file);

// The metadata that holds `found` (its source and named templates) in a GGUF file.
std::vector<std::pair<std::string, GgufValue>> gguf_chat_template_metadata(const ModelChatTemplate& found);

// The chat template of a checkpoint: a GGUF file's metadata, or a folder's files
// (find_chat_template); std::nullopt when it has none. Throws as those do.
std::optional<ModelChatTemplate> find_checkpoint_chat_template(const std::string& model_path);

}  // namespace mb
