// SPDX-License-Identifier: MIT
#include "model/gguf_tensor_names.h"

#include <algorithm>
#include <cstring>

#include "core/error.h"
#include "io/gguf.h"

namespace mb {

std::optional<DType> gguf_engine_dtype(uint32_t ggml_type) {
  switch (ggml_type) {
    case kGgmlF32:
      return DType::F32;
    case kGgmlF16:
      return DType::F16;
    case kGgmlBF16:
      return DType::BF16;
    case kGgmlQ8_0:
      return DType::Q8_0;
    case kGgmlQ4_0:
      return DType::Q4_0;
    case kGgmlQ4_K:
      return DType::Q4_K;
    case kGgmlQ6_K:
      return DType::Q6_K;
    default:
      return std::nullopt;
  }
}

uint32_t gguf_ggml_type(DType dtype) {
  switch (dtype) {
    case DType::F32:
      return kGgmlF32;
    case DType::F16:
      return kGgmlF16;
    case DType::BF16:
      return kGgmlBF16;
    case DType::Q8_0:
      return kGgmlQ8_0;
    case DType::Q4_0:
      return kGgmlQ4_0;
    case DType::Q4_K:
      return kGgmlQ4_K;
    case DType::Q6_K:
      return kGgmlQ6_K;
  }
  return kGgmlF32;
}

std::vector<TensorSpec> gguf_tensor_specs(const ModelConfig& c) {
  if (c.arch == Architecture::Mamba3)
    throw Error("Mamba-3 has no GGUF architecture (llama.cpp has no mamba3)");
  std::vector<TensorSpec> specs;
  for (TensorSpec& spec : all_tensor_specs(c, true, 0))
    if (spec.wanted && !spec.gguf.empty()) specs.push_back(std::move(spec));
  return specs;
}

std::vector<int64_t> gguf_dims(const TensorSpec& spec, const ModelConfig& c) {
  std::vector<int64_t> shape = spec.shape;
  // llama.cpp's converter squeezes the conv weight, gives Mamba-2's A and D a trailing unit dim
  // and splits Mamba-2's norm weight by group.
  switch (spec.gguf_form) {
    case GgufForm::Same:
      break;
    case GgufForm::SqueezedConv:
      shape = {shape[0], shape[2]};
      break;
    case GgufForm::UnitColumn:
      shape.push_back(1);
      break;
    case GgufForm::Grouped:
      shape = {c.ssm.ngroups, c.ssm.d_inner / c.ssm.ngroups};
      break;
    case GgufForm::SplitHalves:
      shape[shape.size() >= 2 ? shape.size() - 2 : 0] /= 2;
      break;
    case GgufForm::HeadPairsInterleaved:
      break;
  }
  std::reverse(shape.begin(), shape.end());
  return shape;
}

std::vector<uint8_t> reorder_head_rows(const uint8_t* data, size_t row_bytes, int64_t rows, int64_t head_dim,
                                       bool to_gguf) {
  if (head_dim % 2 != 0 || rows % head_dim != 0)
    throw Error(
        "GGUF files pair the rows of each attention head, which needs an even head size dividing the "
        "rows (head size " +
        std::to_string(head_dim) + ", " + std::to_string(rows) + " rows)");
  std::vector<uint8_t> out(static_cast<size_t>(rows) * row_bytes);
  const int64_t half = head_dim / 2;
  for (int64_t head = 0; head < rows; head += head_dim)
    for (int64_t i = 0; i < half; ++i)
      for (int64_t part = 0; part < 2; ++part) {
        // Row part * hd/2 + i of a head in Hugging Face's order is row 2 i + part in llama.cpp's.
        const int64_t hf = head + part * half + i, gguf = head + 2 * i + part;
        const int64_t from = to_gguf ? hf : gguf, to = to_gguf ? gguf : hf;
        std::memcpy(out.data() + to * row_bytes, data + from * row_bytes, row_bytes);
      }
  return out;
}

}  // namespace mb
