// SPDX-License-Identifier: MIT
// Loading tokenizer.json files and vocab.json + merges.txt pairs into a Tokenizer.
#include <filesystem>
#include <nlohmann/json.hpp>
#include <sstream>
#include <unordered_map>

#include "core/error.h"
#include "core/json_text.h"
#include "io/file_io.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/tokenizer_impl.h"

namespace mb {

namespace {

using nlohmann::json;

std::string read_file(const std::string& path, const char* what) {
  return read_file_limited(path, kMaxJsonFileBytes, what);
}

// Real tokenizer files nest a handful of levels (a Sequence of normalizers inside the
// pipeline); 128 leaves room for any plausible pipeline while keeping recursion bounded.
json parse_json(std::string_view text, const std::string& source) {
  return parse_json_text(text, source, 128);
}

const json* find_field(const json& object, const char* key) {
  const auto it = object.find(key);
  return it == object.end() ? nullptr : &*it;
}

bool bool_field(const json& object, const char* key, bool fallback, const std::string& where) {
  const json* value = find_field(object, key);
  if (value == nullptr || value->is_null()) return fallback;
  if (!value->is_boolean()) throw Error(where + ": '" + key + "' must be a boolean");
  return value->get<bool>();
}

std::optional<std::string> optional_string_field(const json& object, const char* key,
                                                 const std::string& where) {
  const json* value = find_field(object, key);
  if (value == nullptr || value->is_null()) return std::nullopt;
  if (!value->is_string()) throw Error(where + ": '" + key + "' must be a string or null");
  return value->get<std::string>();
}

std::vector<std::pair<std::string, int32_t>> parse_vocab(const json& vocab, const std::string& where) {
  if (!vocab.is_object()) throw Error(where + ": the vocabulary must be an object of token -> id");
  std::vector<std::pair<std::string, int32_t>> entries;
  entries.reserve(vocab.size());
  // Two tokens of one id would decode that id as either and encode both to it: the file is broken.
  std::unordered_map<int32_t, std::string> owner;
  owner.reserve(vocab.size());
  for (const auto& [token, id] : vocab.items()) {
    if (!id.is_number_integer()) {
      throw Error(where + ": the id of token '" + token + "' must be an integer, got " + json_excerpt(id));
    }
    const auto value = id.get<int64_t>();
    if (value < 0 || value > INT32_MAX) {
      throw Error(where + ": token '" + token + "' has id " + std::to_string(value) +
                  ", outside the int32 range");
    }
    const auto [it, fresh] = owner.emplace(static_cast<int32_t>(value), token);
    if (!fresh)
      throw Error(where + ": tokens '" + it->second + "' and '" + token + "' both have id " +
                  std::to_string(value) + " (each id must name one token)");
    entries.emplace_back(token, static_cast<int32_t>(value));
  }
  return entries;
}

// "a b" as written in merges.txt and in older tokenizer.json files: exactly one space.
std::pair<std::string, std::string> split_merge_line(std::string_view line, const std::string& where) {
  const size_t space = line.find(' ');
  if (space == std::string_view::npos || line.find(' ', space + 1) != std::string_view::npos) {
    throw Error(where + ": merge '" + std::string(line) + "' is not two tokens separated by one space");
  }
  return {std::string(line.substr(0, space)), std::string(line.substr(space + 1))};
}

std::vector<std::pair<std::string, std::string>> parse_json_merges(const json* merges,
                                                                   const std::string& where) {
  std::vector<std::pair<std::string, std::string>> out;
  if (merges == nullptr || merges->is_null()) return out;
  if (!merges->is_array()) throw Error(where + ": 'merges' must be an array");
  out.reserve(merges->size());
  for (size_t rank = 0; rank < merges->size(); ++rank) {
    const json& merge = (*merges)[rank];
    const std::string at = where + ": merge #" + std::to_string(rank);
    if (merge.is_string()) {
      out.push_back(split_merge_line(merge.get<std::string>(), at));
    } else if (merge.is_array() && merge.size() == 2 && merge[0].is_string() && merge[1].is_string()) {
      out.emplace_back(merge[0].get<std::string>(), merge[1].get<std::string>());
    } else {
      throw Error(at + " must be \"a b\" or [\"a\", \"b\"], got " + json_excerpt(merge));
    }
  }
  return out;
}

tok::BpeModel parse_model(const json& root, const std::string& source) {
  const json* model = find_field(root, "model");
  if (model == nullptr || !model->is_object()) throw Error(source + ": missing 'model' object");
  const std::string where = source + ": model";
  const json* type = find_field(*model, "type");
  if (type != nullptr && !type->is_string()) throw Error(where + ": 'type' must be a string");
  // Files written before models were tagged carry no type; HF then recognises BPE by its fields.
  if (type != nullptr && type->get<std::string>() != "BPE") {
    throw Error(where + ": unsupported model type '" + type->get<std::string>() +
                "' (only BPE is supported)");
  }
  if (type == nullptr && find_field(*model, "merges") == nullptr) {
    throw Error(where + ": no 'type' and no 'merges', so it is not a BPE model");
  }
  const json* vocab = find_field(*model, "vocab");
  if (vocab == nullptr) throw Error(where + ": missing 'vocab'");

  const json* dropout = find_field(*model, "dropout");
  if (dropout != nullptr && !dropout->is_null() && (!dropout->is_number() || dropout->get<double>() != 0.0)) {
    throw Error(where + ": BPE dropout " + json_excerpt(*dropout) +
                " is not supported (encoding must be deterministic)");
  }
  for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    const auto affix = optional_string_field(*model, key, where);
    if (affix && !affix->empty()) throw Error(where + ": a non-empty '" + key + "' is not supported");
  }
  tok::BpeOptions options;
  options.ignore_merges = bool_field(*model, "ignore_merges", false, where);
  options.unk_token = optional_string_field(*model, "unk_token", where);
  options.fuse_unk = bool_field(*model, "fuse_unk", false, where);
  options.byte_fallback = bool_field(*model, "byte_fallback", false, where);
  return tok::BpeModel(parse_vocab(*vocab, where), parse_json_merges(find_field(*model, "merges"), where),
                       std::move(options), source);
}

void add_json_added_tokens(const json& root, Tokenizer::Impl& impl) {
  const json* tokens = find_field(root, "added_tokens");
  if (tokens == nullptr || tokens->is_null()) return;
  if (!tokens->is_array()) throw Error(impl.source + ": 'added_tokens' must be an array");
  std::unordered_map<int64_t, std::string> owner;  // the stated ids, which must name one token each
  for (size_t i = 0; i < tokens->size(); ++i) {
    const json& entry = (*tokens)[i];
    const std::string where = impl.source + ": added_tokens[" + std::to_string(i) + "]";
    if (!entry.is_object()) throw Error(where + " must be an object");
    const json* content = find_field(entry, "content");
    if (content == nullptr || !content->is_string()) throw Error(where + " needs a string 'content'");
    tok::AddedToken token;
    token.content = content->get<std::string>();
    if (const json* id = find_field(entry, "id"); id != nullptr && id->is_number_integer()) {
      const auto [it, fresh] = owner.emplace(id->get<int64_t>(), token.content);
      if (!fresh && it->second != token.content)
        throw Error(where + ": '" + token.content + "' has id " + std::to_string(id->get<int64_t>()) +
                    ", which added token '" + it->second + "' already has (each id must name one token)");
    }
    token.single_word = bool_field(entry, "single_word", false, where);
    token.lstrip = bool_field(entry, "lstrip", false, where);
    token.rstrip = bool_field(entry, "rstrip", false, where);
    token.normalized = bool_field(entry, "normalized", true, where);
    token.special = bool_field(entry, "special", false, where);
    // The "id" field is not trusted: like HF, a token keeps its vocabulary id when it has one and
    // is otherwise numbered after the vocabulary, in file order.
    impl.added.add(token, impl.model);
  }
}

const json& stage(const json& root, const char* key) {
  static const json null_value = nullptr;
  const json* value = find_field(root, key);
  return value == nullptr ? null_value : *value;
}

}  // namespace

