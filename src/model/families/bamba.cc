// SPDX-License-Identifier: MIT
// IBM's Bamba (Hugging Face model_type "bamba", BambaForCausalLM; ../shared/specs/hybrids-2.md,
// section 1): Granite-4.0-H's blocks with RoPE. Each layer is an input RMSNorm, a Mamba-2 mixer or
// GQA attention (the layers attn_layer_indices lists), then a pre-FF RMSNorm and a SwiGLU MLP with
// separate gate_proj and up_proj. No multipliers: the attention scale is head_dim^-0.5.
//
// RoPE is partial: BambaConfig hard-codes partial_rotary_factor 0.5, so the first head_dim / 2
// channels of each head rotate, channel i paired with i + head_dim / 4 (transformers'
// rotate_half inside the rotated channels), and the rest pass through. llama.cpp loads Bamba as
// granitehybrid and pairs channels differently: its converter permutes the q and k rows over the
// whole head and its NORM rope then rotates pairs (i, i + head_dim / 2); that moves the logits by
// about 1 on the golden model. We follow transformers (the authors' code): a granitehybrid GGUF
// file with RoPE is read back to transformers' layout (the permutation undone, as for every
// granitehybrid file) and rotated as transformers does, its rope.dimension_count giving the
// rotated channels.
#include <cmath>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/json_text.h"
#include "io/gguf.h"
#include "model/config_reader.h"
#include "model/family.h"

