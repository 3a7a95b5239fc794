#include "engine/gguf_convert.h"

#include <filesystem>

#include "core/error.h"
#include "engine/gguf_tokenizer.h"
#include "io/file_io.h"
#include "model/weight_schema.h"

namespace mb {

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
  write_gguf_checkpoint(output, config, tensors, options);
}

}  // namespace mb