Tokenizer Tokenizer::from_json_string(std::string_view json_text, const std::string& source) {
  const json root = parse_json(json_text, source);
  if (!root.is_object()) throw Error(source + ": a tokenizer.json must hold a JSON object");
  try {
    auto impl = std::make_shared<Impl>(source, parse_model(root, source),
                                       tok::Normalizer::from_json(stage(root, "normalizer"), source),
                                       tok::PreTokenizer::from_json(stage(root, "pre_tokenizer"), source),
                                       tok::Decoder::from_json(stage(root, "decoder"), source));
    add_json_added_tokens(root, *impl);
    impl->finalize();
    return Tokenizer(std::move(impl));
  } catch (const json::exception& e) {
    throw Error(source + ": " + e.what());
  }
}

Tokenizer Tokenizer::from_json_file(const std::string& path) {
  return from_json_string(read_file(path, "tokenizer file"), path);
}

Tokenizer Tokenizer::from_vocab_merges(const std::string& vocab_json_path,
                                       const std::string& merges_txt_path) {
  const json vocab = parse_json(read_file(vocab_json_path, "vocabulary file"), vocab_json_path);
  const std::string merges_text = read_file(merges_txt_path, "merges file");
  std::vector<std::pair<std::string, std::string>> merges;
  std::istringstream lines(merges_text);
  std::string line;
  size_t line_number = 0;
  while (std::getline(lines, line)) {
    ++line_number;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    // The "#version: 0.2" header is skipped as HF does; blank lines carry no merge.
    if (line.starts_with("#version") || line.empty()) continue;
    merges.push_back(split_merge_line(line, merges_txt_path + ":" + std::to_string(line_number)));
  }
  const std::string source = vocab_json_path + " + " + merges_txt_path;
  auto impl =
      std::make_shared<Impl>(source, tok::BpeModel(parse_vocab(vocab, vocab_json_path), merges, {}, source),
                             tok::Normalizer::none(), tok::PreTokenizer::gpt2(), tok::Decoder::byte_level());
  if (impl->model.token_to_id("<|endoftext|>")) {
    tok::AddedToken end_of_text;
    end_of_text.content = "<|endoftext|>";
    end_of_text.normalized = false;
    end_of_text.special = true;
    impl->added.add(end_of_text, impl->model);
  }
  impl->finalize();
  return Tokenizer(std::move(impl));
}

Tokenizer Tokenizer::from_model_dir(const std::string& dir) {
  namespace fs = std::filesystem;
  const fs::path root(dir);
  std::error_code error;
  // Any entry named tokenizer.json is the tokenizer, so one that cannot be read (a symlink loop,
  // a FIFO, a dangling link) is reported by read_file_limited rather than as no tokenizer.
  if (fs::exists(fs::symlink_status(root / "tokenizer.json", error)))
    return from_json_file((root / "tokenizer.json").string());
  if (fs::is_regular_file(root / "vocab.json", error) && fs::is_regular_file(root / "merges.txt", error)) {
    return from_vocab_merges((root / "vocab.json").string(), (root / "merges.txt").string());
  }
  throw Error("no tokenizer in '" + dir + "': expected tokenizer.json, or vocab.json and merges.txt");
}

}  // namespace mb
