// SPDX-License-Identifier: MIT
// Nemotron-H (Hugging Face `nemotron_h`, llama.cpp `nemotron_h` and `nemotron_h_moe`): one block
// per layer as hybrid_override_pattern spells it (M Mamba-2, * attention, - ReLU^2 MLP, E mixture
// of experts: a sigmoid router with a correction bias, ReLU^2 experts and one shared expert),
// ../shared/specs/hybrids.md, section 3. NemotronHConfig accepts the mamba_-prefixed aliases of the
// mixer keys, read in its order.
//
// Read by parse_extra rather than the table: layers_block_type (the list spelling of the
// pattern), num_hidden_layers's check against the pattern, mamba_num_heads (x mamba_head_dim =
// d_inner, which the tensors' shapes carry), the activations (only relu2 and silu), one shared
// expert and group-limited routing's refusal. The expert keys matter only where the pattern has
// E layers. The GGUF metadata (per-layer arrays) is gguf_hybrid.cc's.
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

std::vector<ConfigKey> nemotron_model_keys() {
  return {
      Key("hidden_size", [](ModelConfig& c) -> KeyField { return &c.d_model; })
          .gguf("embedding_length")
          .max(kMaxDModel)
          .effect(KeyEffect::State),
      Key("vocab_size", [](ModelConfig& c) -> KeyField { return &c.vocab_size; }).max(kMaxVocab),
      // 0 when absent: the pattern's length (parse_extra checks a stated one against it).
      Key("num_hidden_layers", [](ModelConfig& c) -> KeyField { return &c.n_layer; })
          .gguf("block_count")
          .fallback(int64_t{0})
          .max(kMaxLayers)
          .effect(KeyEffect::State),
      Key("layer_norm_epsilon", [](ModelConfig& c) -> KeyField { return &c.norm_eps; })
          .alias("rms_norm_eps")
          .gguf("attention.layer_norm_rms_epsilon")
          .type(KeyType::Number)
          .fallback(1e-5)
          .range(kMinPositive, 1),
      Key("tie_word_embeddings", [](ModelConfig& c) -> KeyField { return &c.tie_embeddings; })
          .type(KeyType::Bool)
          .fallback(false),
      // "" when absent: layers_block_type's (parse_extra).
      Key("hybrid_override_pattern", [](ModelConfig& c) -> KeyField { return &c.hybrid.pattern; })
          .type(KeyType::String)
          .fallback(std::string())
          .effect(KeyEffect::State),
      Key("num_attention_heads", [](ModelConfig& c) -> KeyField { return &c.hybrid.attention.n_heads; })
          .max(1 << 12)
          .effect(KeyEffect::State),
      // 0 when absent: num_attention_heads (parse_extra).
      Key("num_key_value_heads", [](ModelConfig& c) -> KeyField { return &c.hybrid.attention.n_kv_heads; })
          .fallback(int64_t{0})
          .max(1 << 12)
          .effect(KeyEffect::State),
      // 0 when absent: hidden_size / num_attention_heads (parse_extra); need not be that.
      Key("head_dim", [](ModelConfig& c) -> KeyField { return &c.hybrid.attention.head_dim; })
          .alias("attention_head_dim")
          .gguf("attention.key_length")
          .fallback(int64_t{0})
          .max(1 << 12)
          .effect(KeyEffect::State),
      Key("attention_bias", [](ModelConfig& c) -> KeyField { return &c.hybrid.attention.bias; })
          .type(KeyType::Bool)
          .fallback(false),
      Key("intermediate_size", [](ModelConfig& c) -> KeyField { return &c.hybrid.mlp.width; }).max(kMaxWidth),
      Key("mlp_bias", [](ModelConfig& c) -> KeyField { return &c.hybrid.mlp.bias; })
          .type(KeyType::Bool)
          .fallback(false),
  };
}

