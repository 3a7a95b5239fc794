// SPDX-License-Identifier: MIT
// Qwen3.5's tokenizer (byte-level BPE, NFC, a Split on Qwen2's regex with \p{M} beside \p{L}) as
// a tokenizer.json and as GGUF metadata with tokenizer.ggml.pre "qwen35", checked against every
// case of llama.cpp's tokenizer test for that name (tests/data/tokenizers/qwen35: the .inp texts
// and the .out ids of models/ggml-vocab-qwen35.gguf, copied unchanged).
//
// The 248,320-token vocabulary itself is not committed (its tokenizer.json is 12.8 MB, and no copy
// of it or of ggml-vocab-qwen35.gguf was at hand). Every id of llama.cpp's cases lies below
// 151,643, and the pipeline run on the Qwen3 fixture's vocabulary and merges gives all of them:
// for these texts Qwen3.5's vocabulary agrees with Qwen2's. With this vocabulary the cases do not
// tell Qwen3.5's split from Qwen2's, so the split's pieces are checked on their own as well.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <sstream>

#include "engine/gguf_tokenizer.h"
#include "io/gguf.h"
#include "io/mapped_file.h"
#include "tokenizer/split.h"
#include "tokenizer/split_patterns.h"
#include "tokenizer/tokenizer_test_support.h"

