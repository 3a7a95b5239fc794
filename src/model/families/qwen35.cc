// SPDX-License-Identifier: MIT
// Qwen3.5 / Qwen3.6 dense: HF `qwen3_5` (the vision-language checkpoints: a text_config beside a
// vision_config, tensors under model.language_model.) and `qwen3_5_text` (flat, model.), read as
// transformers' Qwen3_5TextConfig reads them (../shared/specs/gated-deltanet.md section 1.3).
//
// Layers: `layer_types` ("linear_attention" / "full_attention"), else full attention where
// (i + 1) % full_attention_interval == 0. RoPE: `rope_parameters` (transformers v5: rope_theta,
// partial_rotary_factor, mrope_section, rope_type "default") or the older top-level rope_theta,
// partial_rotary_factor and rope_scaling {"type": "mrope"}; other rope types are refused. For
// text the multi-section RoPE is plain partial NeoX RoPE (all three position streams are the
// token's position): rot = int(head_dim * partial_rotary_factor) channels. head_dim is explicit
// (not hidden / heads). attn_output_gate false is refused (every released model gates).
//
// Not run: the vision tower (model.visual.*: the model loads its text model, and images are not
// supported) and the multi-token-prediction layer (mtp.*, kept in the file for the speculative
// decoding that may follow; refuse_unread_tensors skips both).
#include "model/families/qwen35.h"

#include "model/families/qwen35_gguf.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/json_text.h"
#include "io/gguf.h"
#include "model/config_reader.h"
#include "model/family.h"
#include "ops/causal_conv.h"

