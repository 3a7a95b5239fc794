#include "common/model_fixture.h"

#include <random>

#include "common/test_util.h"

namespace mb::test {

std::string write_model(const MakeModelOptions& options, const std::string& tag) {
  const std::string dir = make_temp_dir(tag);
  MakeModelOptions copy = options;
  copy.write_tokenizer = false;
  make_model(dir, copy);
  return dir;
}

std::vector<int32_t> random_tokens(size_t count, int64_t vocab, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<int32_t> tokens(count);
  for (auto& t : tokens) t = static_cast<int32_t>(rng() % vocab);
  return tokens;
}

std::vector<float> step_logits(const Model& model, const ComputeContext& ctx, const std::vector<int32_t>& tokens,
                               SequenceState& state, std::vector<SequenceState>* states_after) {
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

}  // namespace mb::test
