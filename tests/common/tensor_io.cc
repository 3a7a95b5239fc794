// SPDX-License-Identifier: MIT
#include "common/tensor_io.h"

#include <stdexcept>

namespace mb::test {

std::vector<double> read_tensor_values(const TensorSet& set, const std::string& name, const DType* round_to,
                                       bool required) {
  const StoredTensor* t = set.find(name);
  if (t == nullptr) {
    if (required) throw std::runtime_error("reference: missing tensor " + name);
    return {};
  }
  std::vector<float> widened(t->element_count());
  widen_row(t->data, *t->dtype, t->element_count(), widened.data());
  std::vector<double> values(widened.size());
  for (size_t i = 0; i < values.size(); ++i) {
    float v = widened[i];
    if (round_to != nullptr && *round_to == DType::BF16) v = bf16_to_f32(f32_to_bf16(v));
    if (round_to != nullptr && *round_to == DType::F16) v = f16_to_f32(f32_to_f16(v));
    values[i] = v;
  }
  return values;
}

void rewrite_tensors(const std::string& dir, const std::function<void(std::vector<StoredTensor>&)>& edit) {
  std::vector<StoredTensor> tensors;
  std::vector<std::vector<uint8_t>> copies;
  {
    const TensorSet set = TensorSet::open_dir(dir);
    for (const auto& [name, t] : set.tensors()) {
      copies.emplace_back(t.data, t.data + t.byte_size);
      tensors.push_back(t);
    }
  }
  for (size_t i = 0; i < tensors.size(); ++i) tensors[i].data = copies[i].data();
  edit(tensors);
  SafetensorsWriter writer;
  for (const auto& t : tensors)
    writer.add_raw(t.name, t.dtype_string, t.shape, std::vector<uint8_t>(t.data, t.data + t.byte_size));
  writer.write(dir + "/model.safetensors");
}

}  // namespace mb::test
