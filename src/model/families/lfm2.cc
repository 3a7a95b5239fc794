// SPDX-License-Identifier: MIT
// LiquidAI's LFM2 (`lfm2`, llama.cpp `lfm2`) and LFM2-MoE (`lfm2_moe`, llama.cpp `lfm2moe`), read as
// transformers' Lfm2Config and Lfm2MoeConfig read them (../shared/specs/hybrids-2.md section 2).
//
// Config aliases, as Lfm2Config.__init__ resolves them: `block_ff_dim` wins over
// `intermediate_size`, `tie_embedding` over `tie_word_embeddings`, `theta` over `rope_theta` (and
// rope_parameters.rope_theta, LFM2.5's spelling, over rope_theta), and `layer_types` over
// `full_attn_idxs` (neither: every layer attends). The dense FFN width is derived as Lfm2MLP does:
// block_ff_dim, times 2/3 when block_auto_adjust_ff_dim, then times block_ffn_dim_multiplier and
// rounded up to block_multiple_of (HF rounds only inside the multiplier branch; llama.cpp's
// converter always rounds: the same for every released config). LFM2-MoE's dense layers use
// intermediate_size as given.
//
// GGUF: attention.head_count_kv is a per-layer array (0 for a conv layer), which gives the layer
// pattern; feed_forward_length is the rounded width. llama.cpp's lfm2moe converter writes neither
// routed_scaling_factor nor norm_topk_prob (llama.cpp always renormalizes and never scales); we
// follow HF, read them where present and write them (lfm2moe.expert_weights_scale and
// lfm2moe.expert_weights_norm, the names llama.cpp's other MoE archs use), defaulting to the
// released values (1.0, true) when absent.
#include "model/families/lfm2.h"

#include "ops/short_conv.h"

#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/json_text.h"
#include "io/gguf.h"
#include "model/config_reader.h"
#include "model/family.h"

namespace mb {
namespace {

using nlohmann::json;

// The lower bound of a Number key that must be positive (the bounds are inclusive).
constexpr double kLfm2MinPositive = std::numeric_limits<double>::min();

// The keys both families read.
std::vector<ConfigKey> lfm2_common_keys() {
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
          "norm_eps", "attention.layer_norm_rms_epsilon",
          [](ModelConfig& c) -> KeyField { return &c.norm_eps; }, 1e-5, kLfm2MinPositive, 1),
      bool_key(
          "tie_embedding", "", [](ModelConfig& c) -> KeyField { return &c.tie_embeddings; }, true)
          .aka({"tie_word_embeddings"}),
      int_key(
          "num_attention_heads", "attention.head_count",
          [](ModelConfig& c) -> KeyField { return &c.hybrid.attention.n_heads; }, std::nullopt, 1, 1 << 12,
          state),
      // GGUF: a per-layer array (gguf_extra).
      int_key(
          "num_key_value_heads", "",
          [](ModelConfig& c) -> KeyField { return &c.hybrid.attention.n_kv_heads; }, std::nullopt, 1, 1 << 12,
          state),
      // theta and rope_parameters.rope_theta are read by parse_extra.
      number_key(
          "rope_theta", "rope.freq_base",
          [](ModelConfig& c) -> KeyField { return &c.hybrid.attention.rope_theta; }, 1e6, kLfm2MinPositive,
          1e300),
      int_key(
          "conv_L_cache", "shortconv.l_cache", [](ModelConfig& c) -> KeyField { return &c.lfm2.conv_kernel; },
          3, 2, kMaxShortConvKernel, state),
      bool_key(
          "conv_bias", "", [](ModelConfig& c) -> KeyField { return &c.lfm2.conv_bias; }, false)
          .only_default(
              "every released LFM2 has a short convolution without bias, the only form mambacpp runs"),
      int_key(
          "max_position_embeddings", "context_length",
          [](ModelConfig& c) -> KeyField { return &c.lfm2.max_positions; }, 128000, 1, 1 << 30,
          KeyEffect::None),
  };
}

// Lfm2MLP's width (see the file comment).
int64_t lfm2_ffn_width(const Lfm2Config& l) {
  int64_t ff = l.block_ff_dim;
  if (l.auto_adjust_ff_dim) ff = static_cast<int64_t>(2 * ff / 3);
  ff = static_cast<int64_t>(l.ffn_dim_multiplier * static_cast<double>(ff));
  return l.multiple_of * ((ff + l.multiple_of - 1) / l.multiple_of);
}

