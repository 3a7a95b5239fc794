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

const std::vector<GgufTensorRole>& gguf_tensor_roles(Architecture arch) {
  using K = GgufTensorKind;
  // Both architectures name the embedding, norms, projections, conv, A and D alike; Mamba-1
  // adds x_proj and dt_proj, Mamba-2 the per-head dt bias and the gated norm.
  const auto with_shared = [](std::initializer_list<GgufTensorRole> own) {
    std::vector<GgufTensorRole> roles = {
        {"token_embd.weight", "backbone.embeddings.weight", false, K::Embedding},
        {"output_norm.weight", "backbone.norm_f.weight", false, K::FinalNorm},
        {"output.weight", "lm_head.weight", false, K::LmHead},
        {"attn_norm.weight", "norm.weight", true, K::Norm},
        {"ssm_in.weight", "mixer.in_proj.weight", true, K::InProj},
        {"ssm_in.bias", "mixer.in_proj.bias", true, K::InProjBias},
        {"ssm_conv1d.weight", "mixer.conv1d.weight", true, K::Conv},
        {"ssm_conv1d.bias", "mixer.conv1d.bias", true, K::ConvBias},
        {"ssm_a", "mixer.A", true, K::A},
        {"ssm_d", "mixer.D", true, K::D},
        {"ssm_out.weight", "mixer.out_proj.weight", true, K::OutProj},
        {"ssm_out.bias", "mixer.out_proj.bias", true, K::OutProjBias},
    };
    roles.insert(roles.end(), own.begin(), own.end());
    return roles;
  };
  static const std::vector<GgufTensorRole> mamba1 = with_shared({
      {"ssm_x.weight", "mixer.x_proj.weight", true, K::XProj},
      {"ssm_dt.weight", "mixer.dt_proj.weight", true, K::DtProj},
      {"ssm_dt.bias", "mixer.dt_proj.bias", true, K::DtBias},
  });
  static const std::vector<GgufTensorRole> mamba2 = with_shared({
      {"ssm_dt.bias", "mixer.dt_bias", true, K::DtBias},
      {"ssm_norm.weight", "mixer.norm.weight", true, K::GateNorm},
  });
  switch (arch) {
    case Architecture::Mamba1:
      return mamba1;
    case Architecture::Mamba2:
      return mamba2;
    case Architecture::Mamba3:
      break;
  }
  throw Error("Mamba-3 has no GGUF architecture (llama.cpp defines mamba and mamba2 only)");
}

const GgufTensorRole* find_gguf_role(const std::vector<GgufTensorRole>& roles, const std::string& gguf_suffix,
                                     bool per_layer) {
  for (const GgufTensorRole& role : roles)
    if (role.per_layer == per_layer && gguf_suffix == role.gguf) return &role;
  return nullptr;
}

bool gguf_role_wanted(const GgufTensorRole& role, const ModelConfig& c) {
  switch (role.kind) {
    case GgufTensorKind::LmHead:
      return !c.tie_embeddings;
    case GgufTensorKind::InProjBias:
    case GgufTensorKind::OutProjBias:
      return c.use_bias;
    case GgufTensorKind::ConvBias:
      return c.use_conv_bias;
    case GgufTensorKind::GateNorm:
      return c.arch == Architecture::Mamba2 && c.gated_norm;
    default:
      return true;
  }
}

std::vector<int64_t> gguf_role_hf_shape(const GgufTensorRole& role, const ModelConfig& c) {
  const int64_t d = c.d_model, di = c.d_inner, N = c.d_state, K = c.d_conv, V = c.vocab_rows;
  const bool mamba2 = c.arch == Architecture::Mamba2;
  const int64_t H = mamba2 ? c.n_heads() : 0;
  // Mamba-2's conv runs over x | B | C and its in_proj adds z and dt (see mamba2.h).
  const int64_t conv_width = mamba2 ? di + 2 * c.ngroups * N : di;
  const int64_t in_proj_rows = mamba2 ? di + conv_width + H : 2 * di;
  switch (role.kind) {
    case GgufTensorKind::Embedding:
    case GgufTensorKind::LmHead:
      return {V, d};
    case GgufTensorKind::FinalNorm:
    case GgufTensorKind::Norm:
    case GgufTensorKind::OutProjBias:
      return {d};
    case GgufTensorKind::InProj:
      return {in_proj_rows, d};
    case GgufTensorKind::InProjBias:
      return {in_proj_rows};
    case GgufTensorKind::Conv:
      return {conv_width, 1, K};
    case GgufTensorKind::ConvBias:
      return {conv_width};
    case GgufTensorKind::XProj:
      return {c.dt_rank + 2 * N, di};
    case GgufTensorKind::DtProj:
      return {di, c.dt_rank};
    case GgufTensorKind::DtBias:
      return {mamba2 ? H : di};
    case GgufTensorKind::A:
      return mamba2 ? std::vector<int64_t>{H} : std::vector<int64_t>{di, N};
    case GgufTensorKind::D:
      return {mamba2 ? H : di};
    case GgufTensorKind::GateNorm:
      return {di};
    case GgufTensorKind::OutProj:
      return {d, di};
  }
  return {};
}

std::vector<int64_t> gguf_role_dims(const GgufTensorRole& role, const ModelConfig& c) {
  std::vector<int64_t> shape = gguf_role_hf_shape(role, c);
  const bool mamba2 = c.arch == Architecture::Mamba2;
  // llama.cpp's converter squeezes the conv weight, gives Mamba-2's A and D a trailing unit dim
  // and splits Mamba-2's norm weight by group.
  if (role.kind == GgufTensorKind::Conv) shape = {shape[0], shape[2]};
  if (mamba2 && (role.kind == GgufTensorKind::A || role.kind == GgufTensorKind::D)) shape.push_back(1);
  if (role.kind == GgufTensorKind::GateNorm) shape = {c.ngroups, c.d_inner / c.ngroups};
  std::reverse(shape.begin(), shape.end());
  return shape;
}

}  // namespace mb
