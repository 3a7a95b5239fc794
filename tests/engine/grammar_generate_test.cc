// SPDX-License-Identifier: MIT
// Grammar-constrained decoding end to end: RequestDecoder's handling of the mask and of EOS,
// seeded generations on a make-model checkpoint whose every output matches its grammar (through
// Generator and Scheduler), and the exactness contract: the logits a constrained request is
// given are the unconstrained run's, bit for bit, on every id the grammar allows.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "common/model_fixture.h"
#include "common/test_util.h"
#include "core/error.h"
#include "engine/generate.h"
#include "engine/grammar/gbnf.h"
#include "engine/grammar/grammar_constraint.h"
#include "engine/grammar/grammar_matcher.h"
#include "engine/request_decoder.h"
#include "engine/scheduler.h"

namespace mb {
namespace {

struct GrammarModel {
  std::unique_ptr<Model> model;
  std::unique_ptr<Tokenizer> tokenizer;
  std::shared_ptr<const TokenTrie> trie;
};

const GrammarModel& grammar_model() {
  static const GrammarModel m = [] {
    MakeModelOptions o;
    o.config = test::small_config(32, 2, 300);
    o.seed = 11;
    const std::string dir = test::make_temp_dir("grammar_model");
    make_model(dir, o);  // with its byte-level tokenizer: <|endoftext|> at 0, the bytes, merges
    GrammarModel g;
    g.model = Model::load(dir);
    g.tokenizer = std::make_unique<Tokenizer>(Tokenizer::from_model_dir(dir));
    g.trie = std::make_shared<TokenTrie>(*g.tokenizer);
    return g;
  }();
  return m;
}

std::shared_ptr<TokenConstraint> grammar_constraint_for(const std::string& gbnf) {
  return make_grammar_constraint(std::make_shared<const Grammar>(parse_gbnf(gbnf)), grammar_model().trie);
}

bool grammar_complete(const std::string& gbnf, const std::string& text) {
  const Grammar g = parse_gbnf(gbnf);
  GrammarState s = grammar_initial_state(g);
  return grammar_advance_bytes(g, s, text) && grammar_may_end(s);
}

GenerateRequest grammar_sampled_request(const std::string& prompt, uint64_t seed, int max_tokens,
                                        std::shared_ptr<TokenConstraint> constraint) {
  GenerateRequest r;
  r.prompt = grammar_model().tokenizer->encode(prompt);
  r.max_new_tokens = max_tokens;
  r.sampling.temperature = 1.0f;
  r.sampling.top_k = 0;
  r.sampling.top_p = 1.0f;
  r.sampling.min_p = 0.0f;
  r.sampling.seed = seed;
  r.constraint = std::move(constraint);
  return r;
}

const char* const kYesNo = R"(root ::= "yes" | "no")";
const char* const kSmallJson = R"(root ::= "{" pair ("," pair){0,2} "}"
pair ::= "\"" [a-z]{1,6} "\":" value
value ::= "-"? ([0-9] | [1-9] [0-9]{1,3}) | "true" | "false" | "null" | "\"" [a-zA-Z ]{0,8} "\"")";

TEST(GrammarGenerate, EverySeededAnswerIsYesOrNo) {
  const GrammarModel& m = grammar_model();
  Generator generator(*m.model, m.tokenizer.get(), ComputeContext{1, best_isa()});
  const auto constraint = grammar_constraint_for(kYesNo);
  for (uint64_t seed = 0; seed < 16; ++seed) {
    SequenceState state = m.model->new_state();
    const GenerateResult r =
        generator.generate(grammar_sampled_request("Is it?", seed, 10, constraint), state);
    EXPECT_TRUE(r.text == "yes" || r.text == "no") << "seed " << seed << ": '" << r.text << "'";
    EXPECT_EQ(r.stop_reason, StopReason::Eos);  // the grammar ends the request, not max_tokens
  }
}

TEST(GrammarGenerate, EverySeededJsonAnswerParsesAndMatches) {
  const GrammarModel& m = grammar_model();
  Generator generator(*m.model, m.tokenizer.get(), ComputeContext{1, best_isa()});
  const auto constraint = grammar_constraint_for(kSmallJson);
  for (uint64_t seed = 0; seed < 12; ++seed) {
    SequenceState state = m.model->new_state();
    const GenerateResult r =
        generator.generate(grammar_sampled_request("JSON:", seed, 80, constraint), state);
    ASSERT_EQ(r.stop_reason, StopReason::Eos) << "seed " << seed << ": '" << r.text << "'";
    EXPECT_TRUE(grammar_complete(kSmallJson, r.text)) << r.text;
    EXPECT_TRUE(nlohmann::json::accept(r.text)) << r.text;
  }
}

TEST(GrammarGenerate, TheSchedulerConstrainsAsGeneratorDoes) {
  const GrammarModel& m = grammar_model();
  Generator generator(*m.model, m.tokenizer.get(), ComputeContext{1, best_isa()});
  Scheduler scheduler(*m.model, m.tokenizer.get(), ComputeContext{1, best_isa()}, {});
  const auto constraint = grammar_constraint_for(kSmallJson);
  std::vector<std::vector<int32_t>> served(4);
  std::vector<StopReason> reasons(4, StopReason::MaxTokens);
  for (uint64_t seed = 0; seed < 4; ++seed) {
    const GenerateRequest g = grammar_sampled_request("JSON:", seed, 80, constraint);
    ServeRequest s;
    s.prompt = g.prompt;
    s.max_tokens = g.max_new_tokens;
    s.sampling = g.sampling;
    s.constraint = constraint;  // one compiled constraint shared by every request
    scheduler.submit(s, [&, seed](const ServeEvent& e) {
      if (e.kind == ServeEvent::Kind::Token) served[seed].push_back(e.token);
      if (e.kind == ServeEvent::Kind::Done) reasons[seed] = e.stop_reason;
      EXPECT_NE(e.kind, ServeEvent::Kind::Error) << e.error;
      return true;
    });
  }
  for (int i = 0; i < 2000 && scheduler.step(); ++i) {
  }
  for (uint64_t seed = 0; seed < 4; ++seed) {
    SequenceState state = m.model->new_state();
    const GenerateResult alone =
        generator.generate(grammar_sampled_request("JSON:", seed, 80, constraint), state);
    EXPECT_EQ(served[seed], alone.tokens) << "seed " << seed;
    EXPECT_EQ(reasons[seed], StopReason::Eos);
  }
}

TEST(GrammarGenerate, EveryChoiceOfARequestFollowsTheGrammarFromItsStart) {
  // n > 1 forks the request after its prefill: each choice decodes with its own clone of the
  // constraint, so one choice's tokens never advance another's grammar.
  const GrammarModel& m = grammar_model();
  Scheduler scheduler(*m.model, m.tokenizer.get(), ComputeContext{1, best_isa()}, {});
  const GenerateRequest g = grammar_sampled_request("JSON:", 5, 80, nullptr);
  ServeRequest s;
  s.prompt = g.prompt;
  s.max_tokens = g.max_new_tokens;
  s.sampling = g.sampling;
  s.n = 3;
  s.constraint = grammar_constraint_for(kSmallJson);
  std::vector<std::string> texts(3);
  std::vector<StopReason> reasons(3, StopReason::MaxTokens);
  scheduler.submit(s, [&](const ServeEvent& e) {
    if (e.kind == ServeEvent::Kind::Token) texts.at(static_cast<size_t>(e.choice)) += e.text;
    if (e.kind == ServeEvent::Kind::Done) {
      texts.at(static_cast<size_t>(e.choice)) += e.text;  // the held-back tail
      reasons.at(static_cast<size_t>(e.choice)) = e.stop_reason;
    }
    EXPECT_NE(e.kind, ServeEvent::Kind::Error) << e.error;
    return true;
  });
  for (int i = 0; i < 2000 && scheduler.step(); ++i) {
  }
  for (size_t c = 0; c < texts.size(); ++c) {
    EXPECT_EQ(reasons[c], StopReason::Eos) << c;
    EXPECT_TRUE(grammar_complete(kSmallJson, texts[c])) << c << ": " << texts[c];
  }
}

// Records the row each mask() call is given and what it leaves, then masks as `inner` does.
// Clones share the log, since the decoder works on its own clone.
struct GrammarMaskLog {
  std::vector<std::vector<float>> before, after;
};

class RecordingGrammarConstraint final : public TokenConstraint {
 public:
  RecordingGrammarConstraint(std::unique_ptr<TokenConstraint> inner, std::shared_ptr<GrammarMaskLog> log)
      : inner_(std::move(inner)), log_(std::move(log)) {}
  void mask(std::span<float> logits) override {
    log_->before.emplace_back(logits.begin(), logits.end());
    inner_->mask(logits);
    log_->after.emplace_back(logits.begin(), logits.end());
  }
  void accept(int32_t token) override { inner_->accept(token); }
  bool may_end() const override { return inner_->may_end(); }
  bool must_end() const override { return inner_->must_end(); }
  std::unique_ptr<TokenConstraint> clone() const override {
    return std::make_unique<RecordingGrammarConstraint>(inner_->clone(), log_);
  }

