// SPDX-License-Identifier: MIT
#include "model/blocks/hybrid_config.h"

#include <cmath>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/json_text.h"
#include "model/config.h"
#include "model/config_reader.h"

namespace mb {
namespace {

using nlohmann::json;

// The first of `keys` the config has, or null.
const char* first_key(const ConfigReader& reader, std::initializer_list<const char*> keys) {
  for (const char* key : keys)
    if (reader.has(key)) return key;
  return nullptr;
}

int64_t int_alias(const ConfigReader& reader, std::initializer_list<const char*> keys, int64_t fallback,
                  int64_t max_value) {
  const char* key = first_key(reader, keys);
  return key != nullptr ? reader.positive_int(key, max_value) : fallback;
}

bool bool_alias(const ConfigReader& reader, std::initializer_list<const char*> keys, bool fallback) {
  const char* key = first_key(reader, keys);
  return key != nullptr ? reader.boolean_or(key, fallback) : fallback;
}

// A count that may be 0 (Granite's experts), 0 when absent.
int64_t non_negative_int(const ConfigReader& reader, const char* key, int64_t max_value) {
  if (!reader.has(key)) return 0;
  const json& value = reader.at(key);
  if (!value.is_number_integer() || value.get<int64_t>() < 0 || value.get<int64_t>() > max_value)
    throw Error(reader.where() + ": '" + key + "' must be an integer from 0 to " + std::to_string(max_value) +
                ", got " + json_excerpt(value));
  return value.get<int64_t>();
}

constexpr int64_t kMaxExperts = 1 << 16;
constexpr int64_t kMaxWidth = 1 << 20;

// Granite-4.0-H's experts (GraniteMoeHybridMoE): num_local_experts SwiGLU experts of
// intermediate_size (the shared MLP is shared_intermediate_size wide), num_experts_per_tok chosen
// by the top logits and weighted by a softmax over them.
void parse_granite_moe(const ConfigReader& reader, MoeConfig& e) {
  e.n_experts = non_negative_int(reader, "num_local_experts", kMaxExperts);
  if (e.n_experts == 0) return;
  e.top_k = reader.positive_int("num_experts_per_tok", kMaxExperts);
  e.width = reader.positive_int("intermediate_size", kMaxWidth);
  e.scoring = MoeScoring::SoftmaxTopK;
}

// Nemotron-H's 'E' layers (NemotronHMoE): a sigmoid router whose e_score_correction_bias steers the
// choice only, the chosen scores renormalized (norm_topk_prob) and scaled by routed_scaling_factor,
// ReLU^2 experts without a gate, and one shared expert; transformers' defaults where a key is absent.
void parse_nemotron_moe(const ConfigReader& reader, MoeConfig& e) {
  e.n_experts = int_alias(reader, {"n_routed_experts", "num_local_experts"}, 8, kMaxExperts);
  e.top_k = reader.positive_int_or("num_experts_per_tok", 2, kMaxExperts);
  e.width = reader.positive_int_or("moe_intermediate_size", 7688, kMaxWidth);
  e.shared_width = reader.positive_int_or("moe_shared_expert_intermediate_size", 7688, kMaxWidth);
  e.scoring = MoeScoring::SigmoidBias;
  e.normalize = reader.boolean_or("norm_topk_prob", true);
  e.scale = reader.positive_number_or("routed_scaling_factor", 1.0);
  const int64_t shared = reader.positive_int_or("n_shared_experts", 1, kMaxExperts);
  if (shared != 1)
    throw Error(reader.where() + ": 'n_shared_experts' = " + std::to_string(shared) +
                " is not supported (the Nemotron-H models have one shared expert)");
  // Group-limited routing (DeepSeek-V3's) keeps the experts of the topk_group best of n_group
  // groups; with every group kept it changes nothing, which is all the released models use.
  const int64_t groups = reader.positive_int_or("n_group", 1, kMaxExperts);
  const int64_t kept = reader.positive_int_or("topk_group", 1, kMaxExperts);
  if (groups > 1 && kept != groups)
    throw Error(reader.where() + ": 'n_group' = " + std::to_string(groups) + " with 'topk_group' = " +
                std::to_string(kept) + ": group-limited expert routing is not supported");
  // LatentMoE (Nemotron-3-Super): null or absent in the models without it.
  e.latent = reader.has("moe_latent_size") ? reader.positive_int("moe_latent_size", kMaxWidth) : 0;
}

// The sizes every family reads the same way, and attention's heads.
void parse_attention(const ConfigReader& reader, ModelConfig& c,
                     std::initializer_list<const char*> head_dim_keys) {
  AttentionConfig& a = c.hybrid.attention;
  a.n_heads = reader.positive_int("num_attention_heads", 1 << 12);
  a.n_kv_heads = reader.positive_int_or("num_key_value_heads", a.n_heads, 1 << 12);
  a.head_dim = int_alias(reader, head_dim_keys, c.d_model / a.n_heads, 1 << 12);
  a.bias = reader.boolean_or("attention_bias", false);
  a.scale = 1.0 / std::sqrt(static_cast<double>(a.head_dim));
}

// The Mamba-2 mixer of a hybrid: heads x head size channels (which need not be expand x hidden),
// the grouped gated RMSNorm after the scan, no dt clamp unless time_step_limit says one.
void finish_mixer(const ConfigReader& reader, MambaMixerConfig& m, int64_t heads) {
  m.d_inner = heads * m.headdim;
  m.gated_norm = true;
  m.dt_limit_min = 0.0;
  m.dt_limit_max = INFINITY;
  parse_dt_limit(reader, "time_step_limit", m);
}

// position_embedding_type: "nope" (the Granite-4.0-H models) gives 0, "rope" (the all-attention
// Granite-4.0 models: GraniteMoeHybridRotaryEmbedding, transformers' default rope type over the
// whole head) its base, rope_theta. Scaled or partial rotary embeddings are refused naming the key,
// in transformers' older spelling (rope_scaling, partial_rotary_factor) and its newer one
// (rope_parameters).
double parse_granite_rope(const ConfigReader& reader) {
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
  double theta = reader.positive_number_or("rope_theta", 10000.0);
  if (reader.has("rope_parameters")) {
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
  }
  return theta;
}

}  // namespace

void parse_granite_hybrid(const ConfigReader& reader, ModelConfig& c) {
  c.family = ModelFamily::GraniteHybrid;
  c.arch = Architecture::Mamba2;
  c.d_model = reader.positive_int("hidden_size", kMaxDModel);
  c.n_layer = reader.positive_int("num_hidden_layers", kMaxLayers);
  c.vocab_size = reader.positive_int("vocab_size", kMaxVocab);
  c.norm_eps = static_cast<float>(reader.positive_number_or("rms_norm_eps", 1e-6));
  c.tie_embeddings = reader.boolean_or("tie_word_embeddings", false);
  parse_granite_moe(reader, c.hybrid.moe);

  // layer_types: "mamba" or "attention" per layer; all Mamba when absent, as transformers reads it.
  HybridConfig& h = c.hybrid;
  h.pattern.assign(static_cast<size_t>(c.n_layer), kMambaLayer);
  if (reader.has("layer_types")) {
    const json& types = reader.at("layer_types");
    if (!types.is_array() || static_cast<int64_t>(types.size()) != c.n_layer)
      throw Error(reader.where() + ": 'layer_types' must list num_hidden_layers = " +
                  std::to_string(c.n_layer) + " entries, got " + json_excerpt(types));
    for (size_t l = 0; l < types.size(); ++l) {
      const json& t = types[l];
      if (t == "mamba")
        h.pattern[l] = kMambaLayer;
      else if (t == "attention")
        h.pattern[l] = kAttentionLayer;
      else
        throw Error(reader.where() + ": layer_types[" + std::to_string(l) +
                    "] must be \"mamba\" or \"attention\", got " + json_excerpt(t));
    }
  }
  parse_attention(reader, c, {});
  // GraniteMoeHybridAttention: self.scaling = config.attention_multiplier.
  h.attention.scale = reader.positive_number_or("attention_multiplier", 1.0);
  h.attention.rope_theta = parse_granite_rope(reader);
  h.mlp.width = reader.positive_int("shared_intermediate_size", 1 << 20);
  h.mlp.activation = Activation::SwiGlu;
  if (reader.string_or("hidden_act", "silu") != "silu")
    throw Error(reader.where() + ": hidden_act '" + reader.string_or("hidden_act", "") +
                "' is not supported (expected \"silu\")");
  h.embedding_multiplier = reader.positive_number_or("embedding_multiplier", 1.0);
  h.residual_multiplier = reader.positive_number_or("residual_multiplier", 1.0);
  h.logits_scaling = reader.positive_number_or("logits_scaling", 1.0);

  MambaMixerConfig& m = c.ssm;
  if (h.pattern.find(kMambaLayer) == std::string::npos) {
    // No Mamba layer (granite-4.0-micro / -1b / -350m): the mamba_* keys describe nothing, and
    // the configuration class's values need not fit the hidden size, so they are not read. The
    // section stays a valid, unused one (two heads of d_model).
    m.d_inner = m.expand * c.d_model;
    m.headdim = c.d_model;
    m.gated_norm = true;
    return;
  }
  m.d_state = reader.positive_int_or("mamba_d_state", 256, 1 << 20);
  m.d_conv = reader.positive_int_or("mamba_d_conv", 4, 1 << 20);
  m.expand = reader.positive_int_or("mamba_expand", 2, 64);
  // With more than one group the gated norm normalizes each group of d_ssm / ngroups channels, as
  // the mamba_ssm kernel HF's CUDA path calls (mamba_split_conv1d_scan_combined, group_size =
  // dim // ngroups) and llama.cpp do; HF's PyTorch path normalizes the whole d_ssm. The released
  // Granite-4.0-H models have one group, where the two agree.
  m.ngroups = reader.positive_int_or("mamba_n_groups", 1, 1 << 16);
  m.chunk_size = reader.positive_int_or("mamba_chunk_size", 256, 1 << 16);
  m.use_bias = reader.boolean_or("mamba_proj_bias", false);
  m.use_conv_bias = reader.boolean_or("mamba_conv_bias", true);
  const int64_t heads = reader.positive_int_or("mamba_n_heads", 128, 1 << 20);
  const int64_t d_inner = m.expand * c.d_model;
  // mamba_d_head "auto" (the default) is d_inner / heads.
  m.headdim = reader.has("mamba_d_head") && !reader.at("mamba_d_head").is_string()
                  ? reader.positive_int("mamba_d_head", 1 << 16)
                  : d_inner / heads;
  if (heads * m.headdim != d_inner)
    throw Error(reader.where() + ": mamba_n_heads x mamba_d_head = " + std::to_string(heads) + " x " +
                std::to_string(m.headdim) +
                " does not equal mamba_expand x hidden_size = " + std::to_string(d_inner));
  finish_mixer(reader, m, heads);
}

void parse_nemotron_h(const ConfigReader& reader, ModelConfig& c) {
  c.family = ModelFamily::NemotronH;
  c.arch = Architecture::Mamba2;
  c.d_model = reader.positive_int("hidden_size", kMaxDModel);
  c.vocab_size = reader.positive_int("vocab_size", kMaxVocab);
  c.norm_eps = static_cast<float>(
      reader.positive_number_or("layer_norm_epsilon", reader.positive_number_or("rms_norm_eps", 1e-5)));
  c.tie_embeddings = reader.boolean_or("tie_word_embeddings", false);
  HybridConfig& h = c.hybrid;
  // hybrid_override_pattern, or layers_block_type in either of transformers' spellings.
  if (reader.has("hybrid_override_pattern")) {
    h.pattern = reader.string_or("hybrid_override_pattern", "");
  } else if (reader.has("layers_block_type")) {
    const json& types = reader.at("layers_block_type");
    if (!types.is_array()) throw Error(reader.where() + ": 'layers_block_type' must be a list");
    for (const json& t : types) {
      if (t == "mamba" || t == "linear_attention")
        h.pattern += kMambaLayer;
      else if (t == "attention" || t == "full_attention")
        h.pattern += kAttentionLayer;
      else if (t == "mlp")
        h.pattern += kMlpLayer;
      else if (t == "moe")
        h.pattern += kMoeLayer;
      else
        throw Error(reader.where() + ": 'layers_block_type' holds an unknown layer type " + json_excerpt(t));
    }
  } else {
    throw Error(reader.where() + ": neither 'hybrid_override_pattern' nor 'layers_block_type' is present");
  }
  if (h.pattern.empty() || static_cast<int64_t>(h.pattern.size()) > kMaxLayers)
    throw Error(reader.where() + ": the layer pattern must have 1 to " + std::to_string(kMaxLayers) +
                " layers");
  for (size_t l = 0; l < h.pattern.size(); ++l) {
    const char kind = h.pattern[l];
    if (kind != kMambaLayer && kind != kAttentionLayer && kind != kMlpLayer && kind != kMoeLayer)
      throw Error(reader.where() + ": the layer pattern holds '" + std::string(1, kind) + "' at layer " +
                  std::to_string(l) + " (expected M, *, - or E)");
  }
  c.n_layer = static_cast<int64_t>(h.pattern.size());
  if (reader.has("num_hidden_layers") && reader.positive_int("num_hidden_layers", kMaxLayers) != c.n_layer)
    throw Error(reader.where() + ": num_hidden_layers = " +
                std::to_string(reader.positive_int("num_hidden_layers", kMaxLayers)) +
                " but the layer pattern has " + std::to_string(c.n_layer) + " layers");
  parse_attention(reader, c, {"head_dim", "attention_head_dim"});
  h.mlp.width = reader.positive_int("intermediate_size", 1 << 20);
  h.mlp.activation = Activation::ReluSquared;
  h.mlp.bias = reader.boolean_or("mlp_bias", false);
  if (reader.string_or("mlp_hidden_act", "relu2") != "relu2")
    throw Error(reader.where() + ": mlp_hidden_act '" + reader.string_or("mlp_hidden_act", "") +
                "' is not supported (expected \"relu2\")");
  // The expert keys matter only where the pattern has mixture-of-experts layers.
  if (h.pattern.find(kMoeLayer) != std::string::npos) parse_nemotron_moe(reader, h.moe);
  if (reader.string_or("mamba_hidden_act", "silu") != "silu")
    throw Error(reader.where() + ": mamba_hidden_act '" + reader.string_or("mamba_hidden_act", "") +
                "' is not supported (expected \"silu\")");

  MambaMixerConfig& m = c.ssm;
  // NemotronHConfig accepts the mamba_-prefixed aliases too.
  m.d_state = int_alias(reader, {"ssm_state_size", "mamba_d_state"}, 128, 1 << 20);
  m.d_conv = int_alias(reader, {"conv_kernel", "mamba_d_conv"}, 4, 1 << 20);
  m.expand = int_alias(reader, {"expand", "mamba_expand"}, 2, 64);
  m.ngroups = int_alias(reader, {"n_groups", "mamba_n_groups"}, 8, 1 << 16);
  m.chunk_size = int_alias(reader, {"chunk_size", "mamba_chunk_size"}, 128, 1 << 16);
  m.use_bias = bool_alias(reader, {"mamba_proj_bias", "use_bias"}, false);
  m.use_conv_bias = bool_alias(reader, {"use_conv_bias", "mamba_conv_bias"}, true);
  m.headdim = reader.positive_int("mamba_head_dim", 1 << 16);
  // d_ssm = mamba_num_heads x mamba_head_dim, not expand x hidden_size (the spec's first trap).
  // time_step_min is a training floor, not applied at inference (HF's CUDA path and llama.cpp).
  finish_mixer(reader, m, reader.positive_int("mamba_num_heads", 1 << 20));
}

void validate_hybrid(const ModelConfig& c, const std::string& where) {
  const AttentionConfig& a = c.hybrid.attention;
  if (a.n_heads % a.n_kv_heads != 0)
    throw Error(where + ": num_attention_heads " + std::to_string(a.n_heads) +
                " is not a multiple of num_key_value_heads " + std::to_string(a.n_kv_heads));
  if (a.head_dim <= 0) throw Error(where + ": the attention head size must be positive");
  if (!std::isfinite(a.scale)) throw Error(where + ": the attention scale must be finite");
  if (a.rope_theta != 0.0 && !(std::isfinite(a.rope_theta) && a.rope_theta > 0.0))
    throw Error(where + ": rope_theta must be a finite positive number");
  if (a.rope_theta != 0.0 && a.head_dim % 2 != 0)
    throw Error(where + ": RoPE needs an even attention head size, got " + std::to_string(a.head_dim));
  for (double v : {c.hybrid.embedding_multiplier, c.hybrid.residual_multiplier, c.hybrid.logits_scaling})
    if (!std::isfinite(v)) throw Error(where + ": the multipliers must be finite");
  const MoeConfig& e = c.hybrid.moe;
  if (e.n_experts > 0 && (e.top_k < 1 || e.top_k > e.n_experts))
    throw Error(where + ": num_experts_per_tok = " + std::to_string(e.top_k) + " must be between 1 and the " +
                std::to_string(e.n_experts) + " experts");
  if (e.n_experts > 0 && (e.width < 1 || (c.family == ModelFamily::NemotronH && e.shared_width < 1)))
    throw Error(where + ": the expert widths must be positive");
  if (!std::isfinite(e.scale)) throw Error(where + ": routed_scaling_factor must be finite");
  if (c.family == ModelFamily::NemotronH && e.n_experts == 0 &&
      c.hybrid.pattern.find(kMoeLayer) != std::string::npos)
    throw Error(where + ": the layer pattern has mixture-of-experts layers ('E') but no experts");
}

std::vector<BlockSpec> hybrid_blocks(const ModelConfig& c) {
  std::vector<BlockSpec> list;
  const bool granite = c.family == ModelFamily::GraniteHybrid;
  for (int64_t l = 0; l < c.n_layer; ++l) {
    const std::string prefix = (granite ? "model.layers." : "backbone.layers.") + std::to_string(l) + ".";
    const char kind = c.hybrid.pattern[static_cast<size_t>(l)];
    const BlockKind block = kind == kMambaLayer       ? BlockKind::Mamba2Mixer
                            : kind == kAttentionLayer ? BlockKind::Attention
                            : kind == kMoeLayer       ? BlockKind::Moe
                                                      : BlockKind::Mlp;
    if (!granite) {
      list.push_back({block, l, {prefix}});
      continue;
    }
    // Granite: input_layernorm -> mixer -> post_attention_layernorm -> shared MLP (+ experts).
    list.push_back(
        {block, l, {prefix, kind == kMambaLayer ? "mamba." : "self_attn.", "input_layernorm.weight"}});
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

json hybrid_config_to_hf_json(const ModelConfig& c) {
  const HybridConfig& h = c.hybrid;
  const MambaMixerConfig& m = c.ssm;
  json hf = {{"hidden_size", c.d_model},
             {"vocab_size", c.vocab_size},
             {"num_hidden_layers", c.n_layer},
             {"tie_word_embeddings", c.tie_embeddings},
             {"num_attention_heads", h.attention.n_heads},
             {"num_key_value_heads", h.attention.n_kv_heads},
             {"attention_bias", h.attention.bias},
             {"bos_token_id", 0},
             {"eos_token_id", 0},
             {"pad_token_id", 0},
             {"torch_dtype", "float32"}};
  if (c.family == ModelFamily::GraniteHybrid) {
    json types = json::array();
    for (char kind : h.pattern) types.push_back(kind == kAttentionLayer ? "attention" : "mamba");
    hf.update({{"model_type", "granitemoehybrid"},
               {"architectures", {"GraniteMoeHybridForCausalLM"}},
               {"layer_types", types},
               {"rms_norm_eps", c.norm_eps},
               {"position_embedding_type", h.attention.rope_theta > 0.0 ? "rope" : "nope"},
               {"attention_multiplier", h.attention.scale},
               {"embedding_multiplier", h.embedding_multiplier},
               {"residual_multiplier", h.residual_multiplier},
               {"logits_scaling", h.logits_scaling},
               {"shared_intermediate_size", h.mlp.width},
               // Each expert's width; the dense models repeat the shared MLP's there.
               {"intermediate_size", h.moe.n_experts > 0 ? h.moe.width : h.mlp.width},
               {"num_local_experts", h.moe.n_experts},
               {"num_experts_per_tok", h.moe.top_k},
               {"hidden_act", "silu"},
               {"mamba_n_heads", m.n_heads()},
               {"mamba_d_head", m.headdim},
               {"mamba_d_state", m.d_state},
               {"mamba_n_groups", m.ngroups},
               {"mamba_d_conv", m.d_conv},
               {"mamba_expand", m.expand},
               {"mamba_chunk_size", m.chunk_size},
               {"mamba_conv_bias", m.use_conv_bias},
               {"mamba_proj_bias", m.use_bias}});
    if (h.attention.rope_theta > 0.0)
      hf.update({{"rope_theta", h.attention.rope_theta}, {"rope_scaling", nullptr}});
    return hf;
  }
  hf.update({{"model_type", "nemotron_h"},
             {"architectures", {"NemotronHForCausalLM"}},
             {"hybrid_override_pattern", h.pattern},
             {"layer_norm_epsilon", c.norm_eps},
             {"head_dim", h.attention.head_dim},
             {"intermediate_size", h.mlp.width},
             {"mlp_hidden_act", "relu2"},
             {"mlp_bias", h.mlp.bias},
             {"mamba_num_heads", m.n_heads()},
             {"mamba_head_dim", m.headdim},
             {"ssm_state_size", m.d_state},
             {"n_groups", m.ngroups},
             {"conv_kernel", m.d_conv},
             {"expand", m.expand},
             {"chunk_size", m.chunk_size},
             {"use_conv_bias", m.use_conv_bias},
             {"mamba_proj_bias", m.use_bias},
             {"mamba_hidden_act", "silu"}});
  if (h.pattern.find(kMoeLayer) != std::string::npos)
    hf.update({{"n_routed_experts", h.moe.n_experts},
               {"num_experts_per_tok", h.moe.top_k},
               {"moe_intermediate_size", h.moe.width},
               {"moe_shared_expert_intermediate_size", h.moe.shared_width},
               {"n_shared_experts", 1},
               {"norm_topk_prob", h.moe.normalize},
               {"routed_scaling_factor", h.moe.scale},
               {"n_group", 1},
               {"topk_group", 1}});
  if (h.moe.latent > 0) hf["moe_latent_size"] = h.moe.latent;
  return hf;
}

}  // namespace mb