// layer_types ("conv" / "full_attention"), else full_attn_idxs, else every layer attends.
std::string lfm2_pattern(const ConfigReader& reader, int64_t n_layer) {
  std::string pattern(static_cast<size_t>(n_layer), kAttentionLayer);
  if (reader.has("layer_types")) {
    const json& types = reader.at("layer_types");
    if (!types.is_array() || static_cast<int64_t>(types.size()) != n_layer)
      throw Error(reader.where() + ": 'layer_types' must be a list of " + std::to_string(n_layer) +
                  " strings (num_hidden_layers), got " + json_excerpt(types));
    for (size_t l = 0; l < types.size(); ++l) {
      const std::string type = types[l].is_string() ? types[l].get<std::string>() : "";
      if (type != "conv" && type != "full_attention")
        throw Error(reader.where() + ": 'layer_types'[" + std::to_string(l) +
                    "] must be \"conv\" or \"full_attention\", got " + json_excerpt(types[l]));
      pattern[l] = type == "conv" ? kShortConvLayer : kAttentionLayer;
    }
    return pattern;
  }
  if (!reader.has("full_attn_idxs")) return pattern;
  const json& idxs = reader.at("full_attn_idxs");
  if (!idxs.is_array())
    throw Error(reader.where() + ": 'full_attn_idxs' must be a list of layer indices, got " +
                json_excerpt(idxs));
  pattern.assign(static_cast<size_t>(n_layer), kShortConvLayer);
  for (const json& index : idxs) {
    if (!index.is_number_integer() || index.get<int64_t>() < 0 || index.get<int64_t>() >= n_layer)
      throw Error(reader.where() + ": 'full_attn_idxs' holds " + json_excerpt(index) +
                  ", not a layer index below " + std::to_string(n_layer));
    pattern[static_cast<size_t>(index.get<int64_t>())] = kAttentionLayer;
  }
  return pattern;
}

// theta (the legacy key, which wins) and LFM2.5's rope_parameters.
void parse_lfm2_rope(const ConfigReader& reader, AttentionConfig& a) {
  if (reader.has("rope_parameters")) {
    const json& rope = reader.at("rope_parameters");
    if (!rope.is_object())
      throw Error(reader.where() + ": 'rope_parameters' must be an object, got " + json_excerpt(rope));
    if (rope.contains("rope_type") && rope["rope_type"] != "default")
      throw Error(reader.where() + ": 'rope_parameters.rope_type' " + json_excerpt(rope["rope_type"]) +
                  " is not supported (only the default RoPE)");
    if (rope.contains("rope_theta"))
      a.rope_theta = reader.number_value(rope["rope_theta"], "rope_parameters.rope_theta");
  }
  if (reader.has("theta")) a.rope_theta = reader.number_value(reader.at("theta"), "theta");
  if (!std::isfinite(a.rope_theta) || a.rope_theta <= 0.0)
    throw Error(reader.where() + ": the RoPE theta must be a positive number, got " +
                std::to_string(a.rope_theta));
}

void parse_lfm2_common(const ConfigReader& reader, ModelConfig& c, ModelFamily family) {
  c.family = family;
  c.arch = Architecture::Mamba2;  // unused: LFM2 has no Mamba mixer
  c.hybrid.pattern = lfm2_pattern(reader, c.n_layer);
  AttentionConfig& a = c.hybrid.attention;
  parse_lfm2_rope(reader, a);
  if (a.n_heads > 0 && c.d_model % a.n_heads == 0) a.head_dim = c.d_model / a.n_heads;
  a.scale = a.head_dim > 0 ? 1.0 / std::sqrt(static_cast<double>(a.head_dim)) : 0.0;
  c.hybrid.mlp.activation = Activation::SwiGlu;
}

