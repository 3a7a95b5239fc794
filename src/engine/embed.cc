// SPDX-License-Identifier: MIT
#include "engine/embed.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"

namespace mb {

Pooling parse_pooling(const std::string& name) {
  if (name == "mean") return Pooling::Mean;
  if (name == "last") return Pooling::Last;
  throw Error("pooling must be 'mean' or 'last', got '" + name + "'");
}

const char* pooling_name(Pooling pooling) {
  return pooling == Pooling::Mean ? "mean" : "last";
}

std::vector<size_t> embed_groups(std::span<const std::vector<int32_t>> inputs, const EmbedOptions& options) {
  std::vector<size_t> ends;
  int64_t rows = 0;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const int64_t first_round = std::min<int64_t>(static_cast<int64_t>(inputs[i].size()), options.chunk);
    if (rows > 0 && rows + first_round > options.round_rows) {
      ends.push_back(i);
      rows = 0;
    }
    rows += first_round;
  }
  if (!inputs.empty()) ends.push_back(inputs.size());
  return ends;
}

void l2_normalize(std::vector<float>& vector) {
  double squares = 0;
  for (float v : vector) squares += static_cast<double>(v) * static_cast<double>(v);
  if (squares == 0) return;
  const double norm = std::sqrt(squares);
  for (float& v : vector) v = static_cast<float>(static_cast<double>(v) / norm);
}

void check_embed_inputs(const Model& model, std::span<const std::vector<int32_t>> inputs,
                        const EmbedOptions& options) {
  if (options.chunk < 1)
    throw Error("the embedding chunk must be >= 1, got " + std::to_string(options.chunk));
  if (options.round_rows < options.chunk)
    throw Error("the embedding round size (" + std::to_string(options.round_rows) +
                " positions) must be at least the chunk (" + std::to_string(options.chunk) + ")");
  if (model.input_dim() > 0)
    throw Error("this checkpoint reads feature rows, not tokens: it has no text embeddings");
  // Every input is checked before the first group runs, so a bad one costs no forward pass.
  const int64_t vocab = model.config().vocab_size;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (inputs[i].empty()) throw Error("input " + std::to_string(i) + " is empty (no tokens to embed)");
    for (int32_t id : inputs[i])
      if (id < 0 || id >= vocab)
        throw Error("input " + std::to_string(i) + ": token id " + std::to_string(id) +
                    " is outside the vocabulary [0, " + std::to_string(vocab) + ")");
  }
}

std::vector<std::vector<float>> embed_batch(const Model& model, const ComputeContext& ctx,
                                            std::span<const std::vector<int32_t>> inputs,
                                            const EmbedOptions& options, Workspace& workspace) {
  check_embed_inputs(model, inputs, options);
  ForwardOptions forward;
  forward.output = options.pooling == Pooling::Mean ? OutputKind::HiddenMean : OutputKind::HiddenLast;
  forward.chunk = options.chunk;
  std::vector<std::vector<float>> result;
  result.reserve(inputs.size());
  std::vector<SequenceState> states;
  std::vector<SequenceInput> batch;
  std::vector<std::vector<float>> outputs;
  size_t begin = 0;
  for (size_t end : embed_groups(inputs, options)) {
    // Fresh states, dropped after the group: an embedding never touches a cached conversation.
    states.clear();
    batch.clear();
    for (size_t i = begin; i < end; ++i) states.push_back(model.new_state());
    for (size_t i = begin; i < end; ++i) batch.push_back(SequenceInput{&states[i - begin], inputs[i], {}});
    model.forward(ctx, batch, forward, workspace, outputs);
    for (auto& row : outputs) {
      if (options.normalize) l2_normalize(row);
      result.push_back(std::move(row));
    }
    begin = end;
  }
  return result;
}

}  // namespace mb
