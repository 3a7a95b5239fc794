// SPDX-License-Identifier: MIT
// Scheduler::embed: embedding batches interleaved with the generation steps.
#include <algorithm>

#include "engine/embed.h"
#include "engine/scheduler.h"
#include "engine/scheduler_impl.h"

namespace mb {

std::vector<std::vector<float>> Scheduler::embed(std::span<const std::vector<int32_t>> inputs,
                                                 EmbedOptions options) {
  Impl& s = *impl_;
  // Rounds as large as a generation step: the workspace keeps the size the steps gave it, and one
  // group holds the scheduler thread about as long as a step of prefill per round it runs.
  options.chunk = std::min(options.chunk, s.options.step_token_budget);
  options.round_rows = s.options.step_token_budget;
  check_embed_inputs(s.model, inputs, options);
  std::vector<std::vector<float>> result;
  result.reserve(inputs.size());
  size_t begin = 0;
  for (size_t end : embed_groups(inputs, options)) {
    const auto group = inputs.subspan(begin, end - begin);
    s.run_on_loop([&] {
      for (auto& row : embed_batch(s.model, s.ctx, group, options, s.workspace))
        result.push_back(std::move(row));
    });
    begin = end;
  }
  return result;
}

}  // namespace mb
