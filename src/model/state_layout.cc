// SPDX-License-Identifier: MIT
#include "model/state_layout.h"

#include "core/error.h"

namespace mb {
namespace {

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string text = "[";
  for (size_t i = 0; i < shape.size(); ++i) text += (i > 0 ? ", " : "") + std::to_string(shape[i]);
  return text + "]";
}

// "conv [3, 8] + ssm [16, 8]": what a layer holds, without its offsets, so equal layers read alike.
std::string parts_text(const LayerStateLayout& layer) {
  std::string text;
  for (const StatePart& part : layer.parts)
    text += (text.empty() ? "" : " + ") + part.name + " " + shape_text(part.shape) +
            (part.grows ? " per position" : "");
  return text;
}

}  // namespace

int64_t StatePart::floats() const {
  int64_t count = 1;
  for (int64_t extent : shape) count *= extent;
  return count;
}

void StateLayout::add_layer(std::vector<StatePart> parts) {
  LayerStateLayout layer;
  layer.offset = total_;
  for (StatePart& part : parts) {
    if (part.grows) {
      part.offset = static_cast<int64_t>(growing_.size());
      growing_.push_back(part.floats());
      continue;
    }
    part.offset = layer.offset + layer.floats;
    layer.floats += part.floats();
  }
  layer.parts = std::move(parts);
  total_ += layer.floats;
  layers_.push_back(std::move(layer));
}

size_t StateLayout::part_index(int64_t l, std::string_view name) const {
  const std::vector<StatePart>& parts = layers_.at(l).parts;
  for (size_t i = 0; i < parts.size(); ++i)
    if (parts[i].name == name) return i;
  throw Error("layer " + std::to_string(l) + "'s state has no part named '" + std::string(name) + "'");
}

std::string StateLayout::describe() const {
  std::string text;
  for (size_t first = 0; first < layers_.size();) {
    const std::string parts = parts_text(layers_[first]);
    size_t last = first;
    while (last + 1 < layers_.size() && parts_text(layers_[last + 1]) == parts) ++last;
    const std::string which = first == last ? "layer " + std::to_string(first)
                                            : "layers " + std::to_string(first) + "-" + std::to_string(last);
    // A block without state (a hybrid's MLP) still has its entry, so the numbers follow the blocks.
    if (layers_[first].parts.empty())
      text += which + ": no state; ";
    else
      text += which + ": " + parts + " (" + std::to_string(layers_[first].floats) +
              (first == last ? " floats); " : " floats each); ");
    first = last + 1;
  }
  if (!growing_.empty()) {
    int64_t per_position = 0;
    for (int64_t floats : growing_) per_position += floats;
    return text + std::to_string(total_) + " fixed f32 values and " + std::to_string(per_position) +
           " per position in all";
  }
  return text + std::to_string(total_) + " f32 values in all";
}

StateShape StateLayout::shape() const {
  return {total_, growing_};
}

void StateLayout::check_size(size_t floats, const std::string& what, int64_t positions) const {
  // Positions past 2^40 (no context comes near) are refused before they are multiplied by a growing
  // part's width, which could overflow, and before a forward pass adds to them (Model::forward
  // refuses passing the same bound).
  constexpr int64_t kMaxPosition = int64_t{1} << 40;
  if (positions < 0 || positions > kMaxPosition)
    throw Error(what + " is at position " + std::to_string(positions) +
                ", outside the positions a state may reach (0 to 2^40)");
  if (static_cast<int64_t>(floats) == shape().host_floats(positions)) return;
  std::string expected = describe();
  if (!growing_.empty())
    expected += " and " + std::to_string(shape().host_floats(positions)) + " at position " +
                std::to_string(positions);
  throw Error(what + " holds " + std::to_string(floats) + " state values but this model's state has " +
              expected);
}

}  // namespace mb
