// SPDX-License-Identifier: MIT
// A test block with a growing state part, the shape of a KV cache: every position appends the
// residual stream row entering it (`width` floats) to its "history" part. It changes no output,
// so a model with it computes what the model without it does, and its state holds one row per
// position consumed: what tests of growing parts (save, restore, fork, the prefix cache, device
// states) need, before attention blocks exist.
#pragma once

#include <memory>

#include "model/blocks/block.h"

namespace mb::test {

class HistoryBlock final : public Block {
 public:
  explicit HistoryBlock(int64_t width) : Block(BlockKind::Custom, {BlockKind::Custom, 0}), width_(width) {}

  std::vector<StatePart> state_parts() const override { return {{"history", {width_}, true}}; }
  std::vector<int64_t> scratch_widths() const override { return {}; }
  std::span<const std::string_view> phase_names() const override {
    static constexpr std::string_view kNames[] = {"history append"};
    return kNames;
  }
  std::vector<OpQuery> ops() const override { return {{OpKind::AppendRows}}; }
  void forward(LayerContext& ctx) const override {
    ctx.backend.append_rows(ctx.stream,
                            {ctx.hidden, width_, state_layout().parts[0].offset, ctx.parts, phase(0)});
  }

 private:
  int64_t width_;
};

}  // namespace mb::test
