// SPDX-License-Identifier: MIT
#include "engine/gguf_tokenizer.h"

#include <algorithm>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "core/error.h"
#include "core/json_text.h"
#include "model/gguf_checkpoint.h"
#include "tokenizer/split_patterns.h"

namespace mb {
namespace {

using nlohmann::json;

// llama.cpp's token types (gguf-py's TokenType).
constexpr int64_t kNormal = 1, kUnknown = 2, kControl = 3, kUserDefined = 4, kUnused = 5, kByte = 6;

const json kByteLevel = {
    {"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", true}, {"use_regex", true}};

// The regex of Mistral's Tekken tokenizer as its tokenizer.json spells it (llama.cpp's "tekken").
constexpr std::string_view kTekkenRegex =
    R"([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

// The regex of Qwen3.5's tokenizer.json (llama.cpp's "qwen35"): Qwen2's with combining marks
// (\p{M}) joined to the letters. llama.cpp writes (?i:'s|...) as explicit case classes
// ('[sS]|...), which differs where Unicode case folding reaches past ASCII (Oniguruma's (?i)
// also takes U+017F LONG S for s); Hugging Face's own pattern is kept, as everywhere here.
constexpr std::string_view kQwen35Regex =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

// A pre-tokenizer name of llama.cpp and the tokenizer.json pipeline it stands for: ByteLevel with
// GPT-2's regex (split_regex empty), or a Split on `split_regex` (Isolated) followed by ByteLevel
// without a regex; NFC normalization or none; and BPE's ignore_merges, which llama.cpp ties to
// the name. The first entry of a pipeline is the name the writer gives it.
struct PreTokenizerForm {
  const char* name;
  std::string_view split_regex;
  bool nfc;
  bool ignore_merges;
};

constexpr PreTokenizerForm kPreTokenizerForms[] = {
    {"gpt-2", {}, false, false},
    {"olmo", {}, true, false},
    {"mpt", {}, true, false},
    {"llama-bpe", tok::kLlama3PatternRegex, false, true},
    {"llama3", tok::kLlama3PatternRegex, false, true},
    {"llama-v3", tok::kLlama3PatternRegex, false, true},
    // Granite-4.0's tokenizer: Llama-3's regex without ignore_merges.
    {"dbrx", tok::kLlama3PatternRegex, false, false},
    {"smaug-bpe", tok::kLlama3PatternRegex, false, false},
    {"tekken", kTekkenRegex, false, true},
    // Qwen2's, Qwen3's and Qwen3-Next's 151,643-token vocabulary (every digit its own piece).
    {"qwen2", tok::kQwen2PatternRegex, true, false},
    // Qwen3.5's and Qwen3.6's 248,320-token vocabulary. Both tokenizer.json files normalize to NFC
    // first, which llama.cpp does not (a decomposed "e\u0301" is one composed letter here).
    {"qwen35", kQwen35Regex, true, false},
};

const PreTokenizerForm* form_named(const std::string& name) {
  for (const PreTokenizerForm& form : kPreTokenizerForms)
    if (name == form.name) return &form;
  return nullptr;
}

std::string form_names() {
  std::string names;
  for (const PreTokenizerForm& form : kPreTokenizerForms)
    names += std::string(names.empty() ? "" : ", ") + form.name;
  return names;
}

json pre_tokenizer_json(const PreTokenizerForm& form) {
  if (form.split_regex.empty()) return kByteLevel;
  json byte_level = kByteLevel;
  byte_level["use_regex"] = false;
  const json split = {{"type", "Split"},
                      {"pattern", {{"Regex", std::string(form.split_regex)}}},
                      {"behavior", "Isolated"},
                      {"invert", false}};
  return {{"type", "Sequence"}, {"pretokenizers", json::array({split, byte_level})}};
}

// The Split regex of a tokenizer.json pre-tokenizer of one of the forms above ("" for plain
// ByteLevel with GPT-2's regex), or nothing for any other pre-tokenizer.
std::optional<std::string> split_regex_of(const json& pre) {
  const auto byte_level = [](const json& step, bool use_regex) {
    return step.is_object() && step.value("type", std::string()) == "ByteLevel" &&
           !step.value("add_prefix_space", false) && step.value("use_regex", true) == use_regex;
  };
  if (byte_level(pre, true)) return std::string();
  if (!pre.is_object() || pre.value("type", std::string()) != "Sequence" || !pre.contains("pretokenizers"))
    return std::nullopt;
  const json& steps = pre["pretokenizers"];
  if (!steps.is_array() || steps.size() != 2 || !byte_level(steps[1], false)) return std::nullopt;
  const json& split = steps[0];
  if (!split.is_object() || split.value("type", std::string()) != "Split" ||
      split.value("behavior", std::string("Isolated")) != "Isolated" || split.value("invert", false) ||
      !split.contains("pattern") || !split["pattern"].is_object() || !split["pattern"].contains("Regex") ||
      !split["pattern"]["Regex"].is_string())
    return std::nullopt;
  return split["pattern"]["Regex"].get<std::string>();
}

const GgufValue& string_array(const GgufFile& file, const char* key) {
  const GgufValue* value = file.find(key);
  if (value == nullptr) throw Error("'" + file.path() + "': missing required metadata '" + key + "'");
  if (!value->is_array() || value->element_type != GgufType::String)
    throw Error("'" + file.path() + "': metadata '" + key + "' must be an array of strings");
  return *value;
}

}  // namespace

std::string gguf_tokenizer_json(const GgufFile& file) {
  const std::string where = "'" + file.path() + "'";
  const auto model = file.string_if_present("tokenizer.ggml.model");
  if (!model) throw Error(where + " has no tokenizer (no tokenizer.ggml.model)");
  if (*model != "gpt2")
    throw Error(where + ": tokenizer.ggml.model '" + *model +
                "' is not supported (only \"gpt2\", byte-level BPE)");
  const std::string pre = file.string_value("tokenizer.ggml.pre");
  const PreTokenizerForm* form = form_named(pre);
  if (form == nullptr)
    throw Error(where + ": tokenizer.ggml.pre '" + pre + "' is not supported (expected " + form_names() +
                ")");
  const GgufValue& tokens = string_array(file, "tokenizer.ggml.tokens");
  const GgufValue& merges = string_array(file, "tokenizer.ggml.merges");
  const GgufValue* types = file.find("tokenizer.ggml.token_type");
  if (types != nullptr && (!types->is_array() || types->integers.size() != tokens.size()))
    throw Error(where + ": tokenizer.ggml.token_type must be an integer array with one entry per token (" +
                std::to_string(tokens.size()) + ")");
  if (tokens.size() > static_cast<size_t>(INT32_MAX))
    throw Error(where + ": tokenizer.ggml.tokens lists more tokens than int32 ids can number");

  json vocab = json::object();
  json added = json::array();
  std::map<std::string_view, size_t> first_id;
  for (size_t id = 0; id < tokens.size(); ++id) {
    const std::string& token = tokens.strings[id];
    const int64_t type = types ? types->integers[id] : kNormal;
    if (type < 0 || type > kByte)
      throw Error(where + ": token " + std::to_string(id) + " has unknown token type " +
                  std::to_string(type));
    if (type == kUnused) continue;
    const auto [it, inserted] = first_id.emplace(token, id);
    if (!inserted)
      throw Error(where + ": tokens " + std::to_string(it->second) + " and " + std::to_string(id) +
                  " are the same string");
    vocab[token] = id;
    if (type == kControl || type == kUnknown || type == kUserDefined) {
      const bool special = type != kUserDefined;
      added.push_back({{"id", id},
                       {"content", token},
                       {"single_word", false},
                       {"lstrip", false},
                       {"rstrip", false},
                       {"normalized", !special},
                       {"special", special}});
    }
  }
  const json root = {{"version", "1.0"},
                     {"added_tokens", added},
                     {"normalizer", form->nfc ? json{{"type", "NFC"}} : json(nullptr)},
                     {"pre_tokenizer", pre_tokenizer_json(*form)},
                     {"post_processor", nullptr},
                     {"decoder", kByteLevel},
                     {"model",
                      {{"type", "BPE"},
                       {"dropout", nullptr},
                       {"unk_token", nullptr},
                       {"fuse_unk", false},
                       {"byte_fallback", false},
                       {"ignore_merges", form->ignore_merges},
                       {"vocab", vocab},
                       {"merges", merges.strings}}}};
  try {
    return root.dump();
  } catch (const json::exception&) {
    throw Error(where + ": a token or merge of the tokenizer is not valid UTF-8");
  }
}

Tokenizer gguf_tokenizer(const GgufFile& file) {
  return Tokenizer::from_json_string(gguf_tokenizer_json(file), file.path());
}

std::vector<std::pair<std::string, GgufValue>> gguf_tokenizer_metadata(std::string_view tokenizer_json,
                                                                       int64_t vocab_rows,
                                                                       std::optional<int32_t> eos_token_id,
                                                                       const std::string& source) {
  const json root = parse_json_text(tokenizer_json, source, 128);
  const auto fail = [&](const std::string& what) {
    throw Error(source + ": " + what +
                "; GGUF files describe the byte-level BPE tokenizers of llama.cpp's pre-tokenizers " +
                form_names() + " only");
  };
  if (!root.is_object() || !root.contains("model") || !root["model"].is_object()) fail("no model object");
  const json& model = root["model"];
  if (model.value("type", std::string("BPE")) != "BPE") fail("the model is not BPE");
  const json& pre = root.contains("pre_tokenizer") ? root["pre_tokenizer"] : json();
  const std::optional<std::string> split_regex = split_regex_of(pre);
  if (!split_regex)
    fail(
        "the pre-tokenizer is neither ByteLevel with GPT-2's regex nor a Split followed by ByteLevel, "
        "without a "
        "prefix space");
  const json& normalizer = root.contains("normalizer") ? root["normalizer"] : json();
  const bool nfc = normalizer.is_object() && normalizer.value("type", std::string()) == "NFC";
  if (!normalizer.is_null() && !nfc) fail("the normalizer is neither absent nor NFC");
  const bool ignore_merges = model.contains("ignore_merges") && model["ignore_merges"].is_boolean() &&
                             model["ignore_merges"].get<bool>();
  const auto matches = [&](const PreTokenizerForm& form) {
    return form.split_regex == *split_regex && form.nfc == nfc && form.ignore_merges == ignore_merges;
  };
  const auto form = std::find_if(std::begin(kPreTokenizerForms), std::end(kPreTokenizerForms), matches);
  if (form == std::end(kPreTokenizerForms))
    fail("no llama.cpp pre-tokenizer has its split regex, normalizer and ignore_merges (" +
         std::string(nfc ? "NFC" : "no normalizer") + ", ignore_merges " +
         (ignore_merges ? "true" : "false") + ")");
  const std::string pre_name = form->name;

  const Tokenizer tokenizer = Tokenizer::from_json_string(tokenizer_json, source);
  if (tokenizer.vocab_size() > vocab_rows)
    throw Error(source + ": the tokenizer numbers " + std::to_string(tokenizer.vocab_size()) +
                " tokens but the model's embedding has " + std::to_string(vocab_rows) + " rows");
  std::set<std::string> added_contents;
  if (root.contains("added_tokens") && root["added_tokens"].is_array())
    for (const json& entry : root["added_tokens"])
      if (entry.is_object() && entry.contains("content") && entry["content"].is_string())
        added_contents.insert(entry["content"].get<std::string>());

  std::vector<std::string> tokens(static_cast<size_t>(vocab_rows));
  std::vector<int64_t> types(static_cast<size_t>(vocab_rows));
  for (int32_t id = 0; id < vocab_rows; ++id) {
    const auto token = tokenizer.id_to_token(id);
    if (!token) {
      // As llama.cpp's converter pads the vocabulary to the embedding's rows.
      tokens[id] = "[PAD" + std::to_string(id) + "]";
      types[id] = kUnused;
      continue;
    }
    tokens[id] = *token;
    types[id] = tokenizer.is_special(id) ? kControl : added_contents.count(*token) ? kUserDefined : kNormal;
  }
  std::vector<std::string> merges;
  if (model.contains("merges") && model["merges"].is_array()) {
    for (const json& merge : model["merges"]) {
      if (merge.is_string()) {
        merges.push_back(merge.get<std::string>());
      } else {
        const std::string left = merge[0].get<std::string>(), right = merge[1].get<std::string>();
        if (left.find(' ') != std::string::npos || right.find(' ') != std::string::npos)
          fail("a merge part contains a space, which \"a b\" merges cannot express");
        merges.push_back(left + " " + right);
      }
    }
  }
  std::vector<std::pair<std::string, GgufValue>> metadata = {
      {"tokenizer.ggml.model", GgufValue::string("gpt2")},
      {"tokenizer.ggml.pre", GgufValue::string(pre_name)},
      {"tokenizer.ggml.tokens", GgufValue::string_array(std::move(tokens))},
      {"tokenizer.ggml.token_type", GgufValue::integer_array(GgufType::Int32, std::move(types))},
      {"tokenizer.ggml.merges", GgufValue::string_array(std::move(merges))}};
  if (eos_token_id) metadata.emplace_back("tokenizer.ggml.eos_token_id", GgufValue::u32(*eos_token_id));
  metadata.emplace_back("tokenizer.ggml.add_bos_token", GgufValue::boolean(false));
  return metadata;
}

std::optional<Tokenizer> find_tokenizer(const std::string& model_path) {
  if (is_gguf_file(model_path)) {
    const GgufFile file(model_path);
    if (file.find("tokenizer.ggml.model") == nullptr) return std::nullopt;
    return gguf_tokenizer(file);
  }
  namespace fs = std::filesystem;
  const fs::path dir(model_path);
  std::error_code error;
  // A tokenizer.json that is there but unreadable (a symlink loop, a FIFO) is reported as such
  // by the loader, not taken for no tokenizer.
  const bool has_json = fs::exists(fs::symlink_status(dir / "tokenizer.json", error));
  const bool has_bpe_files =
      fs::is_regular_file(dir / "vocab.json", error) && fs::is_regular_file(dir / "merges.txt", error);
  if (!has_json && !has_bpe_files) return std::nullopt;
  return Tokenizer::from_model_dir(model_path);
}

Tokenizer load_tokenizer(const std::string& model_path) {
  if (is_gguf_file(model_path)) return gguf_tokenizer(GgufFile(model_path));
  return Tokenizer::from_model_dir(model_path);
}

}  // namespace mb
