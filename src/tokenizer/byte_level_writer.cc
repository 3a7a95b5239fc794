// SPDX-License-Identifier: MIT
// write_byte_level_tokenizer_json: a tiny byte-level BPE tokenizer learned from built-in text.
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/error.h"
#include "io/file_io.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/pipeline.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/utf8.h"

namespace mb {

namespace {

constexpr int32_t kByteTokenCount = 256;
constexpr int32_t kMaxMerges = 400;
constexpr std::string_view kEndOfText = "<|endoftext|>";

// Plain English prose, so that the learned merges are the common English fragments ("th",
// " the", "ing") and a random model's prompts take a handful of tokens rather than one per byte.
constexpr std::string_view kTrainingText =
    "The state space model reads the text one token at a time and keeps a small summary of "
    "everything it has seen. Each new token updates the summary, and the summary is all the model "
    "needs in order to predict the next token. Because the summary has a fixed size, the cost of "
    "each step does not grow with the length of the text, which is why these models are fast when "
    "they generate long answers.\n"
    "In the morning the town was quiet. The baker opened the shop, the children walked to school, "
    "and the old man on the corner read his newspaper while the sun came up over the hills. Later "
    "there would be noise and traffic and people talking in the street, but for now there was only "
    "the sound of the wind in the trees and the birds singing on the roofs.\n"
    "A good test of a tokenizer is whether it can turn any text into numbers and back again without "
    "losing a single byte. Letters, digits such as 0, 1, 2, 3, 42 and 2024, punctuation like commas, "
    "periods, question marks and quotes, and even characters from other languages must all survive "
    "the round trip. This one works at the level of bytes, so nothing is ever unknown.\n"
    "She said that they would meet again at the station in the evening, and that he should bring the "
    "book he had promised her. He thought about it for a long time, then he wrote a short note, put "
    "it in his pocket, and went out into the rain. It was the kind of evening that makes people want "
    "to stay at home, but he had made a promise and he intended to keep it.\n"
    "Learning to write clear code means thinking about the people who will read it. Names should say "
    "what things are, functions should do one thing, and comments should explain why something is "
    "done, not what the next line does. Tests should show how the code is meant to be used.\n";

using Symbols = std::vector<std::string>;

// Splits a byte-level word into its characters, the starting symbols of BPE training.
Symbols characters_of(const std::string& word) {
  Symbols symbols;
  size_t pos = 0;
  while (pos < word.size()) {
    const size_t start = pos;
    tok::next_code_point(word, pos);
    symbols.push_back(word.substr(start, pos - start));
  }
  return symbols;
}

std::vector<std::pair<std::string, std::string>> learn_merges(int32_t max_merges) {
  std::vector<std::string> words;
  tok::PreTokenizer::gpt2().apply(kTrainingText, words);
  std::map<std::string, int> word_counts;
  for (const std::string& word : words) ++word_counts[word];
  std::vector<std::pair<Symbols, int>> corpus;
  for (const auto& [word, count] : word_counts) corpus.emplace_back(characters_of(word), count);

  std::vector<std::pair<std::string, std::string>> merges;
  while (static_cast<int32_t>(merges.size()) < max_merges) {
    // An ordered map makes ties resolve to the lexicographically smallest pair, so the output
    // never depends on hash order.
    std::map<std::pair<std::string, std::string>, int> pair_counts;
    for (const auto& [symbols, count] : corpus) {
      for (size_t i = 0; i + 1 < symbols.size(); ++i) pair_counts[{symbols[i], symbols[i + 1]}] += count;
    }
    const std::pair<std::string, std::string>* best = nullptr;
    int best_count = 1;
    for (const auto& [pair, count] : pair_counts) {
      if (count > best_count) {
        best = &pair;
        best_count = count;
      }
    }
    if (best == nullptr) break;
    const auto merge = *best;
    merges.push_back(merge);
    for (auto& [symbols, count] : corpus) {
      Symbols merged;
      for (size_t i = 0; i < symbols.size(); ++i) {
        if (i + 1 < symbols.size() && symbols[i] == merge.first && symbols[i + 1] == merge.second) {
          merged.push_back(merge.first + merge.second);
          ++i;
        } else {
          merged.push_back(symbols[i]);
        }
      }
      symbols.swap(merged);
    }
  }
  return merges;
}

}  // namespace

void write_byte_level_tokenizer_json(const std::string& path, int32_t max_vocab) {
  const int32_t minimum = kByteTokenCount + 1;
  if (max_vocab < minimum) {
    throw Error("a byte-level tokenizer needs a vocabulary of at least " + std::to_string(minimum) +
                " entries, but max_vocab is " + std::to_string(max_vocab));
  }
  nlohmann::ordered_json vocab = nlohmann::ordered_json::object();
  vocab[std::string(kEndOfText)] = 0;
  for (int32_t byte = 0; byte < kByteTokenCount; ++byte) {
    std::string token;
    tok::append_utf8(token, tok::byte_to_char(static_cast<unsigned char>(byte)));
    vocab[token] = byte + 1;
  }
  nlohmann::ordered_json merges = nlohmann::ordered_json::array();
  int32_t next_id = minimum;
  for (const auto& [left, right] : learn_merges(kMaxMerges)) {
    const std::string merged = left + right;
    if (!vocab.contains(merged)) {
      if (next_id >= max_vocab) break;
      vocab[merged] = next_id++;
    }
    merges.push_back(nlohmann::ordered_json::array({left, right}));
  }

  nlohmann::ordered_json root;
  root["version"] = "1.0";
  root["truncation"] = nullptr;
  root["padding"] = nullptr;
  root["added_tokens"] = nlohmann::ordered_json::array({{{"id", 0},
                                                         {"content", kEndOfText},
                                                         {"single_word", false},
                                                         {"lstrip", false},
                                                         {"rstrip", false},
                                                         {"normalized", false},
                                                         {"special", true}}});
  root["normalizer"] = {{"type", "NFC"}};
  const nlohmann::ordered_json byte_level = {
      {"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", true}, {"use_regex", true}};
  root["pre_tokenizer"] = byte_level;
  root["post_processor"] = byte_level;
  root["decoder"] = byte_level;
  root["model"] = {{"type", "BPE"},
                   {"dropout", nullptr},
                   {"unk_token", nullptr},
                   {"continuing_subword_prefix", nullptr},
                   {"end_of_word_suffix", nullptr},
                   {"fuse_unk", false},
                   {"byte_fallback", false},
                   {"ignore_merges", false},
                   {"vocab", vocab},
                   {"merges", merges}};

  write_file_atomically(path, root.dump(1) + "\n");
}

}  // namespace mb
