// SPDX-License-Identifier: MIT
// Granite-4.0-H (Hugging Face `granitemoehybrid`, llama.cpp `granitehybrid`): Mamba-2 or attention
// per layer (layer_types), each followed by the shared SwiGLU MLP (with routed experts when
// num_local_experts > 0), the scalar multipliers applied at run time, and the all-attention
// Granite-4.0 models' RoPE (position_embedding_type "rope"). ../shared/specs/hybrids.md, section 2.
//
// Read by parse_extra rather than the table: layer_types (a list), position_embedding_type and the
// RoPE keys' refusals (their effect is rope_theta, 0 for none, which the table hashes),
// mamba_n_heads and mamba_d_head ("auto" or a number; with mamba_expand they give d_inner, which
// the tensors' shapes carry) and hidden_act (only "silu"). The GGUF metadata (per-layer arrays,
// llama.cpp's "0 means default" multipliers) is gguf_hybrid.cc's.
#include <cmath>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/json_text.h"
#include "model/config_reader.h"
#include "model/families/families.h"
#include "model/gguf_hybrid.h"

namespace mb {
namespace {

using nlohmann::json;

constexpr int64_t kMaxExperts = 1 << 16;
constexpr int64_t kMaxWidth = 1 << 20;

std::vector<ConfigKey> granite_keys() {
  return {
      Key("hidden_size", [](ModelConfig& c) -> KeyField { return &c.d_model; })
          .gguf("embedding_length")
          .max(kMaxDModel)
          .effect(KeyEffect::State),
      Key("num_hidden_layers", [](ModelConfig& c) -> KeyField { return &c.n_layer; })
          .gguf("block_count")
          .max(kMaxLayers)
          .effect(KeyEffect::State),
      Key("vocab_size", [](ModelConfig& c) -> KeyField { return &c.vocab_size; }).max(kMaxVocab),
      Key("rms_norm_eps", [](ModelConfig& c) -> KeyField { return &c.norm_eps; })
          .gguf("attention.layer_norm_rms_epsilon")
          .type(KeyType::Number)
          .fallback(1e-6)
          .range(kMinPositive, 1),
      Key("tie_word_embeddings", [](ModelConfig& c) -> KeyField { return &c.tie_embeddings; })
          .type(KeyType::Bool)
          .fallback(false),
      // The experts (GraniteMoeHybridMoE); with none, the three are not used (parse_extra).
      Key("num_local_experts", [](ModelConfig& c) -> KeyField { return &c.hybrid.moe.n_experts; })
          .gguf("expert_count")
          .fallback(int64_t{0})
          .range(0, kMaxExperts),
      Key("num_experts_per_tok", [](ModelConfig& c) -> KeyField { return &c.hybrid.moe.top_k; })
          .gguf("expert_used_count")
          .fallback(int64_t{0})
          .range(0, kMaxExperts),
      Key("intermediate_size", [](ModelConfig& c) -> KeyField { return &c.hybrid.moe.width; })
          .fallback(int64_t{0})
          .range(0, kMaxWidth),
      Key("shared_intermediate_size", [](ModelConfig& c) -> KeyField { return &c.hybrid.mlp.width; })
          .max(kMaxWidth),
      Key("num_attention_heads", [](ModelConfig& c) -> KeyField { return &c.hybrid.attention.n_heads; })
          .max(1 << 12)
          .effect(KeyEffect::State),
      // 0 when absent: num_attention_heads (parse_extra).
      Key("num_key_value_heads", [](ModelConfig& c) -> KeyField { return &c.hybrid.attention.n_kv_heads; })
          .fallback(int64_t{0})
          .max(1 << 12)
          .effect(KeyEffect::State),
      Key("attention_bias", [](ModelConfig& c) -> KeyField { return &c.hybrid.attention.bias; })
          .type(KeyType::Bool)
          .fallback(false),
      // GraniteMoeHybridAttention: self.scaling = config.attention_multiplier.
      Key("attention_multiplier", [](ModelConfig& c) -> KeyField { return &c.hybrid.attention.scale; })
          .type(KeyType::Number)
          .fallback(1.0)
          .range(kMinPositive, 1e30),
      // 0 when absent; parse_extra makes it 10000 under "rope" and 0 (no RoPE) under "nope".
      Key("rope_theta", [](ModelConfig& c) -> KeyField { return &c.hybrid.attention.rope_theta; })
          .type(KeyType::Number)
          .fallback(0.0)
          .range(kMinPositive, 1e30),
      Key("embedding_multiplier", [](ModelConfig& c) -> KeyField { return &c.hybrid.embedding_multiplier; })
          .type(KeyType::Number)
          .fallback(1.0)
          .range(kMinPositive, 1e30),
      Key("residual_multiplier", [](ModelConfig& c) -> KeyField { return &c.hybrid.residual_multiplier; })
          .type(KeyType::Number)
          .fallback(1.0)
          .range(kMinPositive, 1e30),
      Key("logits_scaling", [](ModelConfig& c) -> KeyField { return &c.hybrid.logits_scaling; })
          .type(KeyType::Number)
          .fallback(1.0)
          .range(kMinPositive, 1e30),
      // The Mamba-2 mixers (GraniteMoeHybridMambaLayer); not used without Mamba layers.
      Key("mamba_d_state", [](ModelConfig& c) -> KeyField { return &c.ssm.d_state; })
          .gguf("ssm.state_size")
          .fallback(int64_t{256})
          .effect(KeyEffect::State),
      Key("mamba_d_conv", [](ModelConfig& c) -> KeyField { return &c.ssm.d_conv; })
          .gguf("ssm.conv_kernel")
          .fallback(int64_t{4})
          .effect(KeyEffect::State),
      Key("mamba_expand", [](ModelConfig& c) -> KeyField { return &c.ssm.expand; })
          .fallback(int64_t{2})
          .max(64)
          .effect(KeyEffect::State),
      // With more than one group the gated norm normalizes each group of d_ssm / ngroups channels,
      // as the mamba_ssm kernel HF's CUDA path calls (mamba_split_conv1d_scan_combined,
      // group_size = dim // ngroups) and llama.cpp do; HF's PyTorch path normalizes the whole
      // d_ssm. The released Granite-4.0-H models have one group, where the two agree.
      Key("mamba_n_groups", [](ModelConfig& c) -> KeyField { return &c.ssm.ngroups; })
          .gguf("ssm.group_count")
          .fallback(int64_t{1})
          .max(1 << 16)
          .effect(KeyEffect::State),
      Key("mamba_chunk_size", [](ModelConfig& c) -> KeyField { return &c.ssm.chunk_size; })
          .fallback(int64_t{256})
          .max(1 << 16)
          .effect(KeyEffect::None),
      Key("mamba_proj_bias", [](ModelConfig& c) -> KeyField { return &c.ssm.use_bias; })
          .type(KeyType::Bool)
          .fallback(false),
      Key("mamba_conv_bias", [](ModelConfig& c) -> KeyField { return &c.ssm.use_conv_bias; })
          .type(KeyType::Bool)
          .fallback(true),
  };
}

// layer_types: "mamba" or "attention" per layer; all Mamba when absent, as transformers reads it.
std::string granite_pattern(const ConfigReader& reader, int64_t n_layer) {
  std::string pattern(static_cast<size_t>(n_layer), kMambaLayer);
  if (!reader.has("layer_types")) return pattern;
  const json& types = reader.at("layer_types");
  if (!types.is_array() || static_cast<int64_t>(types.size()) != n_layer)
    throw Error(reader.where() + ": 'layer_types' must list num_hidden_layers = " + std::to_string(n_layer) +
                " entries, got " + json_excerpt(types));
  for (size_t l = 0; l < types.size(); ++l) {
    const json& t = types[l];
    if (t == "mamba")
      pattern[l] = kMambaLayer;
    else if (t == "attention")
      pattern[l] = kAttentionLayer;
    else
      throw Error(reader.where() + ": layer_types[" + std::to_string(l) +
                  "] must be \"mamba\" or \"attention\", got " + json_excerpt(t));
  }
  return pattern;
}

// position_embedding_type: "nope" (the Granite-4.0-H models) gives 0, "rope" (the all-attention
// Granite-4.0 models: GraniteMoeHybridRotaryEmbedding, transformers' default rope type over the
// whole head) its base, rope_theta. Scaled or partial rotary embeddings are refused naming the key,
// in transformers' older spelling (rope_scaling, partial_rotary_factor) and its newer one
// (rope_parameters).
double granite_rope(const ConfigReader& reader, double theta) {
  const std::string position = reader.string_or("position_embedding_type", "nope");
  if (position == "nope") return 0.0;
  if (position != "rope")
    throw Error(reader.where() + ": position_embedding_type '" + position +
                "' is not supported (expected \"nope\" or \"rope\")");
  if (reader.has("rope_scaling"))
    throw Error(reader.where() + ": 'rope_scaling' = " + json_excerpt(reader.at("rope_scaling")) +
                " is not supported (only unscaled RoPE: null or absent)");
  const auto check_partial = [&](const json& value, const std::string& key) {
    if (!value.is_number() || value.get<double>() != 1.0)
      throw Error(reader.where() + ": '" + key + "' = " + json_excerpt(value) +
                  " is not supported (RoPE over the whole head only: 1)");
  };
  if (reader.has("partial_rotary_factor"))
    check_partial(reader.at("partial_rotary_factor"), "partial_rotary_factor");
  if (theta == 0.0) theta = 10000.0;
  if (!reader.has("rope_parameters")) return theta;
  const json& r = reader.at("rope_parameters");
  if (!r.is_object())
    throw Error(reader.where() + ": 'rope_parameters' must be an object, got " + json_excerpt(r));
  for (const auto& [key, value] : r.items()) {
    const std::string name = "rope_parameters." + key;
    if (key == "rope_type") {
      if (value != "default")
        throw Error(reader.where() + ": '" + name + "' = " + json_excerpt(value) +
                    " is not supported (only \"default\")");
    } else if (key == "rope_theta") {
      if (!value.is_number() || !(value.get<double>() > 0.0))
        throw Error(reader.where() + ": '" + name + "' must be a positive number, got " +
                    json_excerpt(value));
      theta = value.get<double>();
    } else if (key == "partial_rotary_factor") {
      check_partial(value, name);
    } else {
      throw Error(reader.where() + ": '" + name + "' is not supported (only unscaled RoPE)");
    }
  }
  return theta;
}

// The Mamba-2 mixer: mamba_n_heads heads of mamba_d_head ("auto": d_inner / heads) channels,
// which must fill mamba_expand x hidden_size; the grouped gated RMSNorm after the scan, no dt clamp
// unless time_step_limit says one.
void granite_mixer(const ConfigReader& reader, ModelConfig& c) {
  MambaMixerConfig& m = c.ssm;
  m.gated_norm = true;
  if (c.hybrid.pattern.find(kMambaLayer) == std::string::npos) {
    // No Mamba layer (granite-4.0-micro / -1b / -350m): the mamba_* keys describe nothing, and
    // the configuration class's values need not fit the hidden size, so they are not used. The
    // section stays a valid, unused one (two heads of d_model).
    m = MambaMixerConfig{};
    m.d_inner = m.expand * c.d_model;
    m.headdim = c.d_model;
    return;
  }
  const int64_t heads = reader.positive_int_or("mamba_n_heads", 128, 1 << 20);
  const int64_t d_inner = m.expand * c.d_model;
  m.headdim = reader.has("mamba_d_head") && !reader.at("mamba_d_head").is_string()
                  ? reader.positive_int("mamba_d_head", 1 << 16)
                  : d_inner / heads;
  if (heads * m.headdim != d_inner)
    throw Error(reader.where() + ": mamba_n_heads x mamba_d_head = " + std::to_string(heads) + " x " +
                std::to_string(m.headdim) +
                " does not equal mamba_expand x hidden_size = " + std::to_string(d_inner));
  m.d_inner = heads * m.headdim;
  m.dt_limit_min = 0.0;
  m.dt_limit_max = INFINITY;
  parse_dt_limit(reader, "time_step_limit", m);
}

void parse_granite_extra(const ConfigReader& reader, ModelConfig& c) {
  c.family = ModelFamily::GraniteHybrid;
  c.arch = Architecture::Mamba2;
  HybridConfig& h = c.hybrid;
  MoeConfig& e = h.moe;
  if (e.n_experts == 0) {
    e = MoeConfig{};
  } else {
    // num_local_experts SwiGLU experts of intermediate_size, num_experts_per_tok chosen by the
    // top logits and weighted by a softmax over them.
    for (const char* key : {"num_experts_per_tok", "intermediate_size"})
      if (!reader.has(key)) throw Error(reader.where() + ": missing required key '" + key + "'");
    e.scoring = MoeScoring::SoftmaxTopK;
  }
  h.pattern = granite_pattern(reader, c.n_layer);
  AttentionConfig& a = h.attention;
  if (a.n_kv_heads == 0) a.n_kv_heads = a.n_heads;
  a.head_dim = c.d_model / a.n_heads;
  a.rope_theta = granite_rope(reader, a.rope_theta);
  h.mlp.activation = Activation::SwiGlu;
  if (reader.string_or("hidden_act", "silu") != "silu")
    throw Error(reader.where() + ": hidden_act '" + reader.string_or("hidden_act", "") +
                "' is not supported (expected \"silu\")");
  granite_mixer(reader, c);
}

std::vector<BlockSpec> granite_blocks(const ModelConfig& c) {
  std::vector<BlockSpec> list;
  for (int64_t l = 0; l < c.n_layer; ++l) {
    const std::string prefix = "model.layers." + std::to_string(l) + ".";
    const bool mamba = c.hybrid.pattern[static_cast<size_t>(l)] == kMambaLayer;
    // input_layernorm -> mixer -> post_attention_layernorm -> shared MLP (+ experts).
    list.push_back({mamba ? BlockKind::Mamba2Mixer : BlockKind::Attention,
                    l,
                    {prefix, mamba ? "mamba." : "self_attn.", "input_layernorm.weight"}});
    if (c.hybrid.moe.n_experts > 0)
      list.push_back({BlockKind::Moe,
                      l,
                      {prefix, "block_sparse_moe.", "post_attention_layernorm.weight", "ffn_norm.weight"}});
    else
      list.push_back(
          {BlockKind::Mlp, l, {prefix, "shared_mlp.", "post_attention_layernorm.weight", "ffn_norm.weight"}});
  }
  return list;
}

void granite_hf_extra(const ModelConfig& c, json& hf) {
  const HybridConfig& h = c.hybrid;
  json types = json::array();
  for (char kind : h.pattern) types.push_back(kind == kAttentionLayer ? "attention" : "mamba");
  hf.update({{"model_type", "granitemoehybrid"},
             {"architectures", {"GraniteMoeHybridForCausalLM"}},
             {"layer_types", types},
             {"position_embedding_type", h.attention.rope_theta > 0.0 ? "rope" : "nope"},
             // Each expert's width; the dense models repeat the shared MLP's there.
             {"intermediate_size", h.moe.n_experts > 0 ? h.moe.width : h.mlp.width},
             {"hidden_act", "silu"},
             {"mamba_n_heads", c.ssm.n_heads()},
             {"mamba_d_head", c.ssm.headdim},
             {"bos_token_id", 0},
             {"eos_token_id", 0},
             {"pad_token_id", 0},
             {"torch_dtype", "float32"}});
  if (h.attention.rope_theta > 0.0)
    hf["rope_scaling"] = nullptr;
  else
    hf.erase("rope_theta");
}

Family make_granite_hybrid() {
  Family f;
  f.name = "granite-hybrid";
  f.id = ModelFamily::GraniteHybrid;
  f.model_types = {"granitemoehybrid"};
  f.gguf_archs = {kGgufGraniteHybrid};
  f.keys = granite_keys();
  f.parse_extra = parse_granite_extra;
  f.validate = [](const ModelConfig& c, const std::string& where) {
    validate_mamba_mixer(c.ssm, c.arch, c.d_model, where);
    validate_hybrid(c, where);
  };
  f.blocks = granite_blocks;
  f.gguf_extra = [](const GgufFile& file, const std::string& arch, json& hf) {
    hf.update(gguf_hybrid_config_json(file, arch, hf.value("vocab_size", int64_t{0})));
  };
  f.write_gguf_extra = [](GgufWriter& writer, const ModelConfig& c, const std::string&) {
    set_gguf_hybrid_metadata(writer, c, c.vocab_rows);
  };
  f.gguf_arch = [](const ModelConfig&) { return std::string(kGgufGraniteHybrid); };
  f.check_gguf = [](const ModelConfig& c) {
    // llama.cpp's converter writes a Granite without Mamba layers as arch "granite" (Llama-style
    // RoPE attention with its q/k rows permuted), which this engine neither writes nor reads.
    if (c.hybrid.attention.rope_theta > 0.0)
      throw Error(
          "Granite models with RoPE (position_embedding_type \"rope\", the all-attention Granite-4.0 "
          "models) cannot be written as GGUF: llama.cpp writes them as arch \"granite\", which this "
          "engine does not support; use the Hugging Face folder");
    check_hybrid_gguf(c);
  };
  f.hf_extra = granite_hf_extra;
  f.example = [](int64_t d_model, int64_t n_layer, int64_t vocab) {
    json types = json::array();
    for (int64_t l = 0; l < n_layer; ++l) types.push_back(l % 4 == 1 ? "attention" : "mamba");
    return json{{"model_type", "granitemoehybrid"},
                {"hidden_size", d_model},
                {"num_hidden_layers", n_layer},
                {"vocab_size", vocab},
                {"layer_types", types},
                {"num_attention_heads", 4},
                {"num_key_value_heads", 2},
                {"shared_intermediate_size", 2 * d_model},
                {"attention_multiplier", 4.0 / static_cast<double>(d_model)},
                {"embedding_multiplier", 12.0},
                {"residual_multiplier", 0.22},
                {"logits_scaling", 8.0},
                {"mamba_d_state", 128},
                {"mamba_n_heads", 2 * d_model / 64 > 0 ? 2 * d_model / 64 : 1},
                {"mamba_d_head", 2 * d_model / 64 > 0 ? 64 : 2 * d_model}};
  };
  return f;
}

}  // namespace

void check_hybrid_gguf(const ModelConfig& c) {
  // A time_step_limit, which the configs may carry and llama.cpp's GGUF has no key for.
  if (c.ssm.dt_limit_min != 0.0 || std::isfinite(c.ssm.dt_limit_max))
    throw Error("Mamba-2 models with a dt limit cannot be written as GGUF (llama.cpp has no key for it)");
  if (c.ssm.use_bias)
    throw Error("hybrid models with Mamba in_proj/out_proj biases cannot be written as GGUF (llama.cpp's " +
                gguf_architecture(c) + " has no ssm_in or ssm_out bias)");
}

const Family& granite_hybrid_family() {
  static const Family family = make_granite_hybrid();
  return family;
}

}  // namespace mb
