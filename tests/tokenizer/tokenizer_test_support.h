// SPDX-License-Identifier: MIT
// Fixtures shared by the tokenizer tests: the committed tokenizer files, the golden corpus and
// small helpers for readable failure messages.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/tokenizer.h"

namespace mb::test {

// The committed tokenizers, each with tokenizer.json, goldens.json and edge_goldens.json: four
// byte-level ones and a SentencePiece-style one with byte fallback (llama2), then three whose
// Split patterns run on Oniguruma, trimmed to their first 20,000 ids (gpt4o: the o200k regex,
// inverted with Removed; deepseek-v3: a Sequence of three Splits; gemma3: a String pattern
// with MergedWithPrevious and byte fallback).
inline const std::vector<std::string> kGoldenTokenizers = {"gpt-neox-20b", "gpt2",  "llama3",      "qwen3",
                                                           "llama2",       "gpt4o", "deepseek-v3", "gemma3"};

std::string tokenizer_fixture_dir(const std::string& name);

// Loads tests/data/tokenizers/<name>/tokenizer.json once per process.
const Tokenizer& fixture_tokenizer(const std::string& name);

struct CorpusCase {
  std::string name;
  std::string bytes;          // the text as given to encode(), possibly invalid UTF-8
  bool invalid_utf8 = false;  // the case was written as hex bytes
};

const std::vector<CorpusCase>& golden_corpus();

nlohmann::json read_json_file(const std::string& path);
// tests/data/tokenizers/<name>/tokenizer.json parsed, once per process.
const nlohmann::json& fixture_json(const std::string& name);
const nlohmann::json& goldens_for(const std::string& name);

// Makes control characters and non-ASCII bytes visible in assertion messages.
std::string escape(std::string_view bytes);
std::string join_ids(const std::vector<int32_t>& ids, size_t from = 0, size_t count = SIZE_MAX);

// A small byte-level BPE tokenizer.json: the 256 byte tokens at ids 0..255, the merges given
// as byte-level strings ("Ġ" for a space) with their results numbered from 256, GPT-2
// pre-tokenization, a ByteLevel decoder, and `added_tokens` appended as given (objects with
// at least "content"). The normalizer is null unless one is passed.
nlohmann::json tiny_tokenizer_json(const std::vector<std::pair<std::string, std::string>>& merges,
                                   const nlohmann::json& added_tokens = nlohmann::json::array(),
                                   const nlohmann::json& normalizer = nullptr);

// A fresh, empty directory under the system temp dir.
std::string fresh_temp_dir(const std::string& tag);

}  // namespace mb::test