// NemotronHMoE's keys, transformers' defaults where absent. Their GGUF keys are read and written
// by gguf_hybrid.cc (nemotron_h_moe files only).
void add_expert_keys(std::vector<ConfigKey>& keys) {
  keys.push_back(Key("n_routed_experts", [](ModelConfig& c) -> KeyField { return &c.hybrid.moe.n_experts; })
                     .alias("num_local_experts")

                     .fallback(int64_t{8})
                     .max(kMaxExperts));
  keys.push_back(Key("num_experts_per_tok", [](ModelConfig& c) -> KeyField { return &c.hybrid.moe.top_k; })

                     .fallback(int64_t{2})
                     .max(kMaxExperts));
  keys.push_back(Key("moe_intermediate_size", [](ModelConfig& c) -> KeyField { return &c.hybrid.moe.width; })

                     .fallback(int64_t{7688})
                     .max(kMaxWidth));
  keys.push_back(Key("moe_shared_expert_intermediate_size",
                     [](ModelConfig& c) -> KeyField { return &c.hybrid.moe.shared_width; })

                     .fallback(int64_t{7688})
                     .max(kMaxWidth));
  keys.push_back(Key("norm_topk_prob", [](ModelConfig& c) -> KeyField { return &c.hybrid.moe.normalize; })
                     .type(KeyType::Bool)
                     .fallback(true));
  keys.push_back(Key("routed_scaling_factor", [](ModelConfig& c) -> KeyField { return &c.hybrid.moe.scale; })
                     .type(KeyType::Number)
                     .fallback(1.0)
                     .range(kMinPositive, 1e30));
  // LatentMoE (Nemotron-3-Super): null or absent (0) in the models without it.
  keys.push_back(Key("moe_latent_size", [](ModelConfig& c) -> KeyField { return &c.hybrid.moe.latent; })

                     .fallback(int64_t{0})
                     .max(kMaxWidth));
}

void add_mixer_keys(std::vector<ConfigKey>& keys) {
  const auto size = [](const char* hf, const char* alias, const char* gguf, int64_t fallback, double max,
                       KeyEffect effect, int64_t MambaMixerConfig::*member) {
    return Key(hf, [member](ModelConfig& c) -> KeyField { return &(c.ssm.*member); })
        .alias(alias)
        .gguf(gguf)
        .fallback(fallback)
        .max(max)
        .effect(effect);
  };
  keys.push_back(size("ssm_state_size", "mamba_d_state", "ssm.state_size", 128, 1 << 20, KeyEffect::State,
                      &MambaMixerConfig::d_state));
  keys.push_back(size("conv_kernel", "mamba_d_conv", "ssm.conv_kernel", 4, 1 << 20, KeyEffect::State,
                      &MambaMixerConfig::d_conv));
  keys.push_back(size("expand", "mamba_expand", "", 2, 64, KeyEffect::State, &MambaMixerConfig::expand));
  keys.push_back(size("n_groups", "mamba_n_groups", "ssm.group_count", 8, 1 << 16, KeyEffect::State,
                      &MambaMixerConfig::ngroups));
  keys.push_back(size("chunk_size", "mamba_chunk_size", "", 128, 1 << 16, KeyEffect::None,
                      &MambaMixerConfig::chunk_size));
  keys.push_back(Key("mamba_proj_bias", [](ModelConfig& c) -> KeyField { return &c.ssm.use_bias; })
                     .alias("use_bias")
                     .type(KeyType::Bool)
                     .fallback(false));
  keys.push_back(Key("use_conv_bias", [](ModelConfig& c) -> KeyField { return &c.ssm.use_conv_bias; })
                     .alias("mamba_conv_bias")
                     .type(KeyType::Bool)
                     .fallback(true));
  keys.push_back(Key("mamba_head_dim", [](ModelConfig& c) -> KeyField { return &c.ssm.headdim; })
                     .max(1 << 16)
                     .effect(KeyEffect::State));
}