 private:
  std::unique_ptr<TokenConstraint> inner_;
  std::shared_ptr<GrammarMaskLog> log_;
};

TEST(GrammarGenerate, AllowedLogitsEqualTheUnconstrainedRunBitForBit) {
  const GrammarModel& m = grammar_model();
  const auto log = std::make_shared<GrammarMaskLog>();
  const auto constraint = std::make_shared<RecordingGrammarConstraint>(
      make_grammar_constraint(std::make_shared<const Grammar>(parse_gbnf(kSmallJson)), m.trie), log);
  const ComputeContext ctx{1, best_isa()};
  Scheduler scheduler(*m.model, m.tokenizer.get(), ctx, {});
  ServeRequest s;
  const GenerateRequest g = grammar_sampled_request("A longer prompt for the prefill:", 3, 40, nullptr);
  s.prompt = g.prompt;
  s.max_tokens = g.max_new_tokens;
  s.sampling = g.sampling;
  s.constraint = constraint;
  std::vector<int32_t> generated;
  scheduler.submit(s, [&](const ServeEvent& e) {
    if (e.kind == ServeEvent::Kind::Token) generated.push_back(e.token);
    return true;
  });
  for (int i = 0; i < 2000 && scheduler.step(); ++i) {
  }
  ASSERT_FALSE(generated.empty());
  ASSERT_EQ(log->before.size(), generated.size());  // one mask per sampled token (EOS ends it)
  // The same ids fed one decode step at a time, unconstrained.
  std::vector<int32_t> all = s.prompt;
  all.insert(all.end(), generated.begin(), generated.end());
  SequenceState state = m.model->new_state();
  const std::vector<float> rows = test::step_logits(*m.model, ctx, all, state);
  const size_t vocab = static_cast<size_t>(m.model->config().vocab_size);
  for (size_t step = 0; step < generated.size(); ++step) {
    const float* unconstrained = rows.data() + (s.prompt.size() - 1 + step) * vocab;
    ASSERT_EQ(log->before[step].size(), vocab);
    EXPECT_EQ(std::memcmp(log->before[step].data(), unconstrained, vocab * sizeof(float)), 0)
        << "step " << step;
    size_t allowed = 0;
    for (size_t id = 0; id < vocab; ++id) {
      const float x = log->after[step][id];
      if (std::isinf(x) && x < 0) continue;
      ++allowed;
      EXPECT_EQ(std::memcmp(&x, &unconstrained[id], sizeof(float)), 0) << "step " << step << " id " << id;
    }
    EXPECT_GT(allowed, 0u);
  }
}

// ---- RequestDecoder with a constraint, on made-up rows. ----

GenerationVocabulary grammar_vocabulary() {
  return generation_vocabulary(grammar_model().model->config(), grammar_model().tokenizer.get());
}

int32_t grammar_token(const std::string& text) {
  const std::vector<int32_t> ids = grammar_model().tokenizer->encode(text);
  EXPECT_EQ(ids.size(), 1u) << text;
  return ids.at(0);
}

TEST(GrammarDecoder, EosIsMaskedUntilTheGrammarMayEndThenKeepsItsLogit) {
  DecodeSettings settings;
  settings.sampling.temperature = 0;
  settings.max_tokens = 10;
  settings.constraint = grammar_constraint_for(R"(root ::= "a" "b"?)");
  const GenerationVocabulary vocabulary = grammar_vocabulary();
  const std::vector<int32_t> prompt{grammar_token("a")};
  RequestDecoder decoder(settings, prompt, vocabulary, grammar_model().tokenizer.get());
  const size_t width = static_cast<size_t>(vocabulary.n_model);
  std::vector<float> row(width, 0.0f);
  row[0] = 9.0f;  // EOS (<|endoftext|>) leads, but nothing is complete yet
  row[static_cast<size_t>(grammar_token("a"))] = 1.0f;
  DecodeEvent e = decoder.on_logits(row);
  ASSERT_TRUE(e.token.has_value());
  EXPECT_EQ(*e.token, grammar_token("a"));
  EXPECT_FALSE(e.done);
  e = decoder.on_logits(row);  // "a" is complete now: EOS, the argmax, may be sampled
  EXPECT_FALSE(e.token.has_value());
  EXPECT_TRUE(e.done);
  EXPECT_EQ(e.stop_reason, StopReason::Eos);
}

TEST(GrammarDecoder, MustEndEndsTheRequestWithTheLastToken) {
  DecodeSettings settings;
  settings.sampling.temperature = 0;
  settings.max_tokens = 10;
  settings.constraint = grammar_constraint_for(R"(root ::= "a")");
  const GenerationVocabulary vocabulary = grammar_vocabulary();
  const std::vector<int32_t> prompt{grammar_token("a")};
  RequestDecoder decoder(settings, prompt, vocabulary, grammar_model().tokenizer.get());
  const std::vector<float> row(static_cast<size_t>(vocabulary.n_model), 0.0f);  // ties: the mask decides
  const DecodeEvent e = decoder.on_logits(row);
  ASSERT_TRUE(e.token.has_value());
  EXPECT_EQ(e.text, "a");
  EXPECT_TRUE(e.done);
  EXPECT_EQ(e.stop_reason, StopReason::Eos);
  // An empty-only grammar ends before sampling anything.
  settings.constraint = grammar_constraint_for(R"(root ::= "")");
  RequestDecoder empty(settings, prompt, vocabulary, grammar_model().tokenizer.get());
  const DecodeEvent none = empty.on_logits(row);
  EXPECT_FALSE(none.token.has_value());
  EXPECT_EQ(none.stop_reason, StopReason::Eos);
}

TEST(GrammarDecoder, ACopiedDecoderHasItsOwnConstraintPosition) {
  DecodeSettings settings;
  settings.sampling.temperature = 0;
  settings.max_tokens = 10;
  settings.constraint = grammar_constraint_for(R"(root ::= "ab" | "b")");
  const GenerationVocabulary vocabulary = grammar_vocabulary();
  const std::vector<int32_t> prompt{grammar_token("a")};
  RequestDecoder decoder(settings, prompt, vocabulary, grammar_model().tokenizer.get());
  std::vector<float> row(static_cast<size_t>(vocabulary.n_model), 0.0f);
  row[static_cast<size_t>(grammar_token("a"))] = 2.0f;
  row[static_cast<size_t>(grammar_token("b"))] = 1.0f;
  const RequestDecoder fork = decoder;
  EXPECT_EQ(decoder.on_logits(row).token, grammar_token("a"));
  RequestDecoder fork_copy = fork;  // still at the start: "a" is allowed again
  EXPECT_EQ(fork_copy.on_logits(row).token, grammar_token("a"));
  EXPECT_EQ(decoder.on_logits(row).token, grammar_token("b"));  // after "a", only "b"
}

TEST(GrammarDecoder, AGrammarThatAllowsNoTokenIsAnError) {
  DecodeSettings settings;
  settings.sampling.temperature = 0;
  settings.max_tokens = 10;
  // A character no token of this tokenizer can produce... every byte is a token, so make the
  // row the problem instead: only "z" is allowed, and its logit is -inf.
  settings.constraint = grammar_constraint_for(R"(root ::= "z")");
  const GenerationVocabulary vocabulary = grammar_vocabulary();
  const std::vector<int32_t> prompt{grammar_token("a")};
  RequestDecoder decoder(settings, prompt, vocabulary, grammar_model().tokenizer.get());
  std::vector<float> row(static_cast<size_t>(vocabulary.n_model), 0.0f);
  row[static_cast<size_t>(grammar_token("z"))] = -INFINITY;
  try {
    decoder.on_logits(row);
    ADD_FAILURE() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("allows no token"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace mb
