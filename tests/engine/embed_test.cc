// SPDX-License-Identifier: MIT
// Embeddings (engine/embed.h): bit-identical to each input alone whatever the batch, the grouping
// and the chunk size; mean and last pooling against a double-precision reference over the final
// hidden states; unit L2 norm; refusals before any work; and Scheduler::embed between generation
// steps, which changes neither the embeddings nor the generated tokens.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <future>
#include <thread>

#include "common/hybrid_configs.h"
#include "common/mamba2_reference.h"
#include "common/model_fixture.h"
#include "common/test_util.h"
#include "core/error.h"
#include "engine/embed.h"
#include "engine/generate.h"
#include "engine/scheduler.h"

namespace mb {
namespace embed_test {

const ComputeContext kEmbedCtx{1, best_isa()};

// A Mamba-2 model and a Granite hybrid (attention with a growing KV cache), loaded once.
const Model& embed_model(bool hybrid) {
  static std::unique_ptr<Model> models[2];
  std::unique_ptr<Model>& model = models[hybrid ? 1 : 0];
  if (!model) {
    MakeModelOptions o;
    o.config = hybrid ? test::granite_config("M*M", 48, 96) : test::mamba2_config(48, 16, 16, 2, 96);
    o.seed = hybrid ? 44 : 45;
    model = Model::load(test::write_model(o, "embed_model"));
  }
  return *model;
}

// Inputs of awkward lengths: 1, a chunk's multiple, past several chunks.
std::vector<std::vector<int32_t>> embed_inputs(int64_t vocab) {
  std::vector<std::vector<int32_t>> inputs;
  uint64_t seed = 3;
  for (size_t length : {5, 1, 37, 16, 70, 2, 9}) inputs.push_back(test::random_tokens(length, vocab, seed++));
  return inputs;
}

bool same_vector_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// The final-norm rows of every position, from a forward pass of its own.
std::vector<float> hidden_rows(const Model& model, const std::vector<int32_t>& tokens) {
  Workspace ws;
  SequenceState state = model.new_state();
  const SequenceInput input{&state, tokens, {}};
  std::vector<std::vector<float>> out;
  model.forward(kEmbedCtx, std::span(&input, 1), {OutputKind::HiddenAll, 0}, ws, out);
  return out[0];
}

// Pools in double and normalises in double: the reference the float results are held to.
std::vector<double> reference_embedding(const std::vector<float>& rows, int64_t d, Pooling pooling) {
  const int64_t t = static_cast<int64_t>(rows.size()) / d;
  std::vector<double> v(d, 0.0);
  if (pooling == Pooling::Last) {
    for (int64_t k = 0; k < d; ++k) v[k] = rows[(t - 1) * d + k];
  } else {
    for (int64_t r = 0; r < t; ++r)
      for (int64_t k = 0; k < d; ++k) v[k] += rows[r * d + k];
    for (double& x : v) x /= static_cast<double>(t);
  }
  double squares = 0;
  for (double x : v) squares += x * x;
  for (double& x : v) x /= std::sqrt(squares);
  return v;
}

TEST(Embed, BatchEqualsEachAloneWhateverTheChunkAndGrouping) {
  for (bool hybrid : {false, true}) {
    const Model& model = embed_model(hybrid);
    const auto inputs = embed_inputs(model.config().vocab_size);
    for (Pooling pooling : {Pooling::Mean, Pooling::Last}) {
      Workspace solo_ws;
      std::vector<std::vector<float>> solo;
      for (const auto& input : inputs) {
        EmbedOptions one;
        one.pooling = pooling;
        one.chunk = 1 << 20;
        one.round_rows = 1 << 20;
        solo.push_back(embed_batch(model, kEmbedCtx, std::span(&input, 1), one, solo_ws)[0]);
      }
      // Chunks of 1 position, 7 (no input a multiple), 16; rounds from one chunk (one sequence
      // per group) to everything in one forward call.
      for (const auto& [chunk, round_rows] :
           std::vector<std::pair<int64_t, int64_t>>{{1, 1}, {1, 3}, {7, 7}, {7, 20}, {16, 40}, {512, 4096}}) {
        EmbedOptions o;
        o.pooling = pooling;
        o.chunk = chunk;
        o.round_rows = round_rows;
        Workspace ws;
        const auto batch = embed_batch(model, kEmbedCtx, inputs, o, ws);
        ASSERT_EQ(batch.size(), inputs.size());
        for (size_t i = 0; i < inputs.size(); ++i)
          EXPECT_TRUE(same_vector_bits(batch[i], solo[i]))
              << "hybrid " << hybrid << " pooling " << pooling_name(pooling) << " chunk " << chunk
              << " round " << round_rows << " input " << i;
      }
    }
  }
}

TEST(Embed, PoolingMatchesADoubleReferenceWithUnitNorm) {
  for (bool hybrid : {false, true}) {
    const Model& model = embed_model(hybrid);
    const int64_t d = model.config().d_model;
    const auto inputs = embed_inputs(model.config().vocab_size);
    for (Pooling pooling : {Pooling::Mean, Pooling::Last}) {
      EmbedOptions o;
      o.pooling = pooling;
      Workspace ws;
      const auto got = embed_batch(model, kEmbedCtx, inputs, o, ws);
      for (size_t i = 0; i < inputs.size(); ++i) {
        ASSERT_EQ(static_cast<int64_t>(got[i].size()), d);
        const auto want = reference_embedding(hidden_rows(model, inputs[i]), d, pooling);
        double squares = 0;
        for (int64_t k = 0; k < d; ++k) {
          EXPECT_NEAR(got[i][k], want[k], 2e-7) << "input " << i << " value " << k;
          squares += static_cast<double>(got[i][k]) * got[i][k];
        }
        EXPECT_NEAR(squares, 1.0, 1e-6);
      }
    }
  }
}

TEST(Embed, LastPoolingIsTheLastHiddenRowNormalised) {
  const Model& model = embed_model(false);
  const int64_t d = model.config().d_model;
  const auto inputs = embed_inputs(model.config().vocab_size);
  EmbedOptions o;
  o.pooling = Pooling::Last;
  o.normalize = false;
  Workspace ws;
  const auto got = embed_batch(model, kEmbedCtx, inputs, o, ws);
  for (size_t i = 0; i < inputs.size(); ++i) {
    const auto rows = hidden_rows(model, inputs[i]);
    const std::vector<float> last(rows.end() - d, rows.end());
    EXPECT_TRUE(same_vector_bits(got[i], last)) << "input " << i;
  }
}

TEST(Embed, NormalizeRoundsOnceAndKeepsZero) {
  std::vector<float> v{3.0f, 4.0f};
  l2_normalize(v);
  EXPECT_EQ(v[0], 0.6f);
  EXPECT_EQ(v[1], 0.8f);
  std::vector<float> zero{0.0f, 0.0f};
  l2_normalize(zero);
  EXPECT_EQ(zero, (std::vector<float>{0.0f, 0.0f}));
}

TEST(Embed, GroupsBoundTheRowsOfARound) {
  const std::vector<std::vector<int32_t>> inputs{std::vector<int32_t>(10), std::vector<int32_t>(3),
                                                 std::vector<int32_t>(100), std::vector<int32_t>(1)};
  EmbedOptions o;
  o.chunk = 8;
  o.round_rows = 11;
  // Rows per round: min(length, 8) = 8, 3, 8, 1 -> {8, 3}, {8, 1}.
  EXPECT_EQ(embed_groups(inputs, o), (std::vector<size_t>{2, 4}));
  o.round_rows = 8;
  EXPECT_EQ(embed_groups(inputs, o), (std::vector<size_t>{1, 2, 3, 4}));
  EXPECT_TRUE(embed_groups({}, o).empty());
}

TEST(Embed, RefusesBadInputsBeforeAnyWork) {
  const Model& model = embed_model(false);
  Workspace ws;
  const int32_t vocab = static_cast<int32_t>(model.config().vocab_size);
  const auto refuses = [&](const std::vector<std::vector<int32_t>>& inputs, const EmbedOptions& o,
                           const std::string& words) {
    try {
      embed_batch(model, kEmbedCtx, inputs, o, ws);
      ADD_FAILURE() << "accepted; expected an error with '" << words << "'";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(words), std::string::npos) << e.what();
    }
  };
  refuses({{1, 2}, {}}, {}, "input 1 is empty");
  refuses({{1, 2}, {vocab}}, {}, "input 1: token id " + std::to_string(vocab) + " is outside the vocabulary");
  refuses({{-1}}, {}, "token id -1");
  EmbedOptions zero_chunk;
  zero_chunk.chunk = 0;
  refuses({{1}}, zero_chunk, "chunk must be >= 1");
  EmbedOptions small_round;
  small_round.chunk = 16;
  small_round.round_rows = 8;
  refuses({{1}}, small_round, "must be at least the chunk");
  EXPECT_THROW(parse_pooling("max"), Error);
  EXPECT_EQ(parse_pooling("last"), Pooling::Last);
}

// Embeddings between generation steps on a running scheduler (TSan runs this): the generated
// tokens equal those of the request alone and the embeddings equal embed_batch's.
TEST(Embed, SchedulerThreadEmbedsBetweenStepsWithoutChangingEither) {
  const Model& model = embed_model(true);
  const auto inputs = embed_inputs(model.config().vocab_size);
  Workspace ws;
  const auto want = embed_batch(model, kEmbedCtx, inputs, {}, ws);

  ServeRequest request;
  request.prompt = test::random_tokens(20, model.config().vocab_size, 9);
  request.max_tokens = 24;
  request.stop_at_eos = false;
  Generator generator(model, nullptr, kEmbedCtx);
  SequenceState alone = model.new_state();
  const auto expected =
      generator.generate({request.prompt, request.max_tokens, request.sampling, {}, false}, alone);

  SchedulerOptions so;
  so.step_token_budget = 16;  // several groups, each a turn between steps
  Scheduler scheduler(model, nullptr, kEmbedCtx, so);
  scheduler.start();
  std::vector<int32_t> tokens;
  std::promise<void> finished;
  scheduler.submit(request, [&](const ServeEvent& e) {
    if (e.kind == ServeEvent::Kind::Token) tokens.push_back(e.token);
    if (e.kind != ServeEvent::Kind::Token) finished.set_value();
    return true;
  });
  std::vector<std::vector<float>> got;
  std::thread embedder([&] { got = scheduler.embed(inputs, {}); });
  embedder.join();
  finished.get_future().wait();
  scheduler.stop(true);
  EXPECT_EQ(tokens, expected.tokens);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_TRUE(same_vector_bits(got[i], want[i])) << "input " << i;
  EXPECT_THROW(scheduler.embed(std::vector<std::vector<int32_t>>{{}}, {}), Error);
}

}  // namespace embed_test
}  // namespace mb
