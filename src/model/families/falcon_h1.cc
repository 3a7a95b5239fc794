// SPDX-License-Identifier: MIT
// Falcon-H1 (transformers' FalconH1ForCausalLM, model_type "falcon_h1"; llama.cpp's "falcon-h1"):
// every layer is attention and a Mamba-2 mixer in parallel on one norm, then a SwiGLU MLP, with
// muP multipliers throughout (../shared/specs/hybrids.md, section 4). Its keys are declared once
// here; the blocks are model/blocks/falcon_h1_block.*.
//
// The multipliers are applied at run time and never folded into the weights. llama.cpp's
// converter folds them (a file of its making holds no multiplier keys, so they read as 1 here,
// which computes what llama.cpp computes; with tied embeddings that is its folded embedding
// reused as the head, off by embedding / lm_head multiplier from transformers, which we cannot
// undo from the file). Our GGUF writer keeps the checkpoint's weights as they are and writes the
// multipliers as falcon-h1.* keys of our own (README): so a converted or quantized file computes
// what its folder computes, and a quantized matrix is the folder's matrix quantized.
#include "model/families/falcon_h1.h"

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/json_text.h"
#include "io/gguf.h"
#include "model/config_reader.h"
#include "model/families/families.h"
#include "model/weight_schema.h"

