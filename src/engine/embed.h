// SPDX-License-Identifier: MIT
// Embeddings: token sequences in, one unit vector per sequence out, pooled over the final hidden
// state (after the final norm, as Model::forward's HiddenMean and HiddenLast return it: the same
// rows the sequence-model path pools).
//
// A batch goes through Model::forward in groups whose rounds hold at most `round_rows` positions
// (each sequence contributes min(its length, chunk) rows to a round), so memory is bounded by the
// options, not by the input. The model is exact (a sequence in a batch equals it alone; the chunk
// changes nothing), and the normalisation is per vector, so every embedding is bit-identical to
// the one of its sequence alone, whatever the batch, the grouping and the chunk size.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "model/model.h"

namespace mb {

enum class Pooling {
  Mean,  // the mean of the final-norm rows over every position (summed in double)
  Last,  // the final-norm row of the last position (what a causal model has read everything by)
};

// "mean" or "last"; throws mb::Error naming the accepted values otherwise.
Pooling parse_pooling(const std::string& name);
const char* pooling_name(Pooling pooling);

struct EmbedOptions {
  Pooling pooling = Pooling::Mean;
  bool normalize = true;  // L2-normalise each vector (computed in double, rounded to float once)
  int64_t chunk = 512;    // positions per sequence per round (ForwardOptions::chunk); >= 1
  // The most positions one round holds, over the group's sequences; >= chunk. Bounds the
  // activation memory of a call whatever the number of inputs.
  int64_t round_rows = 4096;
};

// Splits `inputs` into the groups embed_batch runs as one forward call each: consecutive runs
// whose per-round rows (sum of min(length, chunk)) stay within round_rows; every group holds at
// least one sequence. Returns each group's end index.
std::vector<size_t> embed_groups(std::span<const std::vector<int32_t>> inputs, const EmbedOptions& options);

// Throws mb::Error for what embed_batch refuses (see there), without running anything.
void check_embed_inputs(const Model& model, std::span<const std::vector<int32_t>> inputs,
                        const EmbedOptions& options);

// One embedding (model.config().d_model floats) per input, in order. Throws mb::Error, before
// any work, for an empty input, an id outside the model's vocabulary, a checkpoint that reads
// feature rows rather than tokens, or options out of range. Runs on the caller's thread with
// `workspace` (the caller serialises use of the model's workspace).
std::vector<std::vector<float>> embed_batch(const Model& model, const ComputeContext& ctx,
                                            std::span<const std::vector<int32_t>> inputs,
                                            const EmbedOptions& options, Workspace& workspace);

// Scales `vector` to unit L2 norm: the sum of squares and the quotients in double, each value
// rounded to float once. A zero vector stays zero.
void l2_normalize(std::vector<float>& vector);

}  // namespace mb
