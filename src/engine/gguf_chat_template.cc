// SPDX-License-Identifier: MIT
#include "engine/gguf_chat_template.h"

#include <algorithm>

#include "core/error.h"
#include "model/gguf_checkpoint.h"

namespace mb {
namespace {

constexpr const char* kTemplateKey = "tokenizer.chat_template";
constexpr const char* kTemplateNamesKey = "tokenizer.chat_templates";

// The text of the token whose id `key` holds, or "" when the file has no such key. An id outside
// tokenizer.ggml.tokens is an error: a template would otherwise render without its token silently.
std::string token_text(const GgufFile& file, const std::string& key) {
  const auto id = file.unsigned_if_present(key);
  if (!id) return "";
  const GgufValue* tokens = file.find("tokenizer.ggml.tokens");
  if (tokens == nullptr || tokens->element_type != GgufType::String) return "";
  if (*id >= tokens->strings.size())
    throw Error("'" + file.path() + "': metadata '" + key + "' is " + std::to_string(*id) + ", outside the " +
                std::to_string(tokens->strings.size()) + " tokens of tokenizer.ggml.tokens");
  return tokens->strings[*id];
}

// gguf-py keeps a template name's ASCII letters and digits and turns anything else into '_'.
std::string gguf_template_name(const std::string& name) {
  std::string out = name;
  for (char& c : out) {
    const bool alnum = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
    if (!alnum) c = '_';
  }
  return out;
}

}  // namespace

std::optional<ModelChatTemplate> gguf_chat_template(const GgufFile& file) {
  const auto source = file.string_if_present(kTemplateKey);
  if (!source) return std::nullopt;
  ModelChatTemplate found;
  found.source = *source;
  found.origin = file.path() + " (metadata " + kTemplateKey + ")";
  found.options.bos_token = token_text(file, "tokenizer.ggml.bos_token_id");
  found.options.eos_token = token_text(file, "tokenizer.ggml.eos_token_id");
  // The names come from the keys themselves; tokenizer.chat_templates only lists them again.
  const std::string prefix = std::string(kTemplateKey) + ".";
  for (const auto& [key, value] : file.metadata()) {
    if (key.rfind(prefix, 0) != 0) continue;
    found.named.emplace_back(key.substr(prefix.size()), file.string_value(key));
  }
  return found;
}

std::vector<std::pair<std::string, GgufValue>> gguf_chat_template_metadata(const ModelChatTemplate& found) {
  std::vector<std::pair<std::string, GgufValue>> metadata;
  std::vector<std::string> names;
  for (const auto& [name, source] : found.named) {
    const std::string key_name = gguf_template_name(name);
    // A later template of the same name replaces an earlier one, as a second add_string would.
    const std::string key = std::string(kTemplateKey) + "." + key_name;
    const auto same =
        std::find_if(metadata.begin(), metadata.end(), [&](const auto& m) { return m.first == key; });
    if (same != metadata.end()) {
      same->second = GgufValue::string(source);
      continue;
    }
    metadata.emplace_back(key, GgufValue::string(source));
    names.push_back(key_name);
  }
  if (!names.empty()) metadata.emplace_back(kTemplateNamesKey, GgufValue::string_array(std::move(names)));
  metadata.emplace_back(kTemplateKey, GgufValue::string(found.source));
  return metadata;
}

std::optional<ModelChatTemplate> find_checkpoint_chat_template(const std::string& model_path) {
  if (is_gguf_file(model_path)) return gguf_chat_template(GgufFile(model_path));
  return find_chat_template(model_path);
}

}  // namespace mb