namespace mb {
namespace {

using nlohmann::json;

constexpr double kMaxMultiplier = 1e6;

// Every key transformers' FalconH1Config has that changes what the model computes, with its
// defaults where a key is absent. GGUF names as llama.cpp's converter writes them; the
// multipliers under names of our own (llama.cpp folds them into the weights and writes none, so a
// file of its making reads them as 1).
std::vector<ConfigKey> falcon_h1_keys() {
  using E = KeyEffect;
  const auto multiplier = [](const char* name, std::function<KeyField(ModelConfig&)> field) {
    return number_key(name, name, std::move(field), 1.0, -kMaxMultiplier, kMaxMultiplier);
  };
  return {
      int_key(
          "hidden_size", "embedding_length", [](ModelConfig& c) { return &c.d_model; }, std::nullopt),
      int_key(
          "num_hidden_layers", "block_count", [](ModelConfig& c) { return &c.n_layer; }, std::nullopt, 1,
          1 << 16, E::State),
      int_key(
          "vocab_size", "vocab_size", [](ModelConfig& c) { return &c.vocab_size; }, std::nullopt, 1, 1 << 24),
      number_key(
          "rms_norm_eps", "attention.layer_norm_rms_epsilon", [](ModelConfig& c) { return &c.norm_eps; },
          1e-5, 1e-30, 0.5),
      bool_key(
          "tie_word_embeddings", "", [](ModelConfig& c) { return &c.tie_embeddings; }, false),
      int_key(
          "num_attention_heads", "attention.head_count",
          [](ModelConfig& c) { return &c.hybrid.attention.n_heads; }, std::nullopt, 1, 1 << 12),
      int_key(
          "num_key_value_heads", "attention.head_count_kv",
          [](ModelConfig& c) { return &c.hybrid.attention.n_kv_heads; }, std::nullopt, 1, 1 << 12, E::State),
      // 0: hidden_size / num_attention_heads (parse_falcon_h1_extra), as transformers reads it.
      int_key(
          "head_dim", "attention.key_length", [](ModelConfig& c) { return &c.hybrid.attention.head_dim; }, 0,
          0, 1 << 12, E::State),
      int_key(
          "intermediate_size", "feed_forward_length", [](ModelConfig& c) { return &c.hybrid.mlp.width; },
          std::nullopt),
      number_key(
          "rope_theta", "rope.freq_base", [](ModelConfig& c) { return &c.hybrid.attention.rope_theta; }, 1e11,
          1e-30, 1e300),
      bool_key(
          "attention_bias", "", [](ModelConfig& c) { return &c.hybrid.attention.bias; }, false),
      bool_key(
          "mlp_bias", "", [](ModelConfig& c) { return &c.hybrid.mlp.bias; }, false),
      string_key("hidden_act", "", [](ModelConfig& c) { return &c.falcon.hidden_act; }, "silu", {"silu"}),
      int_key(
          "mamba_d_ssm", "ssm.inner_size", [](ModelConfig& c) { return &c.ssm.d_inner; }, 1024, 1, 1 << 20,
          E::State),
      int_key(
          "mamba_d_state", "ssm.state_size", [](ModelConfig& c) { return &c.ssm.d_state; }, 256, 1, 256,
          E::State),
      int_key(
          "mamba_d_conv", "ssm.conv_kernel", [](ModelConfig& c) { return &c.ssm.d_conv; }, 4, 2, 16,
          E::State),
      int_key(
          "mamba_n_heads", "ssm.time_step_rank", [](ModelConfig& c) { return &c.falcon.mamba_n_heads; }, 128,
          1, 1 << 16, E::State),
      // llama.cpp writes no head size: its loader divides inner_size by time_step_rank, and so
      // does gguf_extra.
      int_key(
          "mamba_d_head", "", [](ModelConfig& c) { return &c.ssm.headdim; }, 64, 1, 1 << 16, E::State),
      // llama.cpp refuses a file without context_length; FalconH1Config's default.
      int_key(
          "max_position_embeddings", "context_length", [](ModelConfig& c) { return &c.falcon.max_positions; },
          8192, 1, 1 << 30, E::None),
      int_key(
          "mamba_n_groups", "ssm.group_count", [](ModelConfig& c) { return &c.ssm.ngroups; }, 1, 1, 1 << 16,
          E::State),
      // The SSD chunk changes no bit of what runs (DEVELOPERS.md: exactness).
      int_key(
          "mamba_chunk_size", "", [](ModelConfig& c) { return &c.ssm.chunk_size; }, 256, 1, 1 << 16, E::None),
      bool_key(
          "mamba_conv_bias", "", [](ModelConfig& c) { return &c.ssm.use_conv_bias; }, true),
      bool_key(
          "mamba_proj_bias", "", [](ModelConfig& c) { return &c.ssm.use_bias; }, false),
      bool_key(
          "projectors_bias", "", [](ModelConfig& c) { return &c.falcon.projectors_bias; }, false),
      bool_key(
          "mamba_rms_norm", "", [](ModelConfig& c) { return &c.falcon.mamba_rms_norm; }, false),
      bool_key(
          "mamba_norm_before_gate", "", [](ModelConfig& c) { return &c.falcon.norm_before_gate; }, true),
      multiplier("embedding_multiplier", [](ModelConfig& c) { return &c.hybrid.embedding_multiplier; }),
      number_key(
          "lm_head_multiplier", "lm_head_multiplier", [](ModelConfig& c) { return &c.falcon.lm_head; }, 1.0,
          1e-30, kMaxMultiplier),
      multiplier("attention_in_multiplier", [](ModelConfig& c) { return &c.falcon.attention_in; }),
      multiplier("attention_out_multiplier", [](ModelConfig& c) { return &c.falcon.attention_out; }),
      multiplier("key_multiplier", [](ModelConfig& c) { return &c.falcon.key; }),
      multiplier("ssm_in_multiplier", [](ModelConfig& c) { return &c.falcon.ssm_in; }),
      multiplier("ssm_out_multiplier", [](ModelConfig& c) { return &c.falcon.ssm_out; }),
      numbers_key(
          "ssm_multipliers", "ssm_multipliers", [](ModelConfig& c) { return &c.falcon.ssm_multipliers; },
          std::vector<double>(5, 1.0)),
      numbers_key(
          "mlp_multipliers", "mlp_multipliers", [](ModelConfig& c) { return &c.falcon.mlp_multipliers; },
          std::vector<double>(2, 1.0)),
  };
}

// transformers' rope_parameters (v5) or rope_scaling (older): only the default, unscaled RoPE.
void parse_falcon_h1_rope(const ConfigReader& reader, ModelConfig& c) {
  if (reader.has("rope_scaling"))
    throw Error(reader.where() + ": 'rope_scaling' = " + json_excerpt(reader.at("rope_scaling")) +
                " is not supported (only unscaled RoPE: null or absent)");
  if (!reader.has("rope_parameters")) return;
  const json& r = reader.at("rope_parameters");
  if (!r.is_object())
    throw Error(reader.where() + ": 'rope_parameters' must be an object, got " + json_excerpt(r));
  for (const auto& [key, value] : r.items()) {
    if (key == "rope_type" && value == "default") continue;
    if (key == "rope_theta" && value.is_number() && value.get<double>() > 0.0) {
      c.hybrid.attention.rope_theta = value.get<double>();
      continue;
    }
    throw Error(reader.where() + ": 'rope_parameters." + key + "' = " + json_excerpt(value) +
                " is not supported (only the default RoPE with a positive rope_theta)");
  }
}

void parse_falcon_h1_extra(const ConfigReader& reader, ModelConfig& c) {
  c.family = ModelFamily::FalconH1;
  c.arch = Architecture::Mamba2;
  AttentionConfig& a = c.hybrid.attention;
  if (a.head_dim == 0) a.head_dim = c.d_model / a.n_heads;
  a.scale = 1.0 / std::sqrt(static_cast<double>(a.head_dim));  // FalconH1Attention: head_dim ** -0.5
  parse_falcon_h1_rope(reader, c);
  c.hybrid.mlp.activation = Activation::SwiGlu;
  // logits * lm_head_multiplier, as the model's logits_scaling (its inverse: the head multiplies
  // by 1 / logits_scaling, which gives back the f32 multiplier).
  c.hybrid.logits_scaling = 1.0 / c.falcon.lm_head;
  MambaMixerConfig& m = c.ssm;
  m.gated_norm = c.falcon.mamba_rms_norm;
  m.expand = 0;
  // transformers clamps dt to time_step_limit, (0, inf) by default: no clamp.
  m.dt_limit_min = 0.0;
  m.dt_limit_max = INFINITY;
  parse_dt_limit(reader, "time_step_limit", m);
}

void validate_falcon_h1(const ModelConfig& c, const std::string& where) {
  const FalconH1Config& f = c.falcon;
  if (f.ssm_multipliers.size() != 5)
    throw Error(where + ": 'ssm_multipliers' must list 5 numbers (z, x, B, C, dt), got " +
                std::to_string(f.ssm_multipliers.size()));
  if (f.mlp_multipliers.size() != 2)
    throw Error(where + ": 'mlp_multipliers' must list 2 numbers (gate, down), got " +
                std::to_string(f.mlp_multipliers.size()));
  if (f.mamba_n_heads * c.ssm.headdim != c.ssm.d_inner)
    throw Error(where + ": mamba_n_heads x mamba_d_head = " + std::to_string(f.mamba_n_heads) + " x " +
                std::to_string(c.ssm.headdim) + " must equal mamba_d_ssm = " + std::to_string(c.ssm.d_inner));
  if (c.ssm.d_inner % c.ssm.ngroups != 0 || f.mamba_n_heads % c.ssm.ngroups != 0)
    throw Error(where + ": mamba_n_groups = " + std::to_string(c.ssm.ngroups) +
                " must divide mamba_n_heads and mamba_d_ssm");
  if (c.hybrid.attention.head_dim < 2 || c.hybrid.attention.head_dim % 2 != 0)
    throw Error(where + ": RoPE needs an even attention head size, got 'head_dim' = " +
                std::to_string(c.hybrid.attention.head_dim));
  validate_hybrid(c, where);
}

std::vector<BlockSpec> falcon_h1_blocks(const ModelConfig& c) {
  std::vector<BlockSpec> list;
  for (int64_t l = 0; l < c.n_layer; ++l) {
    const std::string prefix = "model.layers." + std::to_string(l) + ".";
    list.push_back({BlockKind::FalconH1Mixer, l, {prefix, "", "input_layernorm.weight", "attn_norm.weight"}});
    list.push_back(
        {BlockKind::FalconH1Mlp, l, {prefix, "feed_forward.", "pre_ff_layernorm.weight", "ffn_norm"}});
  }
  return list;
}

// What transformers' loader needs beyond the declared keys.
void falcon_h1_hf_extra(const ModelConfig&, json& hf) {
  hf["architectures"] = {"FalconH1ForCausalLM"};
  hf["mamba_expand"] = 2;  // unused with mamba_d_ssm set
  hf["rope_scaling"] = nullptr;
}

// A small Falcon-H1 with every multiplier away from 1, two groups, a head size of its own and
// mamba_d_ssm != 2 x hidden: make-model --arch falcon-h1 (its --set flags override any key).
json falcon_h1_example(int64_t d_model, int64_t n_layer, int64_t vocab) {
  const int64_t heads = 4, head_dim = std::max<int64_t>(2, (d_model / heads + 1) / 2 * 2);
  return {{"model_type", "falcon_h1"},
          {"hidden_size", d_model},
          {"num_hidden_layers", n_layer},
          {"vocab_size", vocab},
          {"num_attention_heads", heads},
          {"num_key_value_heads", 2},
          {"head_dim", head_dim},
          {"intermediate_size", 3 * d_model / 2},
          {"rope_theta", 1e11},
          {"mamba_d_ssm", 6 * 16},
          {"mamba_n_heads", 6},
          {"mamba_d_head", 16},
          {"mamba_n_groups", 2},
          {"mamba_d_state", 16},
          {"mamba_d_conv", 4},
          {"mamba_chunk_size", 32},
          {"mamba_rms_norm", true},
          {"mamba_norm_before_gate", false},
          {"tie_word_embeddings", false},
          {"embedding_multiplier", 4.0},
          {"lm_head_multiplier", 0.125},
          {"attention_in_multiplier", 0.8},
          {"attention_out_multiplier", 0.9375},
          {"key_multiplier", 0.390625},
          {"ssm_in_multiplier", 1.25},
          {"ssm_out_multiplier", 0.7},
          {"ssm_multipliers", {0.3535533905932738, 0.5, 0.6, 1.4, 0.75}},
          {"mlp_multipliers", {0.8838834764831844, 0.5859375}}};
}

// What llama.cpp's converter does not write as keys: the Mamba head size (its loader divides
// inner_size by time_step_rank), the biases and the gated norm (told by their tensors; a tied head,
// the vocabulary and EOS the engine reads for every family). llama.cpp always gates before the
// norm; our own files say otherwise with falcon-h1.ssm.norm_before_gate.
void falcon_h1_gguf_extra(const GgufFile& file, const std::string& arch, json& hf) {
  const std::string inner_key = arch + ".ssm.inner_size", heads_key = arch + ".ssm.time_step_rank";
  const uint64_t inner = file.unsigned_value(inner_key), heads = file.unsigned_value(heads_key);
  if (heads == 0 || inner % heads != 0)
    throw Error("'" + file.path() + "': '" + heads_key + "' = " + std::to_string(heads) + " must divide '" +
                inner_key + "' = " + std::to_string(inner));
  hf["mamba_d_head"] = inner / heads;
  const std::string key_length = arch + ".attention.key_length",
                    value_length = arch + ".attention.value_length";
  const std::optional<uint64_t> k = file.unsigned_if_present(key_length),
                                v = file.unsigned_if_present(value_length);
  if (k && v && *k != *v)
    throw Error("'" + file.path() + "': '" + value_length + "' = " + std::to_string(*v) + " must equal '" +
                key_length + "' = " + std::to_string(*k) + " (Falcon-H1 has one head size)");
  const auto has = [&](const char* name) { return file.find_tensor(name) != nullptr; };
  hf["attention_bias"] = has("blk.0.attn_q.bias");
  hf["mlp_bias"] = has("blk.0.ffn_up.bias");
  hf["mamba_proj_bias"] = has("blk.0.ssm_in.bias");
  hf["projectors_bias"] = has("blk.0.ssm_out.bias");
  hf["mamba_conv_bias"] = has("blk.0.ssm_conv1d.bias");
  hf["mamba_rms_norm"] = has("blk.0.ssm_norm.weight");
  hf["mamba_norm_before_gate"] = file.bool_if_present(arch + ".ssm.norm_before_gate").value_or(false);
}

void falcon_h1_write_gguf_extra(GgufWriter& writer, const ModelConfig& c, const std::string& arch) {
  writer.set(arch + ".attention.value_length",
             GgufValue::u32(static_cast<uint32_t>(c.hybrid.attention.head_dim)));
  if (c.falcon.mamba_rms_norm)
    writer.set(arch + ".ssm.norm_before_gate", GgufValue::boolean(c.falcon.norm_before_gate));
}

}  // namespace

const Family& falcon_h1_family() {
  static const Family family = [] {
    Family f;
    f.name = "falcon-h1";
    f.id = ModelFamily::FalconH1;
    f.model_types = {"falcon_h1"};
    f.gguf_archs = {"falcon-h1"};
    f.keys = falcon_h1_keys();
    f.parse_extra = parse_falcon_h1_extra;
    f.validate = validate_falcon_h1;
    f.blocks = falcon_h1_blocks;
    f.hf_extra = falcon_h1_hf_extra;
    f.gguf_extra = falcon_h1_gguf_extra;
    f.write_gguf_extra = falcon_h1_write_gguf_extra;
    f.gguf_arch = [](const ModelConfig&) { return std::string("falcon-h1"); };
    f.example = falcon_h1_example;
    return f;
  }();
  return family;
}

}  // namespace mb
