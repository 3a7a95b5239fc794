// SPDX-License-Identifier: MIT
// The C API's embeddings: mb_embed over engine/embed.h's embed_batch, under the model's lock.
#include <string>
#include <vector>

#include "capi_common.h"
#include "engine/embed.h"

using mb::capi::CallError;
using mb::capi::guard;
using mb::capi::LoadedModel;
using mb::capi::Lock;
using mb::capi::require;

mb_status mb_embed(mb_model* model, const mb_token_span* inputs, size_t n_inputs, mb_pooling pooling,
                   int normalize, mb_output* output) {
  if (output != nullptr) *output = mb_output{nullptr, 0, 0};
  return guard("mb_embed", MB_ERR_INVALID_ARGUMENT, [&] {
    require(model, "model");
    require(output, "output");
    LoadedModel& impl = *model->impl;
    if (n_inputs > 0) require(inputs, "inputs");
    mb::EmbedOptions options;
    if (pooling == MB_POOLING_MEAN)
      options.pooling = mb::Pooling::Mean;
    else if (pooling == MB_POOLING_LAST)
      options.pooling = mb::Pooling::Last;
    else
      throw CallError(MB_ERR_INVALID_ARGUMENT, "unknown pooling " +
                                                   std::to_string(static_cast<int>(pooling)) +
                                                   " (MB_POOLING_MEAN or MB_POOLING_LAST)");
    options.normalize = normalize != 0;
    if (impl.model->input_dim() > 0)
      throw CallError(MB_ERR_UNSUPPORTED,
                      "this model reads feature rows, not tokens: it has no text embeddings");
    std::vector<std::vector<int32_t>> sequences(n_inputs);
    for (size_t i = 0; i < n_inputs; ++i) {
      if (inputs[i].n_tokens > 0 && inputs[i].tokens == nullptr)
        throw CallError(MB_ERR_INVALID_ARGUMENT,
                        "inputs[" + std::to_string(i) + "].tokens is NULL with n_tokens > 0");
      sequences[i].assign(inputs[i].tokens, inputs[i].tokens + inputs[i].n_tokens);
    }
    std::vector<std::vector<float>> rows;
    {
      const Lock lock(impl);
      rows = mb::embed_batch(*impl.model, mb::capi::context_of(impl), sequences, options, impl.workspace);
    }
    const int64_t width = impl.model->config().d_model;
    std::vector<float> stacked;
    stacked.reserve(rows.size() * static_cast<size_t>(width));
    for (const auto& row : rows) stacked.insert(stacked.end(), row.begin(), row.end());
    *output = mb_output{mb::capi::copy_to_malloc(stacked.data(), stacked.size()),
                        static_cast<int64_t>(n_inputs), width};
  });
}