void validate_lfm2(const ModelConfig& c, const std::string& where) {
  const AttentionConfig& a = c.hybrid.attention;
  if (c.d_model % a.n_heads != 0 || (c.d_model / a.n_heads) % 2 != 0)
    throw Error(where + ": hidden_size " + std::to_string(c.d_model) + " must be num_attention_heads " +
                std::to_string(a.n_heads) + " times an even head size (RoPE rotates pairs)");
  if (a.n_heads % a.n_kv_heads != 0)
    throw Error(where + ": num_attention_heads " + std::to_string(a.n_heads) +
                " is not a multiple of num_key_value_heads " + std::to_string(a.n_kv_heads));
  if (static_cast<int64_t>(c.hybrid.pattern.size()) != c.n_layer)
    throw Error(where + ": the layer pattern has " + std::to_string(c.hybrid.pattern.size()) +
                " layers, not " + std::to_string(c.n_layer));
  if (c.hybrid.mlp.width < 1)
    throw Error(where + ": the feed-forward width (block_ff_dim / intermediate_size) comes out as " +
                std::to_string(c.hybrid.mlp.width));
  const MoeConfig& e = c.hybrid.moe;
  if (e.n_experts > 0) {
    if (e.top_k > e.n_experts)
      throw Error(where + ": num_experts_per_tok " + std::to_string(e.top_k) + " exceeds num_experts " +
                  std::to_string(e.n_experts));
    if (c.lfm2.n_dense_layers > c.n_layer)
      throw Error(where + ": num_dense_layers " + std::to_string(c.lfm2.n_dense_layers) +
                  " exceeds num_hidden_layers " + std::to_string(c.n_layer));
  }
}

std::vector<BlockSpec> lfm2_blocks(const ModelConfig& c) {
  std::vector<BlockSpec> list;
  for (int64_t l = 0; l < c.n_layer; ++l) {
    const std::string prefix = "model.layers." + std::to_string(l) + ".";
    const bool conv = c.hybrid.pattern[static_cast<size_t>(l)] == kShortConvLayer;
    list.push_back({conv ? BlockKind::ShortConv : BlockKind::Lfm2Attention,
                    l,
                    {prefix, conv ? "conv." : "self_attn.", "operator_norm.weight", "attn_norm.weight"}});
    const bool moe = c.hybrid.moe.n_experts > 0 && l >= c.lfm2.n_dense_layers;
    list.push_back({moe ? BlockKind::Lfm2Moe : BlockKind::Lfm2Mlp,
                    l,
                    {prefix, "feed_forward.", "ffn_norm.weight", "ffn_norm.weight"}});
  }
  return list;
}

// The per-layer head_count_kv array gives the pattern: 0 marks a conv layer.
void lfm2_gguf_extra(const GgufFile& file, const std::string& arch, json& hf) {
  const std::string key = arch + ".attention.head_count_kv";
  const GgufValue* kv = file.find(key);
  if (kv == nullptr) throw Error("'" + file.path() + "': metadata '" + key + "' is missing");
  const int64_t n_layer = static_cast<int64_t>(file.unsigned_value(arch + ".block_count"));
  if (kv->integers.empty() || (kv->is_array() && static_cast<int64_t>(kv->size()) != n_layer))
    throw Error("'" + file.path() + "': metadata '" + key + "' must hold an integer per layer (" +
                std::to_string(n_layer) + ")");
  json types = json::array();
  int64_t heads_kv = 0;
  for (int64_t l = 0; l < n_layer; ++l) {
    const int64_t v = kv->integers[kv->is_array() ? static_cast<size_t>(l) : 0];
    if (v < 0 || v > (1 << 12) || (heads_kv > 0 && v > 0 && v != heads_kv))
      throw Error("'" + file.path() + "': metadata '" + key + "'[" + std::to_string(l) +
                  "] = " + std::to_string(v) +
                  " (every attention layer must have the same positive count, a conv layer 0)");
    if (v > 0) heads_kv = v;
    types.push_back(v > 0 ? "full_attention" : "conv");
  }
  hf["layer_types"] = types;
  hf["num_key_value_heads"] = heads_kv > 0 ? heads_kv : 1;
  hf["tie_embedding"] = file.find_tensor("output.weight") == nullptr;
}

void write_lfm2_kv_array(GgufWriter& writer, const ModelConfig& c, const std::string& arch) {
  std::vector<int64_t> kv;
  for (const char layer : c.hybrid.pattern)
    kv.push_back(layer == kAttentionLayer ? c.hybrid.attention.n_kv_heads : 0);
  writer.set(arch + ".attention.head_count_kv",
             GgufValue::integer_array(GgufType::Int32, kv));  // as gguf-py writes a list
}

json lfm2_layer_types(const ModelConfig& c) {
  json types = json::array();
  for (const char layer : c.hybrid.pattern)
    types.push_back(layer == kShortConvLayer ? "conv" : "full_attention");
  return types;
}

