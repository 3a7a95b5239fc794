// SPDX-License-Identifier: MIT
#include "engine/gguf_convert.h"

#include <algorithm>
#include <filesystem>
#include <optional>

#include "core/error.h"
#include "engine/gguf_chat_template.h"
#include "engine/gguf_tokenizer.h"
#include "io/file_io.h"
#include "model/weight_schema.h"

namespace mb {
namespace {

using Metadata = std::vector<std::pair<std::string, GgufValue>>;

// The id of the token spelled `text` in the tokenizer metadata, if it has one.
std::optional<int64_t> token_id_of(const Metadata& metadata, const std::string& text) {
  for (const auto& [key, value] : metadata) {
    if (key != "tokenizer.ggml.tokens") continue;
    const auto it = std::find(value.strings.begin(), value.strings.end(), text);
    if (it != value.strings.end()) return it - value.strings.begin();
  }
  return std::nullopt;
}

bool has_key(const Metadata& metadata, const std::string& key) {
  return std::any_of(metadata.begin(), metadata.end(), [&](const auto& m) { return m.first == key; });
}

// The folder's chat template, as llama.cpp's converter writes it, and the ids of the bos and eos
// tokens it names (tokenizer_config.json's bos_token and eos_token), so that the file renders the
// template with the same texts the folder does.
void add_chat_template(const ModelChatTemplate& chat_template, Metadata& metadata) {
  const std::pair<const char*, const std::string*> tokens[] = {
      {"tokenizer.ggml.bos_token_id", &chat_template.options.bos_token},
      {"tokenizer.ggml.eos_token_id", &chat_template.options.eos_token}};
  for (const auto& [key, text] : tokens) {
    if (text->empty() || has_key(metadata, key)) continue;
    if (const auto id = token_id_of(metadata, *text))
      metadata.emplace_back(key, GgufValue::u32(static_cast<uint32_t>(*id)));
  }
  for (auto& entry : gguf_chat_template_metadata(chat_template)) metadata.push_back(std::move(entry));
}

}  // namespace

void convert_to_gguf(const std::string& input, const std::string& output, GgufFileType type,
                     const std::string& name, ProgressLine* progress) {
  GgufExportOptions options;
  options.type = type;
  options.progress = progress;
  if (is_gguf_file(input)) {
    const GgufFile file(input);
    const GgufCheckpoint checkpoint = open_gguf_checkpoint(file);
    options.name = file.string_if_present("general.name").value_or("");
    for (const auto& [key, value] : file.metadata())
      if (key.rfind("tokenizer.", 0) == 0) options.extra_metadata.emplace_back(key, value);
    if (!name.empty()) options.name = name;
    write_gguf_checkpoint(output, checkpoint.config, *checkpoint.tensors, options);
    return;
  }
  const ModelConfig config = load_model_config(input);
  const TensorSet tensors = TensorSet::open_dir(input);
  const std::filesystem::path folder(input);
  options.name = std::filesystem::absolute(folder).lexically_normal().filename().string();
  if (options.name.empty())
    options.name = std::filesystem::absolute(folder).parent_path().filename().string();
  if (!name.empty()) options.name = name;
  const std::string tokenizer_path = (folder / "tokenizer.json").string();
  if (std::filesystem::is_regular_file(tokenizer_path)) {
    const TensorSpec spec = model_tensor_specs(config, true, 0).head[kEmbedding];
    const StoredTensor* embedding = tensors.find(spec.name);
    if (embedding == nullptr) embedding = tensors.find(spec.alt_name);
    if (embedding == nullptr || embedding->shape.size() != 2)
      throw Error("'" + input + "' has no 2-D embedding ('" + spec.name + "')");
    std::optional<int32_t> eos;
    if (!config.eos_token_ids.empty()) eos = config.eos_token_ids.front();
    options.extra_metadata =
        gguf_tokenizer_metadata(read_file_limited(tokenizer_path, kMaxJsonFileBytes, "tokenizer file"),
                                embedding->shape[0], eos, "'" + tokenizer_path + "'");
  }
  if (const auto chat_template = find_chat_template(input))
    add_chat_template(*chat_template, options.extra_metadata);
  write_gguf_checkpoint(output, config, tensors, options);
}

}  // namespace mb
