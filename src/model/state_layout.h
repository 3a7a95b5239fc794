// The layout of one sequence's recurrent state, described by the architecture that owns it.
//
// The state is stored as one flat f32 array (so a fork is a copy and a state file is a write of
// the array), but what the array holds is named here: per layer, a list of parts such as the
// conv history and the SSM state, each with a shape and an offset. An architecture builds its
// layout once at load and finds a layer's parts through it instead of computing offsets by hand,
// and validation reports which parts and shapes a state was expected to hold. Layers may have
// different parts, so hybrids (an attention layer's KV cache next to SSM layers) fit the same
// description.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace mb {

// One named tensor of a layer's state, stored as f32 (the only state dtype so far).
struct StatePart {
  std::string name;            // e.g. "conv", "ssm"
  std::vector<int64_t> shape;  // row-major
  int64_t offset = 0;          // floats from the start of the whole state
  int64_t floats() const;
};

// The parts of one layer, contiguous in the flat state.
struct LayerStateLayout {
  std::vector<StatePart> parts;
  int64_t offset = 0;  // floats from the start of the whole state
  int64_t floats = 0;  // the sum of the parts' sizes
};

class StateLayout {
 public:
  // Appends a layer whose parts follow each other in the order given; their offsets are set here.
  void add_layer(std::vector<StatePart> parts);

  int64_t n_layers() const { return static_cast<int64_t>(layers_.size()); }
  const LayerStateLayout& layer(int64_t l) const { return layers_[l]; }
  size_t total_floats() const { return static_cast<size_t>(total_); }

  // The offset of layer `l`'s part number `part` (its index in the order the layer listed them).
  // Architectures name their part indices as constants, so the hot path does no string lookup.
  int64_t offset(int64_t l, size_t part) const { return layers_[l].parts[part].offset; }
  // The index of layer `l`'s part named `name`; throws mb::Error when the layer has none.
  size_t part_index(int64_t l, std::string_view name) const;

  // The parts of each run of identical layers, then the total, in one line: e.g.
  // "layers 0-23: conv [3, 1536] + ssm [16, 1536] (29184 floats each); 700416 f32 values in all".
  std::string describe() const;
  // Throws mb::Error naming `what`, the floats it holds and the layout expected, unless a state
  // of `floats` values fits this layout.
  void check_size(size_t floats, const std::string& what) const;

 private:
  std::vector<LayerStateLayout> layers_;
  int64_t total_ = 0;
};

}  // namespace mb