namespace mb {
namespace {

using nlohmann::json;

// attn_layer_indices: the attention layers, every other one Mamba; all Mamba when absent (as
// BambaConfig reads None).
std::string bamba_pattern(const ConfigReader& reader, int64_t n_layer) {
  std::string pattern(static_cast<size_t>(n_layer), kMambaLayer);
  if (!reader.has("attn_layer_indices")) return pattern;
  const json& list = reader.at("attn_layer_indices");
  if (!list.is_array())
    throw Error(reader.where() + ": 'attn_layer_indices' must be a list of layer indices, got " +
                json_excerpt(list));
  for (const json& index : list) {
    if (!index.is_number_integer() || index.get<int64_t>() < 0 || index.get<int64_t>() >= n_layer)
      throw Error(reader.where() + ": 'attn_layer_indices' holds " + json_excerpt(index) +
                  ", not a layer index below num_hidden_layers = " + std::to_string(n_layer));
    char& kind = pattern[static_cast<size_t>(index.get<int64_t>())];
    if (kind == kAttentionLayer)
      throw Error(reader.where() + ": 'attn_layer_indices' lists layer " + json_excerpt(index) + " twice");
    kind = kAttentionLayer;
  }
  return pattern;
}

// transformers' newer spelling of the RoPE settings: only the default rope type, its base and the
// partial factor.
void read_rope_parameters(const ConfigReader& reader, ModelConfig& c) {
  if (reader.has("rope_scaling"))
    throw Error(reader.where() + ": 'rope_scaling' = " + json_excerpt(reader.at("rope_scaling")) +
                " is not supported (only unscaled RoPE: null or absent)");
  if (!reader.has("rope_parameters")) return;
  const json& r = reader.at("rope_parameters");
  if (!r.is_object())
    throw Error(reader.where() + ": 'rope_parameters' must be an object, got " + json_excerpt(r));
  for (const auto& [key, value] : r.items()) {
    const std::string name = "rope_parameters." + key;
    if (key == "rope_type") {
      if (value != "default")
        throw Error(reader.where() + ": '" + name + "' = " + json_excerpt(value) +
                    " is not supported (only \"default\")");
    } else if (key == "rope_theta" || key == "partial_rotary_factor") {
      if (!value.is_number() || !(value.get<double>() > 0.0) || !std::isfinite(value.get<double>()))
        throw Error(reader.where() + ": '" + name + "' must be a positive number, got " +
                    json_excerpt(value));
      (key == "rope_theta" ? c.hybrid.attention.rope_theta : c.hybrid.attention.partial_rotary_factor) =
          value.get<double>();
    } else {
      throw Error(reader.where() + ": '" + name + "' is not supported (only unscaled RoPE)");
    }
  }
}

void parse_bamba_extra(const ConfigReader& reader, ModelConfig& c) {
  c.family = ModelFamily::Bamba;
  c.arch = Architecture::Mamba2;
  HybridConfig& h = c.hybrid;
  h.pattern = bamba_pattern(reader, c.n_layer);
  AttentionConfig& a = h.attention;
  // BambaAttention: head_dim = config.head_dim if present, else hidden_size // heads.
  a.head_dim = reader.has("head_dim") ? reader.positive_int("head_dim", 1 << 12) : c.d_model / a.n_heads;
  a.scale = 1.0 / std::sqrt(static_cast<double>(a.head_dim));
  read_rope_parameters(reader, c);
  if (reader.string_or("hidden_act", "silu") != "silu")
    throw Error(reader.where() + ": hidden_act '" + reader.string_or("hidden_act", "") +
                "' is not supported (expected \"silu\")");
  h.mlp.activation = Activation::SwiGlu;
  h.mlp.separate_gate = true;

  MambaMixerConfig& m = c.ssm;
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
  m.d_inner = d_inner;
  m.gated_norm = true;
  // BambaMixer hard-codes time_step_limit = (0, inf): no dt clamp, whatever the config says.
  m.dt_limit_min = 0.0;
  m.dt_limit_max = INFINITY;
}

void validate_bamba(const ModelConfig& c, const std::string& where) {
  validate_mamba_mixer(c.ssm, c.arch, c.d_model, where);
  validate_hybrid(c, where);
  const AttentionConfig& a = c.hybrid.attention;
  const double rotated = a.head_dim * a.partial_rotary_factor;
  if (!(a.partial_rotary_factor > 0.0 && a.partial_rotary_factor <= 1.0) || rotated != std::round(rotated) ||
      a.rotary_dims() % 2 != 0 || a.rotary_dims() < 2)
    throw Error(where + ": partial_rotary_factor = " + json(a.partial_rotary_factor).dump() +
                " of the head size " + std::to_string(a.head_dim) +
                " must rotate an even number of channels (at least 2)");
  // BambaRMSNormGated normalizes all of d_ssm at once; the Mamba-2 block normalizes each group,
  // which is the same only with one group (llama.cpp groups it too, the spec's 0.57 difference).
  if (c.ssm.ngroups != 1)
    throw Error(where + ": mamba_n_groups = " + std::to_string(c.ssm.ngroups) +
                " is not supported (Bamba's gated norm spans every group; only 1)");
}

std::vector<BlockSpec> bamba_blocks(const ModelConfig& c) {
  std::vector<BlockSpec> list;
  for (int64_t l = 0; l < c.n_layer; ++l) {
    const std::string prefix = "model.layers." + std::to_string(l) + ".";
    const bool mamba = c.hybrid.pattern[static_cast<size_t>(l)] == kMambaLayer;
    list.push_back({mamba ? BlockKind::Mamba2Mixer : BlockKind::Attention,
                    l,
                    {prefix, mamba ? "mamba." : "self_attn.", "input_layernorm.weight"}});
    list.push_back(
        {BlockKind::Mlp, l, {prefix, "feed_forward.", "pre_ff_layernorm.weight", "ffn_norm.weight"}});
  }
  return list;
}

// The {arch}.* key `name` of `file`, for messages.
std::string bamba_meta(const GgufFile& file, const std::string& arch, const std::string& name) {
  return "'" + file.path() + "': metadata '" + arch + "." + name + "'";
}

// llama.cpp's switch for RoPE in a granitehybrid file (conversion/granite.py: true for
// BambaForCausalLM, false for Granite-4.0-H; the runtime's default when absent is true).
bool granitehybrid_rope(const GgufFile& file, const std::string& arch) {
  return file.bool_if_present(arch + ".rope.scaling.finetuned").value_or(true);
}

// Why a granitehybrid file with RoPE is read as Bamba: the words every refusal below adds.
std::string read_as_bamba(const GgufFile& file, const std::string& arch) {
  const std::optional<bool> rope = file.bool_if_present(arch + ".rope.scaling.finetuned");
  return ": a granitehybrid file whose " + bamba_meta(file, arch, "rope.scaling.finetuned") +
         (rope ? " is true" : " is absent") +
         " runs its attention with RoPE, which llama.cpp's converter writes for Bamba only, so it is read as "
         "Bamba";
}

// llama.cpp's granitehybrid metadata as its converter writes it for Bamba
// (conversion/granite.py, GraniteHybridModel): per-layer head_count_kv (0 on the Mamba layers:
// the pattern), the Mamba-2 width as inner size and head count, rope.dimension_count
// (attn_rotary_emb, which transformers ignores; we rotate as many channels as the file says) and
// no multipliers or experts (Granite-4.0-H's, which set rope.scaling.finetuned false).
void bamba_gguf_extra(const GgufFile& file, const std::string& arch, json& hf) {
  // llama.cpp's defaults are 0 (none) or 1; Bamba's attention scale is head_dim^-0.5, checked
  // below once the head size is known.
  for (const char* name : {"embedding_scale", "residual_scale", "logit_scale"})
    if (const GgufValue* v = file.find(arch + "." + name);
        v != nullptr && !(v->floats.size() == 1 && (v->floats[0] == 0.0 || v->floats[0] == 1.0)))
      throw Error(bamba_meta(file, arch, name) + " is set" + read_as_bamba(file, arch) +
                  ", which has no such multiplier");
  if (file.unsigned_if_present(arch + ".expert_count").value_or(0) > 0)
    throw Error(bamba_meta(file, arch, "expert_count") + " is set" + read_as_bamba(file, arch) +
                ", which has no experts");
  const int64_t layers = hf.value("num_hidden_layers", int64_t{0});
  if (layers < 1) return;  // refused by the declared key, naming it
  const GgufValue* kv = file.find(arch + ".attention.head_count_kv");
  if (kv == nullptr || kv->integers.empty() || (kv->is_array() && static_cast<int64_t>(kv->size()) != layers))
    throw Error(bamba_meta(file, arch, "attention.head_count_kv") +
                " must list one integer per layer (0 for the Mamba layers)");
  json attention = json::array();
  int64_t kv_heads = 0;
  for (int64_t l = 0; l < layers; ++l) {
    const int64_t heads = kv->integers[kv->is_array() ? static_cast<size_t>(l) : 0];
    if (heads < 0 || (kv_heads > 0 && heads > 0 && heads != kv_heads))
      throw Error(bamba_meta(file, arch, "attention.head_count_kv") + " holds " + std::to_string(heads) +
                  " for layer " + std::to_string(l) + " (Bamba's attention layers share one KV head count)");
    if (heads == 0) continue;
    attention.push_back(l);
    kv_heads = heads;
  }
  hf["attn_layer_indices"] = attention;
  if (kv_heads > 0) hf["num_key_value_heads"] = kv_heads;
  const auto size = [&](const std::string& name) {
    const std::optional<uint64_t> v = file.unsigned_if_present(arch + "." + name);
    if (!v || *v < 1 || *v > (1u << 24))
      throw Error(bamba_meta(file, arch, name) + " must be a positive integer");
    return static_cast<int64_t>(*v);
  };
  const int64_t hidden = hf.value("hidden_size", int64_t{0}), inner = size("ssm.inner_size"),
                ssm_heads = size("ssm.time_step_rank");
  if (hidden < 1 || inner % hidden != 0 || inner % ssm_heads != 0)
    throw Error(bamba_meta(file, arch, "ssm.inner_size") + " = " + std::to_string(inner) +
                " is not a multiple of embedding_length and ssm.time_step_rank");
  hf["mamba_expand"] = inner / hidden;
  hf["mamba_n_heads"] = ssm_heads;
  hf["mamba_d_head"] = inner / ssm_heads;
  const int64_t heads = hf.value("num_attention_heads", int64_t{0});
  if (heads < 1) return;                                 // refused by the declared key, naming it
  if (kv_heads == 0) hf["num_key_value_heads"] = heads;  // no attention layer: any divisor
  const int64_t head_dim = hidden / heads;
  if (const GgufValue* v = file.find(arch + ".attention.scale");
      v != nullptr && !(v->floats.size() == 1 &&
                        (v->floats[0] == 0.0 || static_cast<float>(v->floats[0]) ==
                                                    static_cast<float>(1.0 / std::sqrt(double(head_dim))))))
    throw Error(bamba_meta(file, arch, "attention.scale") + " is not head_dim^-0.5" +
                read_as_bamba(file, arch) + ", whose attention scale is");
  // Absent: LlamaModel's default, the whole head.
  const int64_t rotated = static_cast<int64_t>(
      file.unsigned_if_present(arch + ".rope.dimension_count").value_or(static_cast<uint64_t>(head_dim)));
  if (rotated < 2 || rotated > head_dim || rotated % 2 != 0)
    throw Error(bamba_meta(file, arch, "rope.dimension_count") + " = " + std::to_string(rotated) +
                " must be even, from 2 to the head size " + std::to_string(head_dim));
  hf["attn_rotary_emb"] = rotated;
  hf["partial_rotary_factor"] = static_cast<double>(rotated) / static_cast<double>(head_dim);
}

void write_bamba_gguf_extra(GgufWriter& writer, const ModelConfig& c, const std::string& arch) {
  const auto key = [&](const std::string& name) { return arch + "." + name; };
  std::vector<int64_t> kv;
  for (char kind : c.hybrid.pattern)
    kv.push_back(kind == kAttentionLayer ? c.hybrid.attention.n_kv_heads : 0);
  writer.set(key("attention.head_count_kv"), GgufValue::integer_array(GgufType::Int32, std::move(kv)));
  writer.set(key("ssm.inner_size"), GgufValue::u32(static_cast<uint32_t>(c.ssm.d_inner)));
  writer.set(key("ssm.time_step_rank"), GgufValue::u32(static_cast<uint32_t>(c.ssm.n_heads())));
  writer.set(key("rope.dimension_count"),
             GgufValue::u32(static_cast<uint32_t>(c.hybrid.attention.rotary_dims())));
  writer.set(key("rope.scaling.finetuned"), GgufValue::boolean(true));
  // llama.cpp requires a training context length; BambaConfig's max_position_embeddings default.
  writer.set(key("context_length"), GgufValue::u32(262144));
}

// llama.cpp's granitehybrid has no in_proj / out_proj bias for the Mamba layers.
void check_bamba_gguf(const ModelConfig& c) {
  // llama.cpp's granitehybrid heads are embedding_length / head_count wide (its converter drops
  // head_dim).
  const AttentionConfig& a = c.hybrid.attention;
  if (a.head_dim * a.n_heads != c.d_model)
    throw Error(
        "Bamba models with head_dim " + std::to_string(a.head_dim) +
        " other than hidden_size / num_attention_heads cannot be written as GGUF (llama.cpp's granitehybrid "
        "has no key for it)");
  if (c.ssm.use_bias)
    throw Error(
        "Bamba models with mamba_proj_bias cannot be written as GGUF (llama.cpp's granitehybrid has no "
        "ssm_in or ssm_out bias)");
}

void bamba_hf_extra(const ModelConfig& c, json& hf) {
  json attention = json::array();
  for (size_t l = 0; l < c.hybrid.pattern.size(); ++l)
    if (c.hybrid.pattern[l] == kAttentionLayer) attention.push_back(l);
  hf["architectures"] = {"BambaForCausalLM"};
  hf["attn_layer_indices"] = attention;
  hf["attn_rotary_emb"] = c.hybrid.attention.rotary_dims();
  hf["mamba_n_heads"] = c.ssm.n_heads();
  hf["mamba_d_head"] = c.ssm.headdim;
  hf["head_dim"] = c.hybrid.attention.head_dim;
}

json bamba_example(int64_t d_model, int64_t n_layer, int64_t vocab) {
  json attention = json::array();
  for (int64_t l = 1; l < n_layer; l += 3) attention.push_back(l);
  return {{"model_type", "bamba"},
          {"architectures", {"BambaForCausalLM"}},
          {"hidden_size", d_model},
          {"num_hidden_layers", n_layer},
          {"vocab_size", vocab},
          {"attn_layer_indices", attention},
          {"num_attention_heads", 4},
          {"num_key_value_heads", 2},
          {"intermediate_size", 3 * d_model / 2},
          {"mamba_n_heads", 2 * d_model / 16},
          {"mamba_d_head", 16},
          {"mamba_d_state", 16},
          {"mamba_n_groups", 1},
          {"mamba_expand", 2},
          {"mamba_d_conv", 4},
          {"mamba_chunk_size", 32},
          {"rope_theta", 10000.0},
          {"rms_norm_eps", 1e-5},
          {"tie_word_embeddings", false}};
}

Family make_bamba() {
  Family f;
  f.name = "bamba";
  f.id = ModelFamily::Bamba;
  f.model_types = {"bamba"};
  f.gguf_archs = {"granitehybrid"};
  const KeyEffect state = KeyEffect::State;
  // BambaConfig's defaults where a key is absent.
  f.keys = {
      int_key(
          "hidden_size", "embedding_length", [](ModelConfig& c) { return &c.d_model; }, 4096, 1, kMaxDModel,
          state),
      int_key(
          "num_hidden_layers", "block_count", [](ModelConfig& c) { return &c.n_layer; }, 32, 1, kMaxLayers,
          state),
      int_key(
          "vocab_size", "vocab_size", [](ModelConfig& c) { return &c.vocab_size; }, 128000, 1, kMaxVocab),
      bool_key(
          "tie_word_embeddings", "", [](ModelConfig& c) { return &c.tie_embeddings; }, false),
      number_key(
          "rms_norm_eps", "attention.layer_norm_rms_epsilon", [](ModelConfig& c) { return &c.norm_eps; },
          1e-5, 1e-30, 0.5),
      int_key(
          "num_attention_heads", "attention.head_count",
          [](ModelConfig& c) { return &c.hybrid.attention.n_heads; }, 32, 1, 1 << 12, state),
      // A per-layer array in GGUF files, 0 on the Mamba layers (bamba_gguf_extra).
      int_key(
          "num_key_value_heads", "", [](ModelConfig& c) { return &c.hybrid.attention.n_kv_heads; }, 8, 1,
          1 << 12, state),
      bool_key(
          "attention_bias", "", [](ModelConfig& c) { return &c.hybrid.attention.bias; }, false),
      number_key(
          "rope_theta", "rope.freq_base", [](ModelConfig& c) { return &c.hybrid.attention.rope_theta; },
          10000.0, 1e-6, 1e30),
      // BambaConfig sets 0.5 whatever config.json says (and saves it); our GGUF reader states the
      // file's rope.dimension_count with it (bamba_gguf_extra).
      number_key(
          "partial_rotary_factor", "",
          [](ModelConfig& c) { return &c.hybrid.attention.partial_rotary_factor; }, 0.5, 1e-6, 1.0),
      int_key(
          "intermediate_size", "feed_forward_length", [](ModelConfig& c) { return &c.hybrid.mlp.width; },
          14336),
      bool_key(
          "mlp_bias", "", [](ModelConfig& c) { return &c.hybrid.mlp.bias; }, false),
      int_key(
          "mamba_d_state", "ssm.state_size", [](ModelConfig& c) { return &c.ssm.d_state; }, 256, 1, 1 << 20,
          state),
      int_key(
          "mamba_d_conv", "ssm.conv_kernel", [](ModelConfig& c) { return &c.ssm.d_conv; }, 4, 1, 1 << 10,
          state),
      // In GGUF files: ssm.inner_size / embedding_length (bamba_gguf_extra).
      int_key(
          "mamba_expand", "", [](ModelConfig& c) { return &c.ssm.expand; }, 2, 1, 64, state),
      int_key(
          "mamba_n_groups", "ssm.group_count", [](ModelConfig& c) { return &c.ssm.ngroups; }, 1, 1, 1 << 16,
          state),
      // The SSD chunk length changes no bit of the sequential form and only the rounding of the
      // chunked one (--scan), which the command line chooses.
      int_key(
          "mamba_chunk_size", "", [](ModelConfig& c) { return &c.ssm.chunk_size; }, 256, 1, 1 << 16,
          KeyEffect::None),
      bool_key(
          "mamba_conv_bias", "", [](ModelConfig& c) { return &c.ssm.use_conv_bias; }, true),
      bool_key(
          "mamba_proj_bias", "", [](ModelConfig& c) { return &c.ssm.use_bias; }, false),
  };
  f.parse_extra = parse_bamba_extra;
  f.validate = validate_bamba;
  f.blocks = bamba_blocks;
  f.gguf_claims = granitehybrid_rope;
  f.gguf_extra = bamba_gguf_extra;
  f.write_gguf_extra = write_bamba_gguf_extra;
  f.check_gguf = check_bamba_gguf;
  f.hf_extra = bamba_hf_extra;
  f.example = bamba_example;
  return f;
}

}  // namespace

const Family& bamba_family() {
  // Built once from constant declarations, never changed.
  static const Family family = make_bamba();
  return family;
}

}  // namespace mb
