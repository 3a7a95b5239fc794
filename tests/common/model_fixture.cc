// SPDX-License-Identifier: MIT
#include "common/model_fixture.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include "common/test_util.h"
#include "io/safetensors.h"
#include "ops/quant.h"

namespace mb::test {

std::string write_model(const MakeModelOptions& options, const std::string& tag) {
  const std::string dir = make_temp_dir(tag);
  MakeModelOptions copy = options;
  copy.write_tokenizer = false;
  make_model(dir, copy);
  return dir;
}

void edit_tensors(const std::string& dir,
                  const std::function<void(const std::string& name, std::vector<float>& values)>& edit) {
  SafetensorsWriter writer;
  {
    const TensorSet tensors = TensorSet::open_file(dir + "/model.safetensors");
    for (const auto& [name, tensor] : tensors.tensors()) {
      std::vector<float> values(static_cast<size_t>(tensor.element_count()));
      dequantize_row(*tensor.dtype, tensor.data, tensor.element_count(), values.data());
      edit(name, values);
      writer.add_f32(name, tensor.shape, values, *tensor.dtype);
    }
  }
  writer.write(dir + "/model.safetensors");
}

SequenceState state_after(const Model& model, std::span<const int32_t> tokens) {
  SequenceState state = model.new_state();
  prefill(model, ComputeContext{1, best_isa()}, {tokens.begin(), tokens.end()}, state, {OutputKind::None, 0});
  return state;
}

void zero_a_log(const std::string& dir) {
  SafetensorsWriter writer;
  {
    const TensorSet tensors = TensorSet::open_dir(dir);
    for (const auto& [name, tensor] : tensors.tensors()) {
      std::vector<uint8_t> bytes(tensor.data, tensor.data + tensor.byte_size);
      if (name.ends_with("A_log")) std::fill(bytes.begin(), bytes.end(), 0);
      writer.add(name, *tensor.dtype, tensor.shape, std::move(bytes));
    }
  }
  writer.write(dir + "/model.safetensors");
}

std::vector<int32_t> random_tokens(size_t count, int64_t vocab, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<int32_t> tokens(count);
  for (auto& t : tokens) t = static_cast<int32_t>(rng() % vocab);
  return tokens;
}

std::vector<float> step_logits(const Model& model, const ComputeContext& ctx,
                               const std::vector<int32_t>& tokens, SequenceState& state,
                               std::vector<SequenceState>* states_after) {
  Workspace ws;
  std::vector<std::vector<float>> out;
  std::vector<float> all;
  for (int32_t token : tokens) {
    SequenceInput input{&state, std::span(&token, 1), {}};
    model.forward(ctx, std::span(&input, 1), {OutputKind::LogitsLast, 0}, ws, out);
    all.insert(all.end(), out[0].begin(), out[0].end());
    if (states_after != nullptr) states_after->push_back(state);
  }
  return all;
}

std::vector<float> prefill(const Model& model, const ComputeContext& ctx, const std::vector<int32_t>& tokens,
                           SequenceState& state, const ForwardOptions& options) {
  Workspace ws;
  std::vector<std::vector<float>> out;
  SequenceInput input{&state, tokens, {}};
  model.forward(ctx, std::span(&input, 1), options, ws, out);
  return out[0];
}

void expect_batched_steps_equal_solo(const Model& model, const ComputeContext& ctx, size_t sequences,
                                     int steps) {
  std::vector<SequenceState> batch_states(sequences, model.new_state());
  std::vector<SequenceState> solo_states(sequences, model.new_state());
  Workspace ws;
  std::vector<std::vector<float>> out, solo_out;
  for (int step = 0; step < steps; ++step) {
    const auto next = random_tokens(sequences, model.config().vocab_size, 100 + step);
    std::vector<SequenceInput> batch;
    for (size_t i = 0; i < sequences; ++i) batch.push_back({&batch_states[i], std::span(&next[i], 1), {}});
    model.forward(ctx, batch, {OutputKind::LogitsLast, 0}, ws, out);
    for (size_t i = 0; i < sequences; ++i) {
      SequenceInput input{&solo_states[i], std::span(&next[i], 1), {}};
      model.forward(ComputeContext{1, best_isa()}, std::span(&input, 1), {OutputKind::LogitsLast, 0}, ws,
                    solo_out);
      ASSERT_TRUE(same_bits(out[i], solo_out[0])) << "step " << step << " sequence " << i;
    }
  }
}

void expect_prefill_then_decode_equals_decode(const Model& model, const ComputeContext& ctx,
                                              const ForwardOptions& prefill_options) {
  const auto tokens = random_tokens(40, model.config().vocab_size, 5);
  SequenceState stepped = model.new_state();
  const auto all_steps = step_logits(model, ctx, tokens, stepped);
  SequenceState mixed = model.new_state();
  prefill(model, ctx, std::vector<int32_t>(tokens.begin(), tokens.begin() + 25), mixed, prefill_options);
  const auto continued =
      step_logits(model, ctx, std::vector<int32_t>(tokens.begin() + 25, tokens.end()), mixed);
  const int64_t V = model.config().vocab_size;
  EXPECT_TRUE(same_bits(continued, std::vector<float>(all_steps.begin() + 25 * V, all_steps.end())));
  EXPECT_TRUE(same_bits(mixed.download(), stepped.download()));
}

void expect_prefill_equals_steps_for_every_length(const Model& model, int64_t max_length) {
  const ComputeContext ctx{1, best_isa()};
  const int64_t V = model.config().vocab_size;
  const auto tokens = random_tokens(max_length, V, 3);
  std::vector<SequenceState> states;
  SequenceState state = model.new_state();
  const std::vector<float> step_all = step_logits(model, ctx, tokens, state, &states);
  // Every length natively; in a sampled run every length up to 32, then every 29th, and the last.
  for (int64_t T = 1; T <= max_length; T += (sampled_sweeps() && T >= 32 && T + 29 <= max_length) ? 29 : 1) {
    SequenceState fresh = model.new_state();
    const std::vector<int32_t> prompt(tokens.begin(), tokens.begin() + T);
    const bool all = T % 3 == 0;
    const auto logits =
        prefill(model, ctx, prompt, fresh, {all ? OutputKind::LogitsAll : OutputKind::LogitsLast, 0});
    const std::vector<float> expected(step_all.begin() + (all ? 0 : (T - 1) * V), step_all.begin() + T * V);
    ASSERT_TRUE(same_bits(logits, expected)) << "logits differ at T=" << T;
    ASSERT_TRUE(same_bits(fresh.download(), states[T - 1].download())) << "state differs at T=" << T;
    ASSERT_EQ(fresh.position, T);
  }
}

void expect_threads_rounds_and_isas_change_no_bit(const Model& model, const std::vector<int32_t>& tokens,
                                                  const std::vector<int64_t>& rounds, ScanForm scan) {
  SequenceState base_state = model.new_state();
  const auto base =
      prefill(model, ComputeContext{1, best_isa()}, tokens, base_state, {OutputKind::LogitsAll, 0, scan});
  for (int threads : {1, 2, 3}) {
    for (int64_t chunk : rounds) {
      SequenceState state = model.new_state();
      const auto got = prefill(model, ComputeContext{threads, best_isa()}, tokens, state,
                               {OutputKind::LogitsAll, chunk, scan});
      EXPECT_TRUE(same_bits(got, base)) << "threads " << threads << " round " << chunk;
      EXPECT_TRUE(same_bits(state.download(), base_state.download()))
          << "threads " << threads << " round " << chunk;
    }
  }
  for (Isa isa : supported_isas()) {
    SequenceState state = model.new_state();
    EXPECT_TRUE(same_bits(
        prefill(model, ComputeContext{2, isa}, tokens, state, {OutputKind::LogitsAll, 0, scan}), base))
        << isa_name(isa);
    EXPECT_TRUE(same_bits(state.download(), base_state.download())) << isa_name(isa);
  }
}

void expect_batch_equals_each_alone(const Model& model, const std::vector<std::vector<int32_t>>& prompts,
                                    const std::vector<OutputKind>& kinds, const std::vector<int64_t>& rounds,
                                    ScanForm scan, int64_t ssd_chunk) {
  for (OutputKind kind : kinds) {
    for (int64_t chunk : rounds) {
      std::vector<SequenceState> states(prompts.size(), model.new_state());
      std::vector<SequenceInput> batch;
      for (size_t i = 0; i < prompts.size(); ++i) batch.push_back({&states[i], prompts[i], {}});
      Workspace ws;
      std::vector<std::vector<float>> batched;
      model.forward(ComputeContext{2, best_isa()}, batch, {kind, chunk, scan, ssd_chunk}, ws, batched);
      for (size_t i = 0; i < prompts.size(); ++i) {
        SequenceState alone = model.new_state();
        const auto solo =
            prefill(model, ComputeContext{1, best_isa()}, prompts[i], alone, {kind, chunk, scan, ssd_chunk});
        EXPECT_TRUE(same_bits(batched[i], solo)) << "sequence " << i << " round " << chunk;
        EXPECT_TRUE(same_bits(states[i].download(), alone.download())) << "sequence " << i;
      }
    }
  }
}

}  // namespace mb::test
