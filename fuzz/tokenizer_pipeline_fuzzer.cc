// SPDX-License-Identifier: MIT
// Fuzzes the normalizer, pre-tokenizer and decoder pipelines of a tokenizer.json and their
// budgets (src/tokenizer/pipeline_limits.h). The input is read as a program: a byte says how
// many steps each stage gets (Sequences of up to 80, past the 64-step limit), each step is a
// type byte and, for Replace, Prepend and Split, short strings taken from the input (a Split's
// is its regex or literal, so Oniguruma compiles fuzzed patterns); what is left is
// the text to encode. The fixed byte-level vocabulary stays, so every input reaches the
// pipelines. A hostile pipeline must be refused with mb::Error, at load or while encoding,
// never run away: libFuzzer's -timeout and -rss_limit_mb (fuzz/run_fuzzers.sh) report a
// budget that fails to bound the work or the memory (the regexes' backtracking included).
#include <algorithm>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "fuzz_support.h"
#include "tokenizer/tokenizer.h"

namespace {

using nlohmann::json;

json* base = nullptr;

// Reads the input front to back; past its end every read yields zero bytes.
class Reader {
 public:
  explicit Reader(std::string_view data) : data_(data) {}
  unsigned char byte() { return pos_ < data_.size() ? static_cast<unsigned char>(data_[pos_++]) : 0; }
  // A string of 0 to 15 bytes, repeated up to 16 times so a Replace can grow its text.
  std::string text() {
    const unsigned char spec = byte();
    const std::string_view piece = data_.substr(std::min(pos_, data_.size()), spec & 15);
    pos_ += piece.size();
    std::string out;
    for (int i = 0; i <= (spec >> 4); ++i) out += piece;
    return out;
  }
  std::string_view rest() const { return data_.substr(std::min(pos_, data_.size())); }

 private:
  std::string_view data_;
  size_t pos_ = 0;
};

json string_pattern(Reader& in) {
  std::string pattern = in.text();
  if (pattern.empty()) pattern = "a";
  return {{"String", pattern}};
}

json normalizer_step(Reader& in) {
  switch (in.byte() % 6) {
    case 0:
      return {{"type", "NFC"}};
    case 1:
      return {{"type", "NFKD"}};
    case 2:
      return {{"type", "Prepend"}, {"prepend", in.text()}};
    default: {
      json step = {{"type", "Replace"}, {"pattern", string_pattern(in)}};
      step["content"] = in.text();
      return step;
    }
  }
}

// A Split with a pattern taken from the input (a regex Oniguruma compiles, or refuses, or a
// literal), one of the five behaviors and either invert flag.
json split_step(Reader& in, unsigned char type) {
  static const char* const kBehaviors[] = {"Removed", "Isolated", "MergedWithPrevious", "MergedWithNext",
                                           "Contiguous"};
  json step = json::object();
  step["type"] = "Split";
  step["pattern"] = json::object();
  step["pattern"][(type & 16) != 0 ? "String" : "Regex"] = in.text();
  step["behavior"] = kBehaviors[(type >> 5) % 5];
  step["invert"] = (type & 8) != 0;
  return step;
}

json pre_tokenizer_step(Reader& in) {
  const unsigned char type = in.byte();
  if (type % 4 == 0) return {{"type", "Metaspace"}, {"replacement", "\u2581"}, {"prepend_scheme", "always"}};
  if (type % 4 == 1) return split_step(in, type);
  return {{"type", "ByteLevel"}, {"add_prefix_space", (type & 4) != 0}, {"use_regex", (type & 8) != 0}};
}

json decoder_step(Reader& in) {
  switch (in.byte() % 3) {
    case 0:
      return {{"type", "Fuse"}};
    case 1:
      return {{"type", "Strip"}, {"content", " "}, {"start", 1}, {"stop", 0}};
    default: {
      json step = {{"type", "Replace"}, {"pattern", string_pattern(in)}};
      step["content"] = in.text();
      return step;
    }
  }
}

// A Sequence of `steps`, built member by member: the braced form this harness used before,
// `sequence = {{"type", "Sequence"}, {key, json::array({sequence, sequence})}}`, leaked its
// copies under clang 14 and nlohmann-json 3.11.2 (LeakSanitizer failed CI's fuzzing stage).
json sequence_of(const char* key, json steps) {
  json sequence = json::object();
  sequence["type"] = "Sequence";
  sequence[key] = std::move(steps);
  return sequence;
}

template <class Step>
json stage(Reader& in, const char* key, Step&& step) {
  const int count = in.byte() % 81;
  if (count == 0) return nullptr;
  json steps = json::array();
  for (int i = 0; i < count; ++i) steps.push_back(step(in));
  json sequence = sequence_of(key, std::move(steps));
  // Every other input nests its Sequence in another, for the nesting and total-step limits.
  if (count % 2 == 0) {
    json both = json::array();
    both.push_back(sequence);
    both.push_back(std::move(sequence));
    return sequence_of(key, std::move(both));
  }
  return sequence;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  const std::string path = mb::fuzz::scratch_dir() + "/byte_level.json";
  mb::write_byte_level_tokenizer_json(path, 300);
  std::ifstream in(path, std::ios::binary);
  static json file = json::parse(std::string(std::istreambuf_iterator<char>(in), {}));
  base = &file;
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Reader in(std::string_view(reinterpret_cast<const char*>(data), size));
  json file = *base;
  file["normalizer"] = stage(in, "normalizers", normalizer_step);
  file["pre_tokenizer"] = stage(in, "pretokenizers", pre_tokenizer_step);
  file["decoder"] = stage(in, "decoders", decoder_step);
  const std::string text(in.rest());
  // Strings taken from the input may be invalid UTF-8, which a JSON text cannot hold.
  const std::string file_text = file.dump(-1, ' ', false, json::error_handler_t::replace);
  mb::fuzz::expect_clean_refusal([&] {
    const mb::Tokenizer tokenizer = mb::Tokenizer::from_json_string(file_text, "fuzz/pipeline.json");
    const std::vector<int32_t> ids = tokenizer.encode(text);
    tokenizer.decode(ids);
  });
  return 0;
}