namespace mb {
namespace {

constexpr std::string_view kQwen35SplitRegex =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

struct Qwen35Case {
  std::string text;
  std::vector<int32_t> ids;
};

// llama.cpp's test-tokenizer-0 format: texts separated by "\n__ggml_vocab_test__\n", one line of
// space-separated ids per text.
std::vector<Qwen35Case> qwen35_llama_cpp_cases() {
  const std::string dir = test::tokenizer_fixture_dir("qwen35");
  const std::string inp = read_text_file(dir + "/ggml-vocab-qwen35.gguf.inp");
  const std::string out = read_text_file(dir + "/ggml-vocab-qwen35.gguf.out");
  const std::string sep = "\n__ggml_vocab_test__\n";
  std::vector<Qwen35Case> cases;
  for (size_t at = 0;;) {
    const size_t next = inp.find(sep, at);
    cases.push_back({inp.substr(at, next == std::string::npos ? std::string::npos : next - at), {}});
    if (next == std::string::npos) break;
    at = next + sep.size();
  }
  std::istringstream lines(out);
  std::string line;
  for (Qwen35Case& c : cases) {
    if (!std::getline(lines, line)) break;
    std::istringstream ids(line);
    for (int32_t id; ids >> id;) c.ids.push_back(id);
  }
  return cases;
}

// The Qwen3 fixture's tokenizer.json with `regex` as its Split pattern, optionally without its
// NFC normalizer (llama.cpp's pipeline).
std::string qwen35_form(std::string_view regex, bool nfc) {
  nlohmann::json root = test::fixture_json("qwen3");
  root["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] = std::string(regex);
  if (!nfc) root["normalizer"] = nullptr;
  return root.dump();
}

// Texts that NFC changes (a letter and a combining accent): Hugging Face's tokenizer composes
// them, llama.cpp does not, so llama.cpp's ids are checked without the normalizer only.
bool qwen35_nfc_changes(const std::string& text) {
  return text.find("\xCC\x80") != std::string::npos || text.find("\xCC\x81") != std::string::npos;
}

size_t qwen35_mismatches(const Tokenizer& tokenizer, const std::vector<Qwen35Case>& cases,
                         bool with_nfc_cases, bool report) {
  size_t failures = 0;
  for (const Qwen35Case& c : cases) {
    if (!with_nfc_cases && qwen35_nfc_changes(c.text)) continue;
    const std::vector<int32_t> got = tokenizer.encode(c.text);
    if (got == c.ids) continue;
    if (report && failures < 5)
      ADD_FAILURE() << "'" << test::escape(c.text) << "': llama.cpp " << test::join_ids(c.ids) << ", got "
                    << test::join_ids(got);
    ++failures;
  }
  return failures;
}

TEST(Qwen35Tokenizer, CasesFileIsComplete) {
  const auto cases = qwen35_llama_cpp_cases();
  ASSERT_EQ(cases.size(), 51u);
  EXPECT_EQ(cases[0].text, "ied 4 \xC2\xBD months");
  EXPECT_EQ(test::join_ids(cases[0].ids), test::join_ids({1122, 220, 19, 220, 26062, 3951}));
  size_t nfc_cases = 0;
  for (const Qwen35Case& c : cases) nfc_cases += qwen35_nfc_changes(c.text);
  EXPECT_EQ(nfc_cases, 3u);  // "e\u0301", "re\u0301sume\u0301", "a\u0300" x 40 then "a"
}

TEST(Qwen35Tokenizer, TokenizerJsonMatchesLlamaCpp) {
  const auto cases = qwen35_llama_cpp_cases();
  const Tokenizer hf = Tokenizer::from_json_string(qwen35_form(kQwen35SplitRegex, true), "qwen35");
  EXPECT_EQ(qwen35_mismatches(hf, cases, false, true), 0u);
  // NFC first: the decomposed accents tokenize as the composed letters do.
  EXPECT_EQ(hf.encode("e\xCC\x81"), hf.encode("\xC3\xA9"));
  EXPECT_EQ(hf.encode("re\xCC\x81sume\xCC\x81"), hf.encode("r\xC3\xA9sum\xC3\xA9"));
  // Without it (llama.cpp's pipeline) the marks stay with their letters: every case agrees.
  const Tokenizer raw = Tokenizer::from_json_string(qwen35_form(kQwen35SplitRegex, false), "qwen35-raw");
  EXPECT_EQ(qwen35_mismatches(raw, cases, true, true), 0u);
}

std::vector<std::string> qwen35_pieces(std::string_view regex, const std::string& text) {
  const tok::SplitPreTokenizer split = tok::SplitPreTokenizer::from_json(
      {{"type", "Split"}, {"pattern", {{"Regex", std::string(regex)}}}, {"behavior", "Isolated"}}, "qwen35");
  std::vector<std::string_view> pieces;
  tok::RegexBudget budget;
  split.apply(text, pieces, "qwen35", budget);
  return std::vector<std::string>(pieces.begin(), pieces.end());
}

TEST(Qwen35Tokenizer, SplitKeepsCombiningMarksWithTheirLetters) {
  // llama.cpp's cases give the same ids under Qwen2's regex with this vocabulary (no merge joins
  // a letter and a following mark), so the pieces themselves are checked, against Qwen2's.
  using Pieces = std::vector<std::string>;
  const std::string e_acute = "e\xCC\x81",
                    hindi = "\xE0\xA4\xA8\xE0\xA4\xAE\xE0\xA4\xB8\xE0\xA5\x8D\xE0\xA4\xA4\xE0\xA5\x87";
  EXPECT_EQ(qwen35_pieces(kQwen35SplitRegex, e_acute + "!"), (Pieces{e_acute, "!"}));
  EXPECT_EQ(qwen35_pieces(tok::kQwen2PatternRegex, e_acute + "!"), (Pieces{"e", "\xCC\x81!"}));
  // A mark opens a word too, after the optional non-letter prefix.
  EXPECT_EQ(qwen35_pieces(kQwen35SplitRegex,
                          " \xCC\x81"
                          "ab"),
            (Pieces{" \xCC\x81"
                    "ab"}));
  EXPECT_EQ(qwen35_pieces(tok::kQwen2PatternRegex,
                          " \xCC\x81"
                          "ab"),
            (Pieces{" \xCC\x81", "ab"}));
  // Devanagari's virama and vowel sign (Mn) stay inside the word.
  EXPECT_EQ(qwen35_pieces(kQwen35SplitRegex, hindi + " " + hindi), (Pieces{hindi, " " + hindi}));
  EXPECT_GT(qwen35_pieces(tok::kQwen2PatternRegex, hindi).size(), 1u);
  // Hugging Face's (?i:'s|...) folds case as Unicode does, so LONG S (U+017F) ends a contraction;
  // llama.cpp's spelling of it ('[sS]|...) leaves "'\u017Ft" one word. The engine follows HF.
  const std::string llama_cpp_regex =
      R"((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
  EXPECT_EQ(qwen35_pieces(kQwen35SplitRegex, "a'\xC5\xBFt"), (Pieces{"a", "'\xC5\xBF", "t"}));
  EXPECT_EQ(qwen35_pieces(llama_cpp_regex, "a'\xC5\xBFt"), (Pieces{"a", "'\xC5\xBFt"}));
  // The rest is Qwen2's: single digits, contractions, newlines.
  EXPECT_EQ(qwen35_pieces(kQwen35SplitRegex, "I'LL 123\n\n x"),
            (Pieces{"I", "'LL", " ", "1", "2", "3", "\n\n", " x"}));
}

TEST(Qwen35Tokenizer, GgufMetadataNamedQwen35MatchesLlamaCpp) {
  const std::string json = qwen35_form(kQwen35SplitRegex, true);
  const auto metadata = gguf_tokenizer_metadata(json, 248320, 248046, "qwen35");
  GgufWriter writer;
  writer.set("general.architecture", GgufValue::string("qwen35"));
  for (const auto& [key, value] : metadata) writer.set(key, value);
  const std::string path = test::fresh_temp_dir("qwen35_tok") + "/tokenizer.gguf";
  writer.write(path);
  const GgufFile file(path);
  EXPECT_EQ(*file.string_if_present("tokenizer.ggml.pre"), "qwen35");
  EXPECT_EQ(file.find("tokenizer.ggml.tokens")->size(), 248320u);
  const Tokenizer tokenizer = gguf_tokenizer(file);
  const auto cases = qwen35_llama_cpp_cases();
  EXPECT_EQ(qwen35_mismatches(tokenizer, cases, false, true), 0u);
  const nlohmann::json back = nlohmann::json::parse(gguf_tokenizer_json(file));
  EXPECT_EQ(back["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"], std::string(kQwen35SplitRegex));
  EXPECT_EQ(back["normalizer"]["type"], "NFC");
  EXPECT_EQ(tokenizer.encode("e\xCC\x81"), tokenizer.encode("\xC3\xA9"));
}

}  // namespace
}  // namespace mb
