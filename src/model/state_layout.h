// SPDX-License-Identifier: MIT
// The layout of one sequence's recurrent state, described by the blocks that own it.
//
// A state has two kinds of parts. Fixed parts (the conv history, the SSM state) have one size
// whatever the position; they are laid out one after another in one flat f32 region, per layer
// in the blocks' order. Growing parts (the KV caches of attention blocks) hold a run of floats per
// position consumed so far; the backend allocates them in blocks of positions
// (backends/backend.h: StateShape). What the state holds is named here: per layer, a list of
// parts with shapes and offsets. Blocks find their parts through it instead of computing offsets
// by hand, and validation reports which parts and shapes a state was expected to hold.
//
// The host form of a state (what state files, slot files and downloads hold) is the fixed region
// followed by each growing part's used positions, in layout order; without growing parts it is
// the fixed region alone.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "backends/backend.h"

namespace mb {

// One named tensor of a layer's state, stored as f32 (the only state dtype so far).
struct StatePart {
  std::string name;            // e.g. "conv", "ssm"
  std::vector<int64_t> shape;  // row-major; of one position for a growing part
  bool grows = false;          // a run of `shape` per position (a KV cache), else fixed
  int64_t offset = 0;          // fixed: floats from the start of the fixed region; growing: its index
  int64_t floats() const;      // of `shape`
};

// The parts of one layer, contiguous in the flat state.
struct LayerStateLayout {
  std::vector<StatePart> parts;
  int64_t offset = 0;  // floats from the start of the fixed region
  int64_t floats = 0;  // the sum of the fixed parts' sizes
};

class StateLayout {
 public:
  // Appends a layer whose parts follow each other in the order given; their offsets are set here.
  void add_layer(std::vector<StatePart> parts);

  int64_t n_layers() const { return static_cast<int64_t>(layers_.size()); }
  const LayerStateLayout& layer(int64_t l) const { return layers_[l]; }
  // Floats of the fixed region.
  size_t total_floats() const { return static_cast<size_t>(total_); }
  // What a backend allocates: the fixed region and the floats per position of each growing part.
  StateShape shape() const;

  // The offset of layer `l`'s part number `part` (its index in the order the layer listed them).
  // Architectures name their part indices as constants, so the hot path does no string lookup.
  int64_t offset(int64_t l, size_t part) const { return layers_[l].parts[part].offset; }
  // The index of layer `l`'s part named `name`; throws mb::Error when the layer has none.
  size_t part_index(int64_t l, std::string_view name) const;

  // The parts of each run of identical layers, then the total, in one line: e.g.
  // "layers 0-23: conv [3, 1536] + ssm [16, 1536] (29184 floats each); 700416 f32 values in all".
  std::string describe() const;
  // Throws mb::Error naming `what`, the floats it holds and the layout expected, unless a state
  // of `floats` values fits this layout (the host form at `positions` positions).
  void check_size(size_t floats, const std::string& what, int64_t positions = 0) const;

 private:
  std::vector<LayerStateLayout> layers_;
  int64_t total_ = 0;
  std::vector<int64_t> growing_;  // floats per position of each growing part
};

}  // namespace mb
