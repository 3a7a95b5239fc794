// SPDX-License-Identifier: MIT
// The request decoder that Generator and Scheduler share: EOS, stop strings across pieces,
// max_tokens 0 and 1, a stop by the receiver, the held-back tail, the vocabulary it is given and
// the prompt-id rule; and the rule seen from outside: Generator and Scheduler, fed the same ids,
// accept and refuse alike and answer with the same tokens.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <functional>

#include "common/model_fixture.h"
#include "common/test_util.h"
#include "core/error.h"
#include "engine/generate.h"
#include "engine/request_decoder.h"
#include "engine/scheduler.h"
#include "engine/token_logprobs.h"

namespace mb {
namespace {

const ComputeContext kOneThread{1, best_isa()};

// The model's vocab_size. Its tokenizer is smaller, so ids from the tokenizer's size up to here
// are padding rows: the ids the two paths used to disagree on.
constexpr int64_t kModelVocab = 320;

// The built-in byte-level tokenizer with at most 300 ids: <|endoftext|> (0), the 256 bytes, merges.
const Tokenizer& small_tokenizer() {
  static const Tokenizer tokenizer = [] {
    const std::string path = test::make_temp_dir("decoder_tokenizer") + "/tokenizer.json";
    write_byte_level_tokenizer_json(path, 300);
    return Tokenizer::from_json_file(path);
  }();
  return tokenizer;
}

// The id of a text that the tokenizer encodes as one token.
int32_t id_of(const std::string& text) {
  const std::vector<int32_t> ids = small_tokenizer().encode(text);
  EXPECT_EQ(ids.size(), 1u) << "'" << text << "' is not one token";
  return ids.at(0);
}

// Logits whose greedy choice is `id`.
std::vector<float> choosing(int32_t id) {
  std::vector<float> logits(kModelVocab, 0.0f);
  logits[static_cast<size_t>(id)] = 1.0f;
  return logits;
}

GenerationVocabulary test_vocabulary() {
  ModelConfig config;
  config.vocab_size = kModelVocab;
  config.eos_token_ids = {0};
  return generation_vocabulary(config, &small_tokenizer());
}

DecodeSettings greedy(int max_tokens, std::vector<std::string> stops = {}) {
  DecodeSettings settings;
  settings.sampling.temperature = 0.0f;
  settings.max_tokens = max_tokens;
  settings.stop_strings = std::move(stops);
  return settings;
}

const std::vector<int32_t> kPrompt = {5, 6, 7};

TEST(RequestDecoder, AnEosIdEndsTheRequestWithoutAToken) {
  const GenerationVocabulary vocabulary = test_vocabulary();
  RequestDecoder decoder(greedy(5), kPrompt, vocabulary, &small_tokenizer());
  const DecodeEvent a = decoder.on_logits(choosing(id_of("a")));
  ASSERT_TRUE(a.token.has_value());
  EXPECT_EQ(*a.token, id_of("a"));
  EXPECT_EQ(a.text, "a");
  EXPECT_FALSE(a.done);
  const DecodeEvent eos = decoder.on_logits(choosing(0));
  EXPECT_FALSE(eos.token.has_value());
  EXPECT_EQ(eos.text, "");
  EXPECT_TRUE(eos.done);
  EXPECT_EQ(eos.stop_reason, StopReason::Eos);
  EXPECT_EQ(decoder.stop_reason(), StopReason::Eos);
  EXPECT_EQ(decoder.generated(), 1);
  // The EOS is not part of the history: a follow-up would not have consumed it.
  EXPECT_EQ(std::vector<int32_t>(decoder.history().begin(), decoder.history().end()),
            (std::vector<int32_t>{5, 6, 7, id_of("a")}));
  EXPECT_THROW(decoder.on_logits(choosing(1)), Error);

  // Without stop_at_eos the same id is an ordinary token, with its text.
  DecodeSettings ignoring = greedy(5);
  ignoring.stop_at_eos = false;
  RequestDecoder ignored(ignoring, kPrompt, vocabulary, &small_tokenizer());
  const DecodeEvent kept = ignored.on_logits(choosing(0));
  ASSERT_TRUE(kept.token.has_value());
  EXPECT_EQ(*kept.token, 0);
  EXPECT_EQ(kept.text, "<|endoftext|>");
  EXPECT_FALSE(kept.done);
}

TEST(RequestDecoder, AStopStringAcrossPiecesIsHeldBackAndNeverEmitted) {
  const GenerationVocabulary vocabulary = test_vocabulary();
  RequestDecoder decoder(greedy(10, {"bc"}), kPrompt, vocabulary, &small_tokenizer());
  EXPECT_EQ(decoder.on_logits(choosing(id_of("a"))).text, "a");
  const DecodeEvent b = decoder.on_logits(choosing(id_of("b")));
  EXPECT_EQ(b.text, "");  // could be the start of "bc"
  EXPECT_FALSE(b.done);
  const DecodeEvent c = decoder.on_logits(choosing(id_of("c")));
  ASSERT_TRUE(c.token.has_value());
  EXPECT_EQ(*c.token, id_of("c"));  // the token is generated; only its text is dropped
  EXPECT_EQ(c.text, "");
  EXPECT_TRUE(c.done);
  EXPECT_EQ(c.stop_reason, StopReason::StopString);
  EXPECT_EQ(decoder.generated(), 3);
  EXPECT_EQ(decoder.finish(), "");

  // A held-back "b" that turns out not to start the stop string comes out with the next piece.
  RequestDecoder released(greedy(10, {"bc"}), kPrompt, vocabulary, &small_tokenizer());
  released.on_logits(choosing(id_of("a")));
  EXPECT_EQ(released.on_logits(choosing(id_of("b"))).text, "");
  const DecodeEvent d = released.on_logits(choosing(id_of("d")));
  EXPECT_EQ(d.text, "bd");
  EXPECT_FALSE(d.done);
}

TEST(RequestDecoder, MaxTokensZeroEndsBeforeSamplingAndOneAfterTheFirstToken) {
  const GenerationVocabulary vocabulary = test_vocabulary();
  DecodeSettings zero = greedy(0);
  zero.sampling = SamplingParams{};  // seeded sampling: a draw would show in last_distribution
  RequestDecoder none(zero, kPrompt, vocabulary, &small_tokenizer());
  EXPECT_FALSE(none.done());  // the prompt still has to be consumed
  const DecodeEvent ended = none.on_logits(choosing(id_of("a")));
  EXPECT_FALSE(ended.token.has_value());
  EXPECT_TRUE(ended.done);
  EXPECT_EQ(ended.stop_reason, StopReason::MaxTokens);
  EXPECT_TRUE(none.sampler().last_distribution().empty());
  EXPECT_EQ(none.history().size(), kPrompt.size());
  EXPECT_EQ(none.generated(), 0);
  EXPECT_EQ(none.finish(), "");

  RequestDecoder one(greedy(1), kPrompt, vocabulary, &small_tokenizer());
  const DecodeEvent first = one.on_logits(choosing(id_of("a")));
  ASSERT_TRUE(first.token.has_value());
  EXPECT_EQ(*first.token, id_of("a"));
  EXPECT_EQ(first.text, "a");
  EXPECT_TRUE(first.done);
  EXPECT_EQ(first.stop_reason, StopReason::MaxTokens);
  EXPECT_EQ(one.generated(), 1);
}

TEST(RequestDecoder, CancelEndsByCallbackEvenOnTheEventThatEndedTheRequest) {
  const GenerationVocabulary vocabulary = test_vocabulary();
  RequestDecoder decoder(greedy(10), kPrompt, vocabulary, &small_tokenizer());
  EXPECT_FALSE(decoder.on_logits(choosing(id_of("a"))).done);
  decoder.cancel();
  EXPECT_TRUE(decoder.done());
  EXPECT_EQ(decoder.stop_reason(), StopReason::Callback);
  EXPECT_THROW(decoder.on_logits(choosing(id_of("b"))), Error);

  // The receiver refused the event that completed the stop string, so it never learned of it.
  RequestDecoder stopped(greedy(10, {"a"}), kPrompt, vocabulary, &small_tokenizer());
  EXPECT_EQ(stopped.on_logits(choosing(id_of("a"))).stop_reason, StopReason::StopString);
  stopped.cancel();
  EXPECT_EQ(stopped.stop_reason(), StopReason::Callback);
}

TEST(RequestDecoder, FinishReleasesTheHeldBackTail) {
  const GenerationVocabulary vocabulary = test_vocabulary();
  // The start of a stop string that never completes: max_tokens ends first.
  RequestDecoder partial(greedy(3, {"bcx"}), kPrompt, vocabulary, &small_tokenizer());
  EXPECT_EQ(partial.on_logits(choosing(id_of("a"))).text, "a");
  EXPECT_EQ(partial.on_logits(choosing(id_of("b"))).text, "");
  const DecodeEvent last = partial.on_logits(choosing(id_of("c")));
  EXPECT_EQ(last.text, "");
  EXPECT_EQ(last.stop_reason, StopReason::MaxTokens);
  EXPECT_EQ(partial.finish(), "bc");

  // The first byte of a two-byte character: finish() turns it into U+FFFD, as decode() does.
  const std::vector<int32_t> e_acute = small_tokenizer().encode("\xC3\xA9");
  ASSERT_EQ(e_acute.size(), 2u);
  RequestDecoder split(greedy(1), kPrompt, vocabulary, &small_tokenizer());
  const DecodeEvent lead = split.on_logits(choosing(e_acute[0]));
  EXPECT_EQ(lead.text, "");
  EXPECT_TRUE(lead.done);
  EXPECT_EQ(split.finish(), "\xEF\xBF\xBD");

  // Without a tokenizer there is no text at all.
  RequestDecoder ids_only(greedy(1), kPrompt, vocabulary, nullptr);
  EXPECT_EQ(ids_only.on_logits(choosing(id_of("a"))).text, "");
  EXPECT_EQ(ids_only.finish(), "");
}

TEST(RequestDecoder, LogprobsComeFromTheSamplerOfTheTokenJustReturned) {
  const GenerationVocabulary vocabulary = test_vocabulary();
  DecodeSettings seeded;
  seeded.sampling.temperature = 1.0f;
  seeded.sampling.top_k = 0;
  seeded.sampling.min_p = 0.0f;
  seeded.sampling.seed = 11;
  seeded.max_tokens = 4;
  seeded.stop_at_eos = false;
  RequestDecoder decoder(seeded, kPrompt, vocabulary, nullptr);
  Sampler alone(seeded.sampling, vocabulary.n_valid);
  std::vector<int32_t> history = kPrompt;
  std::vector<float> logits(kModelVocab);
  for (int step = 0; step < 4; ++step) {
    for (size_t v = 0; v < logits.size(); ++v)
      logits[v] = static_cast<float>((v * 7 + step * 3) % 11) * 0.25f;
    const DecodeEvent event = decoder.on_logits(logits);
    const int32_t expected = alone.sample(logits, history);
    history.push_back(expected);
    ASSERT_TRUE(event.token.has_value());
    EXPECT_EQ(*event.token, expected) << step;
    const TokenLogprobs got = token_logprobs(decoder.sampler(), logits, expected, 3, true);
    const TokenLogprobs want = token_logprobs(alone, logits, expected, 3, true);
    EXPECT_EQ(std::memcmp(&got.logprob, &want.logprob, sizeof(float)), 0) << step;
    ASSERT_EQ(got.top.size(), 3u);
    for (size_t i = 0; i < got.top.size(); ++i) EXPECT_EQ(got.top[i].token, want.top[i].token);
  }
  EXPECT_TRUE(decoder.done());
}

TEST(GenerationVocabulary, JoinsTheEosIdsAndTakesTheSmallerVocabulary) {
  const int32_t n_tokenizer = small_tokenizer().vocab_size();
  ASSERT_LT(n_tokenizer, kModelVocab);
  ModelConfig config;
  config.vocab_size = kModelVocab;
  config.eos_token_ids = {5, 0};
  const GenerationVocabulary both = generation_vocabulary(config, &small_tokenizer());
  EXPECT_EQ(both.eos_ids, (std::vector<int32_t>{5, 0}));  // the tokenizer's 0 is not repeated
  EXPECT_EQ(both.n_valid, n_tokenizer);
  EXPECT_EQ(both.n_model, kModelVocab);
  config.eos_token_ids = {5};
  EXPECT_EQ(generation_vocabulary(config, &small_tokenizer()).eos_ids, (std::vector<int32_t>{5, 0}));
  const GenerationVocabulary model_only = generation_vocabulary(config, nullptr);
  EXPECT_EQ(model_only.eos_ids, (std::vector<int32_t>{5}));
  EXPECT_EQ(model_only.n_valid, kModelVocab);
}

std::string error_of(const std::function<void()>& call) {
  try {
    call();
  } catch (const Error& e) {
    return e.what();
  }
  return "(accepted)";
}

TEST(PromptIdRule, MessagesNameTheIdItsPositionAndTheRange) {
  const GenerationVocabulary v = test_vocabulary();
  const std::string n = std::to_string(v.n_valid);
  const std::string last_padding = std::to_string(kModelVocab - 1);
  EXPECT_EQ(error_of([&] {
              check_token_ids(std::vector<int32_t>{1, v.n_valid - 1}, v, "prompt");
            }),
            "(accepted)");
  EXPECT_EQ(error_of([&] {
              check_token_ids(std::vector<int32_t>{1, 2, v.n_valid}, v, "prompt");
            }),
            "prompt token " + n + " at position 2 is outside the vocabulary [0, " + n + "): ids " + n +
                " to " + last_padding +
                " are padding rows of the model's embedding, with no token in the tokenizer");
  EXPECT_EQ(error_of([&] { check_token_ids(std::vector<int32_t>{320}, v, "prefix"); }),
            "prefix token 320 at position 0 is outside the vocabulary [0, " + n + ")");
  EXPECT_EQ(error_of([&] {
              check_token_ids(std::vector<int32_t>{4, -1}, v, "prompt");
            }),
            "prompt token -1 at position 1 is outside the vocabulary [0, " + n + ")");

  const DecodeSettings ok = greedy(4);
  EXPECT_EQ(error_of([&] { validate_request({}, ok, v, &small_tokenizer()); }),
            "the prompt is empty (a request needs at least one token)");
  EXPECT_EQ(error_of([&] { validate_request(kPrompt, greedy(-1), v, &small_tokenizer()); }),
            "max_tokens must be >= 0, got -1");
  EXPECT_NE(
      error_of([&] { validate_request(kPrompt, greedy(4, {""}), v, &small_tokenizer()); }).find("empty"),
      std::string::npos);
  EXPECT_EQ(error_of([&] { validate_request(kPrompt, greedy(4, {"x"}), v, nullptr); }),
            "stop strings need a tokenizer (the model folder has no tokenizer.json)");
  EXPECT_EQ(error_of([&] { validate_request(kPrompt, greedy(4, {"x"}), v, &small_tokenizer()); }),
            "(accepted)");
}

// A random model of kModelVocab ids with small_tokenizer(): ids from the tokenizer's size up to
// kModelVocab are rows of the model with no token.
struct PaddedModel {
  std::unique_ptr<Model> model;
  std::unique_ptr<Tokenizer> tokenizer;
};

const PaddedModel& padded_model() {
  static const PaddedModel m = [] {
    MakeModelOptions o;
    o.config = test::small_config(32, 2, kModelVocab);
    o.seed = 23;
    o.write_tokenizer = false;
    const std::string dir = test::make_temp_dir("padded_model");
    make_model(dir, o);
    write_byte_level_tokenizer_json((std::filesystem::path(dir) / "tokenizer.json").string(), 300);
    return PaddedModel{Model::load(dir), std::make_unique<Tokenizer>(Tokenizer::from_model_dir(dir))};
  }();
  return m;
}

// What one path answered for a request: its tokens and stop reason, or its error message.
struct RuleAnswer {
  std::string error;
  std::vector<int32_t> tokens;
  StopReason reason = StopReason::MaxTokens;
};

RuleAnswer through_generator(const PaddedModel& m, const ServeRequest& r) {
  Generator generator(*m.model, m.tokenizer.get(), kOneThread);
  SequenceState state = m.model->new_state();
  RuleAnswer answer;
  try {
    const GenerateResult result =
        generator.generate({r.prompt, r.max_tokens, r.sampling, r.stop, r.stop_at_eos}, state);
    answer.tokens = result.tokens;
    answer.reason = result.stop_reason;
  } catch (const Error& e) {
    answer.error = e.what();
  }
  return answer;
}

RuleAnswer through_scheduler(const PaddedModel& m, const ServeRequest& r) {
  RuleAnswer answer;
  bool ended = false;
  Scheduler scheduler(*m.model, m.tokenizer.get(), kOneThread, {});  // after what its sink writes to
  try {
    scheduler.submit(r, [&](const ServeEvent& e) {
      if (e.kind == ServeEvent::Kind::Token) answer.tokens.push_back(e.token);
      if (e.kind == ServeEvent::Kind::Done) answer.reason = e.stop_reason;
      if (e.kind == ServeEvent::Kind::Error) answer.error = "error event: " + e.error;
      ended = ended || e.kind != ServeEvent::Kind::Token;
      return true;
    });
  } catch (const Error& e) {
    answer.error = e.what();
    return answer;
  }
  for (int i = 0; i < 1000 && scheduler.step(); ++i) {
  }
  EXPECT_TRUE(ended) << "the request did not end";
  return answer;
}

TEST(PromptIdRule, GeneratorAndSchedulerAcceptAndRefuseTheSameIds) {
  const PaddedModel& m = padded_model();
  const int32_t n_valid = m.tokenizer->vocab_size();
  ASSERT_LT(n_valid, kModelVocab);
  const std::string range = "[0, " + std::to_string(n_valid) + ")";
  struct Case {
    std::vector<int32_t> prompt;
    std::string error;  // "" = accepted
  };
  const std::vector<Case> cases = {
      {{5, 6, 7}, ""},
      {{5, 6, n_valid - 1}, ""},  // the last id the tokenizer has
      // The first padding row: Generator used to take it, the scheduler to refuse it.
      {{5, 6, n_valid},
       "prompt token " + std::to_string(n_valid) + " at position 2 is outside the vocabulary " + range},
      {{kModelVocab - 1, 5}, "prompt token " + std::to_string(kModelVocab - 1) + " at position 0"},
      {{5, kModelVocab}, "prompt token " + std::to_string(kModelVocab) + " at position 1"},
      {{-1}, "prompt token -1 at position 0"},
  };
  for (const float temperature : {0.0f, 0.9f}) {
    for (const Case& c : cases) {
      ServeRequest r;
      r.prompt = c.prompt;
      r.max_tokens = 12;
      r.sampling.temperature = temperature;
      r.sampling.repeat_penalty = 1.3f;  // reads the prompt, padding ids included
      r.sampling.seed = 4;
      const RuleAnswer generated = through_generator(m, r);
      const RuleAnswer served = through_scheduler(m, r);
      const std::string what =
          "prompt " + ::testing::PrintToString(c.prompt) + " at temperature " + std::to_string(temperature);
      EXPECT_EQ(generated.error, served.error) << what;
      if (c.error.empty()) {
        EXPECT_EQ(generated.error, "") << what;
        EXPECT_FALSE(generated.tokens.empty()) << what;
        EXPECT_EQ(generated.tokens, served.tokens) << what;
        EXPECT_EQ(generated.reason, served.reason) << what;
      } else {
        EXPECT_EQ(generated.error.rfind(c.error, 0), 0u) << what << ": " << generated.error;
      }
    }
  }
}

}  // namespace
}  // namespace mb