// A small example's attention: heads of 16 where the width allows, half as many KV heads.
void example_heads(int64_t d_model, json& hf) {
  const int64_t hd = d_model % 16 == 0 ? 16 : d_model;
  const int64_t heads = d_model / hd;
  hf["num_attention_heads"] = heads;
  hf["num_key_value_heads"] = heads % 2 == 0 ? heads / 2 : heads;
}

// conv, conv, attention, repeated (the released models' pattern is close to it).
json example_layer_types(int64_t n_layer) {
  json types = json::array();
  for (int64_t l = 0; l < n_layer; ++l) types.push_back(l % 3 == 2 ? "full_attention" : "conv");
  return types;
}

// ---- lfm2 ---------------------------------------------------------------------------------------

Family make_lfm2() {
  Family f;
  f.name = "lfm2";
  f.id = ModelFamily::Lfm2;
  f.model_types = {"lfm2"};
  f.gguf_archs = {"lfm2"};
  f.keys = lfm2_common_keys();
  // The dense FFN width's inputs (the width itself is derived in parse_extra; GGUF's
  // feed_forward_length is the rounded width, written and read by the extra hooks).
  const KeyEffect state = KeyEffect::State;
  f.keys.push_back(int_key(
                       "block_ff_dim", "", [](ModelConfig& c) -> KeyField { return &c.lfm2.block_ff_dim; },
                       12288, 1, kMaxDModel * 16, state)
                       .aka({"intermediate_size"}));
  f.keys.push_back(bool_key(
      "block_auto_adjust_ff_dim", "", [](ModelConfig& c) -> KeyField { return &c.lfm2.auto_adjust_ff_dim; },
      true, state));
  f.keys.push_back(number_key(
      "block_ffn_dim_multiplier", "", [](ModelConfig& c) -> KeyField { return &c.lfm2.ffn_dim_multiplier; },
      1.0, kLfm2MinPositive, 1 << 10, state));
  f.keys.push_back(int_key(
      "block_multiple_of", "", [](ModelConfig& c) -> KeyField { return &c.lfm2.multiple_of; }, 256, 1,
      1 << 16, state));
  f.parse_extra = [](const ConfigReader& reader, ModelConfig& c) {
    parse_lfm2_common(reader, c, ModelFamily::Lfm2);
    c.hybrid.mlp.width = lfm2_ffn_width(c.lfm2);
  };
  f.validate = validate_lfm2;
  f.blocks = lfm2_blocks;
  f.gguf_extra = [](const GgufFile& file, const std::string& arch, json& hf) {
    lfm2_gguf_extra(file, arch, hf);
    // feed_forward_length is the width itself.
    hf["block_ff_dim"] = file.unsigned_value(arch + ".feed_forward_length");
    hf["block_auto_adjust_ff_dim"] = false;
    hf["block_ffn_dim_multiplier"] = 1.0;
    hf["block_multiple_of"] = 1;
  };
  f.write_gguf_extra = [](GgufWriter& writer, const ModelConfig& c, const std::string& arch) {
    write_lfm2_kv_array(writer, c, arch);
    writer.set(arch + ".feed_forward_length", GgufValue::u32(static_cast<uint32_t>(c.hybrid.mlp.width)));
  };
  f.gguf_arch = [](const ModelConfig&) { return std::string("lfm2"); };
  f.hf_extra = [](const ModelConfig& c, json& hf) {
    hf["architectures"] = {"Lfm2ForCausalLM"};
    hf["layer_types"] = lfm2_layer_types(c);
    hf["torch_dtype"] = "float32";
  };
  f.example = [](int64_t d_model, int64_t n_layer, int64_t vocab) {
    json hf = {{"model_type", "lfm2"},
               {"hidden_size", d_model},
               {"num_hidden_layers", n_layer},
               {"vocab_size", vocab},
               {"block_ff_dim", 3 * d_model},
               {"block_multiple_of", 16},
               {"layer_types", example_layer_types(n_layer)}};
    example_heads(d_model, hf);
    return hf;
  };
  return f;
}

// ---- lfm2_moe -----------------------------------------------------------------------------------

