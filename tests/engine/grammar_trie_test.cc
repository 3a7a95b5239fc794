// SPDX-License-Identifier: MIT
// The token trie's allowed set against brute force (every token's bytes tried against the
// matcher) over the gpt2 and qwen3 tokenizers in random grammar states, tokens that split a
// UTF-8 character, special tokens, and the TokenConstraint built on them.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "core/error.h"
#include "engine/grammar/gbnf.h"
#include "engine/grammar/grammar_constraint.h"
#include "engine/grammar/grammar_matcher.h"
#include "tokenizer/tokenizer.h"

namespace mb {
namespace {

struct GrammarTrieTokenizer {
  std::unique_ptr<Tokenizer> tokenizer;
  std::shared_ptr<const TokenTrie> trie;
};

const GrammarTrieTokenizer& grammar_trie_tokenizer(const std::string& name) {
  static std::map<std::string, GrammarTrieTokenizer> loaded;
  auto it = loaded.find(name);
  if (it == loaded.end()) {
    GrammarTrieTokenizer t;
    t.tokenizer = std::make_unique<Tokenizer>(
        Tokenizer::from_json_file(std::string(MB_TEST_DATA_DIR) + "/tokenizers/" + name + "/tokenizer.json"));
    t.trie = std::make_shared<TokenTrie>(*t.tokenizer);
    it = loaded.emplace(name, std::move(t)).first;
  }
  return it->second;
}

std::vector<int32_t> grammar_brute_force_allowed(const Grammar& g, const TokenTrie& trie,
                                                 const GrammarState& state) {
  std::vector<int32_t> allowed;
  for (int32_t id = 0; id < trie.vocab_size(); ++id) {
    const std::string* bytes = trie.token_bytes(id);
    if (bytes == nullptr) continue;
    GrammarState s = state;
    if (grammar_advance_bytes(g, s, *bytes)) allowed.push_back(id);
  }
  return allowed;
}

const char* const kTrieJsonGrammar = R"(root ::= object
object ::= "{" ws (pair ("," ws pair)*)? ws "}"
pair ::= string ws ":" ws value
value ::= object | array | string | number | ("true" | "false" | "null")
array ::= "[" ws (value ("," ws value)*)? ws "]"
string ::= "\"" ([^"\\\x00-\x1f] | "\\" ["\\/bfnrt])* "\""
number ::= "-"? [0-9]+ ("." [0-9]+)?
ws ::= [ \t\n]*)";

const char* const kTrieTextGrammar =
    "root ::= [a-zA-Z \xC3\xA0-\xC3\xBF\xE4\xB8\x80-\xE9\xBF\xBF]+ \"。\"? [0-9]{0,3}";

class GrammarTrie : public ::testing::TestWithParam<std::string> {};

TEST_P(GrammarTrie, AllowedSetEqualsBruteForceInRandomStates) {
  const GrammarTrieTokenizer& t = grammar_trie_tokenizer(GetParam());
  std::mt19937_64 rng(7);
  for (const char* gbnf : {kTrieJsonGrammar, kTrieTextGrammar}) {
    const Grammar g = parse_gbnf(gbnf);
    GrammarState state = grammar_initial_state(g);
    // Walk by random allowed tokens, checking the set at each state on the way.
    for (int step = 0; step < 4; ++step) {
      const std::vector<int32_t> allowed = t.trie->allowed_tokens(g, state);
      ASSERT_EQ(allowed, grammar_brute_force_allowed(g, *t.trie, state)) << gbnf << "\nstep " << step;
      ASSERT_FALSE(allowed.empty());
      const int32_t pick = allowed[rng() % allowed.size()];
      ASSERT_TRUE(grammar_advance_bytes(g, state, *t.trie->token_bytes(pick)));
    }
  }
}

TEST_P(GrammarTrie, SpecialTokensAreNeverAllowed) {
  const GrammarTrieTokenizer& t = grammar_trie_tokenizer(GetParam());
  const Grammar any = parse_gbnf("root ::= .*");
  const std::vector<int32_t> allowed = t.trie->allowed_tokens(any, grammar_initial_state(any));
  int32_t special = 0;
  for (int32_t id = 0; id < t.tokenizer->vocab_size(); ++id) {
    if (!t.tokenizer->is_special(id)) continue;
    ++special;
    EXPECT_FALSE(std::binary_search(allowed.begin(), allowed.end(), id)) << id;
    EXPECT_EQ(t.trie->token_bytes(id), nullptr);
  }
  EXPECT_GT(special, 0);
}

INSTANTIATE_TEST_SUITE_P(Tokenizers, GrammarTrie, ::testing::Values("gpt2", "qwen3"));

TEST(GrammarTrieUtf8, TokensThatSplitACharacterCarryItAcross) {
  const GrammarTrieTokenizer& t = grammar_trie_tokenizer("gpt2");
  // gpt2's byte tokens: each single byte is a token, so é can come as C3 then A9.
  int32_t lead = -1, tail = -1, tail_other = -1;
  for (int32_t id = 0; id < t.trie->vocab_size(); ++id) {
    const std::string* b = t.trie->token_bytes(id);
    if (b == nullptr) continue;
    if (*b == "\xC3") lead = id;
    if (*b == "\xA9") tail = id;
    if (*b == "\xA8") tail_other = id;
  }
  ASSERT_GE(lead, 0);
  ASSERT_GE(tail, 0);
  ASSERT_GE(tail_other, 0);
  const auto grammar = std::make_shared<const Grammar>(parse_gbnf("root ::= \"\xC3\xA9!\""));
  std::unique_ptr<TokenConstraint> c = make_grammar_constraint(grammar, t.trie);
  std::vector<float> logits(static_cast<size_t>(t.trie->vocab_size()), 0.0f);
  c->mask(logits);
  EXPECT_EQ(logits[lead], 0.0f);
  EXPECT_TRUE(std::isinf(logits[tail]));
  c->accept(lead);
  EXPECT_FALSE(c->may_end());
  std::fill(logits.begin(), logits.end(), 0.0f);
  c->mask(logits);
  EXPECT_EQ(logits[tail], 0.0f);
  EXPECT_TRUE(std::isinf(logits[tail_other]));
  EXPECT_THROW(c->accept(tail_other), Error);
  c->accept(tail);
  EXPECT_FALSE(c->must_end());
  const std::vector<int32_t> bang = t.tokenizer->encode("!");
  ASSERT_EQ(bang.size(), 1u);
  std::unique_ptr<TokenConstraint> fork = c->clone();
  c->accept(bang[0]);
  EXPECT_TRUE(c->may_end());
  EXPECT_TRUE(c->must_end());
  EXPECT_FALSE(fork->may_end());  // the clone stayed where it was
}

TEST(GrammarTrieUtf8, MaskSetsExactlyTheRefusedIdsAndKeepsTheOthersBits) {
  const GrammarTrieTokenizer& t = grammar_trie_tokenizer("qwen3");
  const auto grammar = std::make_shared<const Grammar>(parse_gbnf(kTrieJsonGrammar));
  std::unique_ptr<TokenConstraint> c = make_grammar_constraint(grammar, t.trie);
  const size_t width = static_cast<size_t>(t.trie->vocab_size()) + 64;  // padding rows past the vocabulary
  std::vector<float> logits(width);
  std::mt19937_64 rng(3);
  for (float& x : logits) x = std::ldexp(static_cast<float>(rng() % 100000), -10) - 40.0f;
  const std::vector<float> original = logits;
  c->mask(logits);
  const std::vector<int32_t> allowed = t.trie->allowed_tokens(*grammar, grammar_initial_state(*grammar));
  for (size_t id = 0; id < width; ++id) {
    if (std::binary_search(allowed.begin(), allowed.end(), static_cast<int32_t>(id)))
      EXPECT_EQ(std::memcmp(&logits[id], &original[id], sizeof(float)), 0) << id;
    else
      EXPECT_EQ(logits[id], -INFINITY) << id;
  }
}

}  // namespace
}  // namespace mb