namespace mb {
namespace {

using nlohmann::json;

constexpr double kQwen35MinPositive = std::numeric_limits<double>::min();

std::vector<ConfigKey> qwen35_keys() {
  const KeyEffect state = KeyEffect::State;
  return {
      int_key(
          "hidden_size", "embedding_length", [](ModelConfig& c) -> KeyField { return &c.d_model; },
          std::nullopt, 1, kMaxDModel, state),
      int_key(
          "num_hidden_layers", "block_count", [](ModelConfig& c) -> KeyField { return &c.n_layer; },
          std::nullopt, 1, kMaxLayers, state),
      int_key(
          "vocab_size", "", [](ModelConfig& c) -> KeyField { return &c.vocab_size; }, std::nullopt, 1,
          kMaxVocab),
      number_key(
          "rms_norm_eps", "attention.layer_norm_rms_epsilon",
          [](ModelConfig& c) -> KeyField { return &c.norm_eps; }, 1e-6, kQwen35MinPositive, 1),
      bool_key(
          "tie_word_embeddings", "", [](ModelConfig& c) -> KeyField { return &c.tie_embeddings; }, false),
      int_key(
          "num_attention_heads", "attention.head_count",
          [](ModelConfig& c) -> KeyField { return &c.hybrid.attention.n_heads; }, std::nullopt, 1, 1 << 12,
          state),
      int_key(
          "num_key_value_heads", "attention.head_count_kv",
          [](ModelConfig& c) -> KeyField { return &c.hybrid.attention.n_kv_heads; }, std::nullopt, 1, 1 << 12,
          state),
      int_key(
          "head_dim", "attention.key_length",
          [](ModelConfig& c) -> KeyField { return &c.hybrid.attention.head_dim; }, std::nullopt, 2, 1 << 12,
          state),
      int_key(
          "intermediate_size", "feed_forward_length",
          [](ModelConfig& c) -> KeyField { return &c.hybrid.mlp.width; }, std::nullopt, 1, kMaxDModel * 16,
          state),
      // rope_parameters (v5) overrides these two in parse_extra.
      number_key(
          "rope_theta", "rope.freq_base",
          [](ModelConfig& c) -> KeyField { return &c.hybrid.attention.rope_theta; }, 1e7, kQwen35MinPositive,
          1e300),
      number_key(
          "partial_rotary_factor", "",
          [](ModelConfig& c) -> KeyField { return &c.hybrid.attention.partial_rotary_factor; }, 0.25,
          kQwen35MinPositive, 1),
      int_key(
          "linear_num_key_heads", "ssm.group_count",
          [](ModelConfig& c) -> KeyField { return &c.qwen35.n_key_heads; }, std::nullopt, 1, 1 << 12, state),
      int_key(
          "linear_num_value_heads", "ssm.time_step_rank",
          [](ModelConfig& c) -> KeyField { return &c.qwen35.n_value_heads; }, std::nullopt, 1, 1 << 12,
          state),
      int_key(
          "linear_key_head_dim", "ssm.state_size",
          [](ModelConfig& c) -> KeyField { return &c.qwen35.key_dim; }, std::nullopt, 1, 1 << 12, state),
      // GGUF: ssm.inner_size / ssm.time_step_rank (gguf_extra).
      int_key(
          "linear_value_head_dim", "", [](ModelConfig& c) -> KeyField { return &c.qwen35.value_dim; },
          std::nullopt, 1, 1 << 12, state),
      int_key(
          "linear_conv_kernel_dim", "ssm.conv_kernel",
          [](ModelConfig& c) -> KeyField { return &c.qwen35.conv_kernel; }, 4, 1, kMaxConvKernel, state),
      int_key(
          "full_attention_interval", "full_attention_interval",
          [](ModelConfig& c) -> KeyField { return &c.qwen35.full_attention_interval; }, 4, 1, kMaxLayers,
          state),
      bool_key(
          "attn_output_gate", "", [](ModelConfig& c) -> KeyField { return &c.qwen35.attn_output_gate; }, true)
          .only_default("every released Qwen3.5 gates its attention output, the only form mambacpp runs"),
      int_key(
          "mtp_num_hidden_layers", "", [](ModelConfig& c) -> KeyField { return &c.qwen35.mtp_layers; }, 0, 0,
          16, KeyEffect::None),
      int_key(
          "max_position_embeddings", "context_length",
          [](ModelConfig& c) -> KeyField { return &c.qwen35.max_positions; }, 262144, 1, 1 << 30,
          KeyEffect::None),
  };
}

// layer_types, else full attention every full_attention_interval-th layer.
std::string qwen35_pattern(const ConfigReader& reader, const ModelConfig& c) {
  std::string pattern(static_cast<size_t>(c.n_layer), kGatedDeltaNetLayer);
  if (!reader.has("layer_types")) {
    for (int64_t l = 0; l < c.n_layer; ++l)
      if ((l + 1) % c.qwen35.full_attention_interval == 0) pattern[static_cast<size_t>(l)] = kAttentionLayer;
    return pattern;
  }
  const json& types = reader.at("layer_types");
  if (!types.is_array() || static_cast<int64_t>(types.size()) != c.n_layer)
    throw Error(reader.where() + ": 'layer_types' must be a list of " + std::to_string(c.n_layer) +
                " strings (num_hidden_layers), got " + json_excerpt(types));
  for (size_t l = 0; l < types.size(); ++l) {
    const std::string type = types[l].is_string() ? types[l].get<std::string>() : "";
    if (type != "linear_attention" && type != "full_attention")
      throw Error(reader.where() + ": 'layer_types'[" + std::to_string(l) +
                  "] must be \"linear_attention\" or \"full_attention\", got " + json_excerpt(types[l]));
    pattern[l] = type == "full_attention" ? kAttentionLayer : kGatedDeltaNetLayer;
  }
  return pattern;
}

// The RoPE of rope_parameters or of the older rope_scaling: "default" and "mrope" are plain partial
// RoPE for text; anything else (YaRN, ...) is refused.
void parse_qwen35_rope(const ConfigReader& reader, AttentionConfig& a) {
  for (const char* key : {"rope_scaling", "rope_parameters"}) {
    if (!reader.has(key)) continue;
    const json& rope = reader.at(key);
    const std::string where = reader.where() + ": '" + key + "'";
    if (!rope.is_object()) throw Error(where + " must be an object, got " + json_excerpt(rope));
    for (const char* type_key : {"rope_type", "type"}) {
      if (!rope.contains(type_key)) continue;
      const json& type = rope[type_key];
      if (type != "default" && type != "mrope")
        throw Error(where + "." + type_key + " " + json_excerpt(type) +
                    " is not supported (only the default and the text use of the multi-section RoPE)");
    }
    if (rope.contains("rope_theta"))
      a.rope_theta = reader.number_value(rope["rope_theta"], std::string(key) + ".rope_theta");
    if (rope.contains("partial_rotary_factor"))
      a.partial_rotary_factor =
          reader.number_value(rope["partial_rotary_factor"], std::string(key) + ".partial_rotary_factor");
  }
  if (!std::isfinite(a.rope_theta) || a.rope_theta <= 0.0)
    throw Error(reader.where() + ": the RoPE theta must be a positive number, got " +
                std::to_string(a.rope_theta));
}

void parse_qwen35_extra(const ConfigReader& reader, ModelConfig& c) {
  c.family = ModelFamily::Qwen35;
  c.arch = Architecture::Mamba2;  // unused: Qwen3.5 has no Mamba mixer
  c.hybrid.pattern = qwen35_pattern(reader, c);
  AttentionConfig& a = c.hybrid.attention;
  parse_qwen35_rope(reader, a);
  a.scale = 1.0 / std::sqrt(static_cast<double>(a.head_dim));
  c.hybrid.mlp.activation = Activation::SwiGlu;
  c.hybrid.mlp.separate_gate = true;
  c.qwen35.prefix = reader.string_or("model_type", "") == "qwen3_5" ? "model.language_model." : "model.";
}

void validate_qwen35(const ModelConfig& c, const std::string& where) {
  const AttentionConfig& a = c.hybrid.attention;
  const Qwen35Config& q = c.qwen35;
  if (a.n_heads % a.n_kv_heads != 0)
    throw Error(where + ": num_attention_heads " + std::to_string(a.n_heads) +
                " is not a multiple of num_key_value_heads " + std::to_string(a.n_kv_heads));
  const int64_t rot = static_cast<int64_t>(static_cast<double>(a.head_dim) * a.partial_rotary_factor);
  if (rot < 2 || rot % 2 != 0)
    throw Error(where + ": head_dim " + std::to_string(a.head_dim) + " times partial_rotary_factor " +
                std::to_string(a.partial_rotary_factor) + " must be an even number of rotated channels");
  if (q.n_value_heads % q.n_key_heads != 0)
    throw Error(where + ": linear_num_value_heads " + std::to_string(q.n_value_heads) +
                " is not a multiple of linear_num_key_heads " + std::to_string(q.n_key_heads));
  if (static_cast<int64_t>(c.hybrid.pattern.size()) != c.n_layer)
    throw Error(where + ": the layer pattern has " + std::to_string(c.hybrid.pattern.size()) +
                " layers, not " + std::to_string(c.n_layer));
}

std::vector<BlockSpec> qwen35_blocks(const ModelConfig& c) {
  std::vector<BlockSpec> list;
  for (int64_t l = 0; l < c.n_layer; ++l) {
    const std::string prefix = c.qwen35.prefix + "layers." + std::to_string(l) + ".";
    const bool gdn = c.hybrid.pattern[static_cast<size_t>(l)] == kGatedDeltaNetLayer;
    list.push_back(
        {gdn ? BlockKind::GatedDeltaNet : BlockKind::GatedAttention,
         l,
         {prefix, gdn ? "linear_attn." : "self_attn.", "input_layernorm.weight", "attn_norm.weight"}});
    list.push_back({BlockKind::Mlp,
                    l,
                    {prefix, "mlp.", "post_attention_layernorm.weight", "post_attention_norm.weight"}});
  }
  return list;
}

json qwen35_layer_types(const ModelConfig& c) {
  json types = json::array();
  for (const char layer : c.hybrid.pattern)
    types.push_back(layer == kGatedDeltaNetLayer ? "linear_attention" : "full_attention");
  return types;
}

std::string qwen35_meta(const GgufFile& file, const std::string& arch, const std::string& key) {
  return "'" + file.path() + "': metadata '" + arch + "." + key + "'";
}

// What the declared keys cannot say: the layers without the MTP block (block_count counts it),
// the value head size (inner size / value heads), the rotated fraction of a head.
void qwen35_gguf_extra(const GgufFile& file, const std::string& arch, json& hf) {
  const auto size = [&](const std::string& key) {
    const std::optional<uint64_t> v = file.unsigned_if_present(arch + "." + key);
    if (!v) throw Error(qwen35_meta(file, arch, key) + " is missing");
    return static_cast<int64_t>(*v);
  };
  const int64_t blocks = size("block_count");
  const int64_t mtp =
      static_cast<int64_t>(file.unsigned_if_present(arch + ".nextn_predict_layers").value_or(0));
  if (mtp >= blocks)
    throw Error(qwen35_meta(file, arch, "nextn_predict_layers") + " = " + std::to_string(mtp) +
                " leaves no layer of block_count " + std::to_string(blocks));
  hf["num_hidden_layers"] = blocks - mtp;
  hf["mtp_num_hidden_layers"] = mtp;
  const int64_t inner = size("ssm.inner_size"), value_heads = size("ssm.time_step_rank");
  if (value_heads < 1 || inner % value_heads != 0)
    throw Error(qwen35_meta(file, arch, "ssm.inner_size") + " = " + std::to_string(inner) +
                " is not a multiple of ssm.time_step_rank " + std::to_string(value_heads));
  hf["linear_value_head_dim"] = inner / value_heads;
  const int64_t head_dim = size("attention.key_length"), rotated = size("rope.dimension_count");
  if (const std::optional<uint64_t> v = file.unsigned_if_present(arch + ".attention.value_length");
      v && static_cast<int64_t>(*v) != head_dim)
    throw Error(qwen35_meta(file, arch, "attention.value_length") + " must equal attention.key_length");
  if (rotated < 2 || rotated > head_dim || rotated % 2 != 0)
    throw Error(qwen35_meta(file, arch, "rope.dimension_count") + " = " + std::to_string(rotated) +
                " must be even, from 2 to attention.key_length " + std::to_string(head_dim));
  hf["partial_rotary_factor"] = static_cast<double>(rotated) / static_cast<double>(head_dim);
}

void write_qwen35_gguf_extra(GgufWriter& writer, const ModelConfig& c, const std::string& arch) {
  const auto key = [&](const std::string& name) { return arch + "." + name; };
  const int64_t rotated = static_cast<int64_t>(static_cast<double>(c.hybrid.attention.head_dim) *
                                               c.hybrid.attention.partial_rotary_factor);
  writer.set(key("ssm.inner_size"),
             GgufValue::u32(static_cast<uint32_t>(c.qwen35.n_value_heads * c.qwen35.value_dim)));
  writer.set(key("attention.value_length"),
             GgufValue::u32(static_cast<uint32_t>(c.hybrid.attention.head_dim)));
  writer.set(key("rope.dimension_count"), GgufValue::u32(static_cast<uint32_t>(rotated)));
  // Every pair in the first (temporal) section: a text position rotates all of them, as the
  // multi-section RoPE does for text.
  writer.set(key("rope.dimension_sections"),
             GgufValue::integer_array(GgufType::Int32, {rotated / 2, 0, 0, 0}));
  // The MTP layer is not written (the engine skips it).
  writer.set(key("nextn_predict_layers"), GgufValue::u32(0));
}

// llama.cpp's qwen35 has no per-layer type list (only the interval) and needs dk == dv.
void check_qwen35_gguf(const ModelConfig& c) {
  for (int64_t l = 0; l < c.n_layer; ++l) {
    const bool full = (l + 1) % c.qwen35.full_attention_interval == 0;
    if (full != (c.hybrid.pattern[static_cast<size_t>(l)] == kAttentionLayer))
      throw Error("layer_types is not every full_attention_interval-th layer full attention (layer " +
                  std::to_string(l) + "), which llama.cpp's qwen35 GGUF layout cannot say");
  }
  if (c.qwen35.key_dim != c.qwen35.value_dim)
    throw Error("linear_key_head_dim " + std::to_string(c.qwen35.key_dim) +
                " differs from linear_value_head_dim " + std::to_string(c.qwen35.value_dim) +
                ", which llama.cpp's qwen35 GGUF layout cannot hold");
}

Family make_qwen35() {
  Family f;
  f.name = "qwen3.5";
  f.id = ModelFamily::Qwen35;
  f.model_types = {"qwen3_5_text", "qwen3_5"};
  f.gguf_archs = {"qwen35"};
  f.keys = qwen35_keys();
  f.parse_extra = parse_qwen35_extra;
  f.validate = validate_qwen35;
  f.blocks = qwen35_blocks;
  f.gguf_arch = [](const ModelConfig&) { return std::string("qwen35"); };
  f.gguf_extra = qwen35_gguf_extra;
  f.write_gguf_extra = write_qwen35_gguf_extra;
  f.check_gguf = check_qwen35_gguf;
  f.hf_extra = [](const ModelConfig& c, json& hf) {
    hf["architectures"] = {"Qwen3_5ForCausalLM"};
    hf["layer_types"] = qwen35_layer_types(c);
    hf["torch_dtype"] = "float32";
    // Not a Hugging Face key: only a GGUF file's config has it, so its fingerprint says the order.
    if (c.qwen35.tiled_heads) hf["gguf_value_head_order"] = "tiled";
  };
  // Two key heads of 16 and four value heads (nk < nv, so the head mapping matters), attention
  // heads of 16 rotating a quarter of each, full attention every fourth layer.
  f.example = [](int64_t d_model, int64_t n_layer, int64_t vocab) {
    const int64_t heads = d_model % 32 == 0 ? d_model / 16 : 2;
    return json{{"model_type", "qwen3_5_text"},
                {"hidden_size", d_model},
                {"num_hidden_layers", n_layer},
                {"vocab_size", vocab},
                {"intermediate_size", 3 * d_model / 2},
                {"num_attention_heads", heads},
                {"num_key_value_heads", heads % 2 == 0 ? heads / 2 : heads},
                {"head_dim", 16},
                {"linear_num_key_heads", 2},
                {"linear_num_value_heads", 4},
                {"linear_key_head_dim", 16},
                {"linear_value_head_dim", 16},
                {"linear_conv_kernel_dim", 4},
                {"full_attention_interval", 4},
                {"partial_rotary_factor", 0.25}};
  };
  return f;
}

}  // namespace

std::optional<json> qwen35_text_config(const json& config) {
  if (!config.is_object() || !config.contains("text_config") || config.value("model_type", "") != "qwen3_5")
    return std::nullopt;
  const json& text = config["text_config"];
  if (!text.is_object()) return std::nullopt;
  json flat = text;
  flat["model_type"] = "qwen3_5";
  if (config.contains("tie_word_embeddings")) flat["tie_word_embeddings"] = config["tie_word_embeddings"];
  return flat;
}

bool qwen35_tile_value_heads(const ModelConfig& c, const TensorSpec& spec, std::vector<float>& values) {
  const Qwen35Config& q = c.qwen35;
  if (c.family != ModelFamily::Qwen35 || q.tiled_heads || q.n_value_heads == q.n_key_heads) return false;
  const std::string& name = spec.name;
  const size_t at = name.rfind("linear_attn.");
  if (at == std::string::npos) return false;
  const std::string tensor = name.substr(at + 12);
  // Per tensor: the first value-head row (or column), the rows (columns) per head, whether the
  // heads are columns, and the floats per row.
  const int64_t nk = q.n_key_heads, nv = q.n_value_heads, dv = q.value_dim, r = nv / nk;
  const int64_t qk = 2 * nk * q.key_dim;
  int64_t first = 0, unit = 1, row = 1;
  bool columns = false;
  if (tensor == "in_proj_qkv.weight") {
    first = qk, unit = dv, row = c.d_model;
  } else if (tensor == "in_proj_z.weight") {
    unit = dv, row = c.d_model;
  } else if (tensor == "in_proj_b.weight" || tensor == "in_proj_a.weight") {
    row = c.d_model;
  } else if (tensor == "A_log" || tensor == "A" || tensor == "dt_bias") {
  } else if (tensor == "conv1d.weight") {
    first = qk, unit = dv, row = q.conv_kernel;
  } else if (tensor == "out_proj.weight") {
    unit = dv, row = nv * dv, columns = true;
  } else {
    return false;
  }
  const std::vector<float> grouped = values;
  const int64_t n_rows = static_cast<int64_t>(values.size()) / row;
  for (int64_t h = 0; h < nv; ++h) {
    const int64_t from = (h % nk) * r + h / nk;  // tiled head h holds grouped head g r + j, h = j nk + g
    for (int64_t i = 0; i < unit; ++i) {
      if (columns) {
        for (int64_t y = 0; y < n_rows; ++y)
          values[static_cast<size_t>(y * row + h * unit + i)] =
              grouped[static_cast<size_t>(y * row + from * unit + i)];
      } else {
        std::copy_n(grouped.begin() + (first + from * unit + i) * row, row,
                    values.begin() + (first + h * unit + i) * row);
      }
    }
  }
  return true;
}

bool qwen35_is_mtp_layer(const ModelConfig& c, int64_t layer) {
  return c.family == ModelFamily::Qwen35 && layer >= c.n_layer && layer < c.n_layer + c.qwen35.mtp_layers;
}

const Family& qwen35_family() {
  static const Family family = make_qwen35();
  return family;
}

}  // namespace mb