Family make_lfm2_moe() {
  Family f;
  f.name = "lfm2-moe";
  f.id = ModelFamily::Lfm2Moe;
  f.model_types = {"lfm2_moe"};
  f.gguf_archs = {"lfm2moe"};
  f.keys = lfm2_common_keys();
  const KeyEffect state = KeyEffect::State;
  const auto add = [&](ConfigKey key) { f.keys.push_back(std::move(key)); };
  add(int_key(
      "intermediate_size", "feed_forward_length",
      [](ModelConfig& c) -> KeyField { return &c.hybrid.mlp.width; }, 7168, 1, kMaxDModel * 16, state));
  add(int_key(
      "moe_intermediate_size", "expert_feed_forward_length",
      [](ModelConfig& c) -> KeyField { return &c.hybrid.moe.width; }, 1792, 1, kMaxDModel * 16, state));
  add(int_key(
      "num_experts", "expert_count", [](ModelConfig& c) -> KeyField { return &c.hybrid.moe.n_experts; }, 32,
      1, 1 << 12, state));
  add(int_key(
      "num_experts_per_tok", "expert_used_count",
      [](ModelConfig& c) -> KeyField { return &c.hybrid.moe.top_k; }, 4, 1, 1 << 12));
  add(int_key(
      "num_dense_layers", "leading_dense_block_count",
      [](ModelConfig& c) -> KeyField { return &c.lfm2.n_dense_layers; }, 2, 0, kMaxLayers, state));
  add(bool_key(
      "norm_topk_prob", "expert_weights_norm",
      [](ModelConfig& c) -> KeyField { return &c.hybrid.moe.normalize; }, true));
  add(bool_key(
      "use_expert_bias", "", [](ModelConfig& c) -> KeyField { return &c.lfm2.expert_bias; }, true, state));
  add(number_key(
      "routed_scaling_factor", "expert_weights_scale",
      [](ModelConfig& c) -> KeyField { return &c.hybrid.moe.scale; }, 1.0, kLfm2MinPositive, 1e6));
  f.parse_extra = [](const ConfigReader& reader, ModelConfig& c) {
    parse_lfm2_common(reader, c, ModelFamily::Lfm2Moe);
    c.hybrid.moe.scoring = MoeScoring::SigmoidBias;
  };
  f.validate = validate_lfm2;
  f.blocks = lfm2_blocks;
  f.gguf_extra = [](const GgufFile& file, const std::string& arch, json& hf) {
    lfm2_gguf_extra(file, arch, hf);
    hf["use_expert_bias"] =
        file.find_tensor("blk." + std::to_string(file.unsigned_value(arch + ".block_count") - 1) +
                         ".exp_probs_b.bias") != nullptr;
    // llama.cpp's lfm2moe gates by sigmoid (expert_gating_func 2), the only routing LFM2-MoE has.
    const std::optional<uint64_t> gating = file.unsigned_if_present(arch + ".expert_gating_func");
    if (gating.has_value() && *gating != 2)
      throw Error("'" + file.path() + "': metadata '" + arch + ".expert_gating_func' = " +
                  std::to_string(*gating) + " is not supported (LFM2-MoE gates by sigmoid, 2)");
  };
  f.write_gguf_extra = [](GgufWriter& writer, const ModelConfig& c, const std::string& arch) {
    write_lfm2_kv_array(writer, c, arch);
    writer.set(arch + ".expert_gating_func", GgufValue::u32(2));
  };
  f.gguf_arch = [](const ModelConfig&) { return std::string("lfm2moe"); };
  f.hf_extra = [](const ModelConfig& c, json& hf) {
    hf["architectures"] = {"Lfm2MoeForCausalLM"};
    hf["layer_types"] = lfm2_layer_types(c);
    hf["torch_dtype"] = "float32";
  };
  f.example = [](int64_t d_model, int64_t n_layer, int64_t vocab) {
    json hf = {{"model_type", "lfm2_moe"},
               {"hidden_size", d_model},
               {"num_hidden_layers", n_layer},
               {"vocab_size", vocab},
               {"intermediate_size", 2 * d_model},
               {"moe_intermediate_size", d_model},
               {"num_experts", 8},
               {"num_experts_per_tok", 2},
               {"num_dense_layers", n_layer > 1 ? 1 : 0},
               {"layer_types", example_layer_types(n_layer)}};
    example_heads(d_model, hf);
    return hf;
  };
  return f;
}

}  // namespace

const Family& lfm2_family() {
  static const Family family = make_lfm2();
  return family;
}

const Family& lfm2_moe_family() {
  static const Family family = make_lfm2_moe();
  return family;
}

}  // namespace mb
