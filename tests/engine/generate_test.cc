// SPDX-License-Identifier: MIT
// Generation on a small random model with its byte-level tokenizer: batched requests equal
// their solo runs bit for bit, a saved and restored state continues exactly like the
// uninterrupted run, and bad or mismatched state files are refused.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "common/model_fixture.h"
#include "common/test_util.h"
#include "core/error.h"
#include "engine/generate.h"
#include "engine/state_file.h"
#include "io/mapped_file.h"

namespace mb {
namespace {

struct GenerateModel {
  std::string dir;
  std::unique_ptr<Model> model;
  std::unique_ptr<Tokenizer> tokenizer;
};

const GenerateModel& generate_model(uint64_t seed = 5) {
  static std::map<uint64_t, GenerateModel> models;
  auto it = models.find(seed);
  if (it == models.end()) {
    MakeModelOptions o;
    o.config = test::small_config(32, 2, 300);
    o.seed = seed;
    GenerateModel m;
    m.dir = test::make_temp_dir("text_model");
    make_model(m.dir, o);  // writes tokenizer.json too (vocab >= 257)
    m.model = Model::load(m.dir);
    m.tokenizer = std::make_unique<Tokenizer>(Tokenizer::from_model_dir(m.dir));
    it = models.emplace(seed, std::move(m)).first;
  }
  return it->second;
}

GenerateRequest request(const Tokenizer& tok, const std::string& prompt, int n, float temperature, uint64_t seed) {
  GenerateRequest r;
  r.prompt = tok.encode(prompt);
  r.max_new_tokens = n;
  r.sampling.temperature = temperature;
  r.sampling.seed = seed;
  r.sampling.repeat_penalty = 1.1f;
  r.stop_at_eos = false;
  return r;
}

TEST(Generate, BatchedRequestsEqualTheirSoloRunsBitForBit) {
  const GenerateModel& m = generate_model();
  const std::vector<GenerateRequest> requests = {
      request(*m.tokenizer, "Hello", 12, 0.0f, 1), request(*m.tokenizer, "The quick brown fox jumps", 20, 0.9f, 2),
      request(*m.tokenizer, "a", 5, 1.3f, 3), request(*m.tokenizer, "State space models are recurrent", 17, 0.7f, 4)};
  std::vector<SequenceState> batch_states(requests.size(), m.model->new_state());
  std::vector<SequenceState*> pointers;
  for (auto& s : batch_states) pointers.push_back(&s);
  Generator batched(*m.model, m.tokenizer.get(), ComputeContext{2, best_isa()});
  const auto results = batched.generate_batch(requests, pointers);
  for (size_t i = 0; i < requests.size(); ++i) {
    SequenceState solo_state = m.model->new_state();
    Generator solo(*m.model, m.tokenizer.get(), ComputeContext{1, best_isa()});
    const GenerateResult solo_result = solo.generate(requests[i], solo_state);
    EXPECT_EQ(results[i].tokens, solo_result.tokens) << "request " << i;
    EXPECT_EQ(results[i].text, solo_result.text) << "request " << i;
    EXPECT_EQ(static_cast<int>(results[i].tokens.size()), requests[i].max_new_tokens);
    EXPECT_TRUE(test::same_bits(batch_states[i].download(), solo_state.download())) << "request " << i;
  }
}

TEST(Generate, StreamedPiecesConcatenateToTheResultText) {
  const GenerateModel& m = generate_model();
  SequenceState state = m.model->new_state();
  Generator generator(*m.model, m.tokenizer.get(), ComputeContext{1, best_isa()});
  std::string streamed;
  int calls = 0;
  const auto result = generator.generate(request(*m.tokenizer, "Once upon", 30, 0.8f, 9), state, [&](const StreamEvent& e) {
    streamed += e.text;
    ++calls;
    return true;
  });
  EXPECT_EQ(streamed, result.text);
  EXPECT_GE(calls, 30);
  EXPECT_EQ(m.tokenizer->decode(result.tokens), result.text);
}

TEST(Generate, StopStringEndsGenerationAndIsNotEmitted) {
  const GenerateModel& m = generate_model();
  // Find what greedy decoding produces, then stop on a piece of it that spans tokens.
  Generator generator(*m.model, m.tokenizer.get(), ComputeContext{1, best_isa()});
  SequenceState probe_state = m.model->new_state();
  const auto free_run = generator.generate(request(*m.tokenizer, "Hello there", 24, 0.0f, 0), probe_state);
  ASSERT_GE(free_run.text.size(), 6u);
  const std::string stop = free_run.text.substr(free_run.text.size() / 2, 3);
  GenerateRequest with_stop = request(*m.tokenizer, "Hello there", 24, 0.0f, 0);
  with_stop.stop_strings = {stop};
  SequenceState state = m.model->new_state();
  const auto stopped = generator.generate(with_stop, state);
  EXPECT_EQ(stopped.stop_reason, StopReason::StopString);
  const size_t at = free_run.text.find(stop);
  EXPECT_EQ(stopped.text, free_run.text.substr(0, at));
  EXPECT_EQ(stopped.text.find(stop), std::string::npos);
}

TEST(StateFile, SaveRestoreContinuesExactlyLikeTheUninterruptedRun) {
  const GenerateModel& m = generate_model();
  const Tokenizer& tok = *m.tokenizer;
  const std::string path = test::make_temp_dir("state") + "/conversation.state";
  Generator generator(*m.model, &tok, ComputeContext{2, best_isa()});

  // Interrupted: turn one, save to a file, restore, turn two.
  SequenceState first = m.model->new_state();
  const auto turn1 = generator.generate(request(tok, "User: hi. Bot:", 10, 0.8f, 11), first);
  save_state(path, *m.model, first);
  SequenceState restored = load_state(path, *m.model);
  EXPECT_TRUE(test::same_bits(restored.download(), first.download()));
  EXPECT_EQ(restored.position, first.position);
  const auto turn2 = generator.generate(request(tok, " User: more. Bot:", 10, 0.8f, 12), restored);

  // Uninterrupted: the same token stream fed in one go, then the same second turn.
  SequenceState whole = m.model->new_state();
  std::vector<int32_t> stream = tok.encode("User: hi. Bot:");
  stream.insert(stream.end(), turn1.tokens.begin(), turn1.tokens.end());
  Workspace ws;
  std::vector<std::vector<float>> out;
  SequenceInput input{&whole, stream, {}};
  m.model->forward(ComputeContext{1, best_isa()}, std::span(&input, 1), {OutputKind::None, 0}, ws, out);
  EXPECT_TRUE(test::same_bits(whole.download(), first.download()));
  const auto turn2_whole = generator.generate(request(tok, " User: more. Bot:", 10, 0.8f, 12), whole);
  EXPECT_EQ(turn2.tokens, turn2_whole.tokens);
  EXPECT_TRUE(test::same_bits(restored.download(), whole.download()));

  // A fork (a copy) continues independently and identically.
  SequenceState fork = first;
  const auto from_fork = generator.generate(request(tok, " User: more. Bot:", 10, 0.8f, 12), fork);
  EXPECT_EQ(from_fork.tokens, turn2.tokens);
}

TEST(StateFile, CorruptTruncatedAndMismatchedFilesAreRefused) {
  const GenerateModel& m = generate_model();
  const std::string dir = test::make_temp_dir("state_bad");
  SequenceState state = m.model->new_state();
  Generator generator(*m.model, m.tokenizer.get(), ComputeContext{1, best_isa()});
  generator.generate(request(*m.tokenizer, "abc", 3, 0.0f, 0), state);
  const std::string good = dir + "/good.state";
  save_state(good, *m.model, state);
  const std::string bytes = read_text_file(good);
  auto write = [&](const std::string& name, const std::string& content) {
    std::ofstream(dir + "/" + name, std::ios::binary) << content;
    return dir + "/" + name;
  };
  auto expect_refused = [&](const std::string& path, const Model& model, const std::string& fragment) {
    try {
      load_state(path, model);
      ADD_FAILURE() << path << " was accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
    }
  };
  std::string flipped = bytes;
  flipped[bytes.size() / 2] ^= 0x40;
  expect_refused(write("flipped.state", flipped), *m.model, "checksum");
  expect_refused(write("truncated.state", bytes.substr(0, bytes.size() - 9)), *m.model, "truncated");
  expect_refused(write("garbage.state", "not a state file at all, just text....................."), *m.model,
                 "not a mambacpp state file");
  std::string future = bytes;
  future[8] = 9;
  expect_refused(write("future.state", future), *m.model, "version 9");
  // A value count other than the layout's is refused naming the parts the model expects, and so
  // is saving a state of another size.
  std::string recounted = bytes;
  recounted[24] ^= 0x01;  // the low byte of the little-endian count
  expect_refused(write("recounted.state", recounted), *m.model,
                 "state values but this model's state has layer");
  expect_refused(write("recounted.state", recounted), *m.model, " + ssm [");
  try {
    save_state(dir + "/small.state", *m.model, SequenceState(std::vector<float>(3, 0.0f), 0));
    ADD_FAILURE() << "a state of 3 values was saved";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("the state to save holds 3 state values"), std::string::npos)
        << e.what();
  }
  // The same architecture and sizes with other weights, and a model of another size.
  expect_refused(good, *generate_model(6).model, "different model");
  MakeModelOptions bigger;
  bigger.config = test::small_config(48, 2, 300);
  auto other = Model::load(test::write_model(bigger, "state_other"));
  expect_refused(good, *other, "different model");
  EXPECT_NO_THROW(load_state(good, *m.model));
}

}  // namespace
}  // namespace mb