// hybrid_override_pattern, or layers_block_type in either of transformers' spellings.
void nemotron_pattern(const ConfigReader& reader, ModelConfig& c) {
  std::string& pattern = c.hybrid.pattern;
  if (!reader.has("hybrid_override_pattern")) {
    if (!reader.has("layers_block_type"))
      throw Error(reader.where() + ": neither 'hybrid_override_pattern' nor 'layers_block_type' is present");
    const json& types = reader.at("layers_block_type");
    if (!types.is_array()) throw Error(reader.where() + ": 'layers_block_type' must be a list");
    for (const json& t : types) {
      if (t == "mamba" || t == "linear_attention")
        pattern += kMambaLayer;
      else if (t == "attention" || t == "full_attention")
        pattern += kAttentionLayer;
      else if (t == "mlp")
        pattern += kMlpLayer;
      else if (t == "moe")
        pattern += kMoeLayer;
      else
        throw Error(reader.where() + ": 'layers_block_type' holds an unknown layer type " + json_excerpt(t));
    }
  }
  if (pattern.empty() || static_cast<int64_t>(pattern.size()) > kMaxLayers)
    throw Error(reader.where() + ": the layer pattern must have 1 to " + std::to_string(kMaxLayers) +
                " layers");
  for (size_t l = 0; l < pattern.size(); ++l) {
    const char kind = pattern[l];
    if (kind != kMambaLayer && kind != kAttentionLayer && kind != kMlpLayer && kind != kMoeLayer)
      throw Error(reader.where() + ": the layer pattern holds '" + std::string(1, kind) + "' at layer " +
                  std::to_string(l) + " (expected M, *, - or E)");
  }
  const int64_t layers = static_cast<int64_t>(pattern.size());
  if (c.n_layer != 0 && c.n_layer != layers)
    throw Error(reader.where() + ": num_hidden_layers = " + std::to_string(c.n_layer) +
                " but the layer pattern has " + std::to_string(layers) + " layers");
  c.n_layer = layers;
}

// Nemotron-H's 'E' layers: refusals of what the engine does not run.
void nemotron_experts(const ConfigReader& reader, MoeConfig& e) {
  e.scoring = MoeScoring::SigmoidBias;
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
}

void parse_nemotron_extra(const ConfigReader& reader, ModelConfig& c) {
  c.family = ModelFamily::NemotronH;
  c.arch = Architecture::Mamba2;
  HybridConfig& h = c.hybrid;
  nemotron_pattern(reader, c);
  AttentionConfig& a = h.attention;
  if (a.n_kv_heads == 0) a.n_kv_heads = a.n_heads;
  if (a.head_dim == 0) a.head_dim = c.d_model / a.n_heads;
  a.scale = 1.0 / std::sqrt(static_cast<double>(a.head_dim));
  h.mlp.activation = Activation::ReluSquared;
  if (reader.string_or("mlp_hidden_act", "relu2") != "relu2")
    throw Error(reader.where() + ": mlp_hidden_act '" + reader.string_or("mlp_hidden_act", "") +
                "' is not supported (expected \"relu2\")");
  // The expert keys matter only where the pattern has mixture-of-experts layers.
  if (h.pattern.find(kMoeLayer) != std::string::npos)
    nemotron_experts(reader, h.moe);
  else
    h.moe = MoeConfig{};
  if (reader.string_or("mamba_hidden_act", "silu") != "silu")
    throw Error(reader.where() + ": mamba_hidden_act '" + reader.string_or("mamba_hidden_act", "") +
                "' is not supported (expected \"silu\")");
  // d_ssm = mamba_num_heads x mamba_head_dim, not expand x hidden_size (the spec's first trap).
  // time_step_min is a training floor, not applied at inference (HF's CUDA path and llama.cpp).
  MambaMixerConfig& m = c.ssm;
  m.d_inner = reader.positive_int("mamba_num_heads", 1 << 20) * m.headdim;
  m.gated_norm = true;
  m.dt_limit_min = 0.0;
  m.dt_limit_max = INFINITY;
  parse_dt_limit(reader, "time_step_limit", m);
}

std::vector<BlockSpec> nemotron_blocks(const ModelConfig& c) {
  std::vector<BlockSpec> list;
  for (int64_t l = 0; l < c.n_layer; ++l) {
    const char kind = c.hybrid.pattern[static_cast<size_t>(l)];
    const BlockKind block = kind == kMambaLayer       ? BlockKind::Mamba2Mixer
                            : kind == kAttentionLayer ? BlockKind::Attention
                            : kind == kMoeLayer       ? BlockKind::Moe
                                                      : BlockKind::Mlp;
    list.push_back({block, l, {"backbone.layers." + std::to_string(l) + "."}});
  }
  return list;
}

void nemotron_hf_extra(const ModelConfig& c, json& hf) {
  const HybridConfig& h = c.hybrid;
  hf.update({{"model_type", "nemotron_h"},
             {"architectures", {"NemotronHForCausalLM"}},
             {"mlp_hidden_act", "relu2"},
             {"mamba_num_heads", c.ssm.n_heads()},
             {"mamba_hidden_act", "silu"},
             {"bos_token_id", 0},
             {"eos_token_id", 0},
             {"pad_token_id", 0},
             {"torch_dtype", "float32"}});
  if (h.pattern.find(kMoeLayer) == std::string::npos) {
    for (const char* key : {"n_routed_experts", "num_experts_per_tok", "moe_intermediate_size",
                            "moe_shared_expert_intermediate_size", "norm_topk_prob", "routed_scaling_factor"})
      hf.erase(key);
  } else {
    hf.update({{"n_shared_experts", 1}, {"n_group", 1}, {"topk_group", 1}});
  }
  if (h.moe.latent == 0) hf.erase("moe_latent_size");
}

Family make_nemotron_h() {
  Family f;
  f.name = "nemotron-h";
  f.id = ModelFamily::NemotronH;
  f.model_types = {"nemotron_h"};
  f.gguf_archs = {kGgufNemotronH, kGgufNemotronHMoe};
  f.keys = nemotron_model_keys();
  add_expert_keys(f.keys);
  add_mixer_keys(f.keys);
  f.parse_extra = parse_nemotron_extra;
  f.validate = [](const ModelConfig& c, const std::string& where) {
    validate_mamba_mixer(c.ssm, c.arch, c.d_model, where);
    validate_hybrid(c, where);
  };
  f.blocks = nemotron_blocks;
  f.gguf_extra = [](const GgufFile& file, const std::string& arch, json& hf) {
    hf.update(gguf_hybrid_config_json(file, arch, hf.value("vocab_size", int64_t{0})));
  };
  f.write_gguf_extra = [](GgufWriter& writer, const ModelConfig& c, const std::string&) {
    set_gguf_hybrid_metadata(writer, c, c.vocab_rows);
  };
  f.gguf_arch = [](const ModelConfig& c) {
    return std::string(c.hybrid.moe.n_experts > 0 ? kGgufNemotronHMoe : kGgufNemotronH);
  };
  f.check_gguf = [](const ModelConfig& c) {
    check_hybrid_gguf(c);
    if (c.hybrid.moe.n_experts == 0) return;
    // llama.cpp's nemotron_h_moe makes every feed-forward layer a mixture of experts and loads no
    // shared-expert biases.
    if (c.hybrid.pattern.find(kMlpLayer) != std::string::npos)
      throw Error(
          "Nemotron-H models with both MLP ('-') and mixture-of-experts ('E') layers cannot be written "
          "as GGUF (llama.cpp's nemotron_h_moe makes every feed-forward layer a mixture of experts)");
    if (c.hybrid.mlp.bias)
      throw Error(
          "Nemotron-H mixture-of-experts models with MLP biases cannot be written as GGUF (llama.cpp's "
          "nemotron_h_moe has no ffn_up_shexp or ffn_down_shexp bias)");
  };
  f.hf_extra = nemotron_hf_extra;
  f.example = [](int64_t d_model, int64_t n_layer, int64_t vocab) {
    std::string pattern;
    for (int64_t l = 0; l < n_layer; ++l) pattern += "M*-"[l % 3];
    return json{{"model_type", "nemotron_h"},
                {"hidden_size", d_model},
                {"vocab_size", vocab},
                {"hybrid_override_pattern", pattern},
                {"num_attention_heads", 4},
                {"num_key_value_heads", 2},
                {"intermediate_size", 2 * d_model},
                {"ssm_state_size", 128},
                {"n_groups", 1},
                {"mamba_head_dim", 64},
                {"mamba_num_heads", 2 * d_model / 64 > 0 ? 2 * d_model / 64 : 1}};
  };
  return f;
}

}  // namespace

const Family& nemotron_h_family() {
  static const Family family = make_nemotron_h();
  return family;
}

}  // namespace mb
