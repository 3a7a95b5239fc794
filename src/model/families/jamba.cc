// SPDX-License-Identifier: MIT
// The Jamba family (families/jamba.h): its config keys, as HF's JambaConfig reads them and as
// llama.cpp's JambaModel.set_gguf_parameters writes them, and its block list.
#include "model/families/jamba.h"

#include <cmath>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/json_text.h"
#include "io/gguf.h"
#include "model/config_reader.h"
#include "model/family.h"
#include "model/weight_schema.h"

namespace mb {
namespace {

using nlohmann::json;

constexpr int64_t kJambaMaxHeads = 1 << 12;
constexpr int64_t kJambaMaxWidth = 1 << 20;
constexpr int64_t kJambaMaxExperts = 1 << 16;

std::vector<ConfigKey> jamba_keys() {
  const KeyEffect S = KeyEffect::State, M = KeyEffect::Math;
  return {
      int_key(
          "hidden_size", "embedding_length", [](ModelConfig& c) { return &c.d_model; }, std::nullopt, 1,
          kMaxDModel, S),
      int_key(
          "num_hidden_layers", "block_count", [](ModelConfig& c) { return &c.n_layer; }, std::nullopt, 1,
          kMaxLayers, S),
      int_key(
          "vocab_size", "", [](ModelConfig& c) { return &c.vocab_size; }, std::nullopt, 1, kMaxVocab, S),
      number_key(
          "rms_norm_eps", "attention.layer_norm_rms_epsilon", [](ModelConfig& c) { return &c.norm_eps; },
          1e-6, 1e-30, 0.5, M),
      bool_key(
          "tie_word_embeddings", "", [](ModelConfig& c) { return &c.tie_embeddings; }, false, M),
      int_key(
          "num_attention_heads", "attention.head_count",
          [](ModelConfig& c) { return &c.hybrid.attention.n_heads; }, 32, 1, kJambaMaxHeads, S),
      // GGUF: a per-layer array, 0 on the Mamba layers (the gguf_extra hook).
      int_key(
          "num_key_value_heads", "", [](ModelConfig& c) { return &c.hybrid.attention.n_kv_heads; }, 8, 1,
          kJambaMaxHeads, S),
      // The dense MLP's width, and every expert's.
      int_key(
          "intermediate_size", "feed_forward_length", [](ModelConfig& c) { return &c.hybrid.mlp.width; },
          14336, 1, kJambaMaxWidth, S),
      // The layer pattern: GGUF files say it per layer (head_count_kv, the routers).
      int_key(
          "attn_layer_period", "", [](ModelConfig& c) { return &c.jamba.attn_period; }, 8, 1, kMaxLayers, S),
      int_key(
          "attn_layer_offset", "", [](ModelConfig& c) { return &c.jamba.attn_offset; }, 4, 0, kMaxLayers, S),
      int_key(
          "expert_layer_period", "", [](ModelConfig& c) { return &c.jamba.expert_period; }, 2, 1, kMaxLayers,
          S),
      int_key(
          "expert_layer_offset", "", [](ModelConfig& c) { return &c.jamba.expert_offset; }, 1, 0, kMaxLayers,
          S),
      int_key(
          "num_experts", "expert_count", [](ModelConfig& c) { return &c.hybrid.moe.n_experts; }, 16, 1,
          kJambaMaxExperts, S),
      int_key(
          "num_experts_per_tok", "expert_used_count", [](ModelConfig& c) { return &c.hybrid.moe.top_k; }, 2,
          1, kJambaMaxExperts, M),
      int_key(
          "mamba_d_state", "ssm.state_size", [](ModelConfig& c) { return &c.ssm.d_state; }, 16, 1, 1 << 20,
          S),
      int_key(
          "mamba_d_conv", "ssm.conv_kernel", [](ModelConfig& c) { return &c.ssm.d_conv; }, 4, 1, 1 << 10, S),
      // GGUF: ssm.inner_size (= expand x hidden; the gguf_extra hook).
      int_key(
          "mamba_expand", "", [](ModelConfig& c) { return &c.ssm.expand; }, 2, 1, 64, S),
      // Saved configs hold an int (JambaConfig resolves "auto" to ceil(hidden / 16) in __init__).
      int_key(
          "mamba_dt_rank", "ssm.time_step_rank", [](ModelConfig& c) { return &c.ssm.dt_rank; }, std::nullopt,
          1, 1 << 16, S),
      // GGUF: the presence of the bias tensors (the gguf_extra hook).
      bool_key(
          "mamba_conv_bias", "", [](ModelConfig& c) { return &c.ssm.use_conv_bias; }, true, S),
      bool_key(
          "mamba_proj_bias", "", [](ModelConfig& c) { return &c.ssm.use_bias; }, false, S),
  };
}

// What the keys do not say one to one: the derived sizes, the fixed parts of the math, and the
// refusals of settings HF's JambaForCausalLM accepts but the engine does not run.
void jamba_parse_extra(const ConfigReader& reader, ModelConfig& c) {
  c.family = ModelFamily::Jamba;
  c.arch = Architecture::Mamba1;
  if (reader.string_or("hidden_act", "silu") != "silu")
    throw Error(reader.where() + ": hidden_act '" + reader.string_or("hidden_act", "") +
                "' is not supported (expected \"silu\")");
  // JambaAttention passes sliding_window to the attention kernel; the released models set null.
  if (reader.has("sliding_window"))
    throw Error(reader.where() + ": 'sliding_window' = " + json_excerpt(reader.at("sliding_window")) +
                " is not supported (only null: full attention)");
  MambaMixerConfig& m = c.ssm;
  m.d_inner = m.expand * c.d_model;
  m.mixer_rms_norm = true;      // dt, B and C are RMS-normalized before use
  m.mixer_norm_weights = true;  // with weights (dt_layernorm, b_layernorm, c_layernorm)
  m.mixer_rms_eps = c.norm_eps;
  AttentionConfig& a = c.hybrid.attention;
  a.head_dim = c.d_model / a.n_heads;  // JambaAttention: hidden_size // num_attention_heads
  a.scale = 1.0 / std::sqrt(static_cast<double>(a.head_dim));
  a.rope_theta = 0.0;  // no RoPE (HF and llama.cpp agree)
  a.bias = false;
  c.hybrid.mlp.activation = Activation::SwiGlu;
  MoeConfig& e = c.hybrid.moe;
  e.width = c.hybrid.mlp.width;  // every expert is intermediate_size wide
  e.scoring = MoeScoring::SoftmaxAll;
  e.normalize = false;
  e.scale = 1.0;
  // The per-layer pattern, in the hybrids' letters, for what reads it generically.
  c.hybrid.pattern.clear();
  for (int64_t l = 0; l < c.n_layer; ++l)
    c.hybrid.pattern += c.jamba.attention_at(l) ? kAttentionLayer : kMambaLayer;
}

void jamba_validate(const ModelConfig& c, const std::string& where) {
  validate_mamba_mixer(c.ssm, Architecture::Mamba1, c.d_model, where);
  const AttentionConfig& a = c.hybrid.attention;
  if (a.n_heads > c.d_model)
    throw Error(where + ": num_attention_heads = " + std::to_string(a.n_heads) +
                " exceeds hidden_size = " + std::to_string(c.d_model));
  if (a.n_heads % a.n_kv_heads != 0)
    throw Error(where + ": num_attention_heads " + std::to_string(a.n_heads) +
                " is not a multiple of num_key_value_heads " + std::to_string(a.n_kv_heads));
  const MoeConfig& e = c.hybrid.moe;
  if (e.top_k > e.n_experts)
    throw Error(where + ": num_experts_per_tok = " + std::to_string(e.top_k) +
                " exceeds num_experts = " + std::to_string(e.n_experts));
  if (!(c.norm_eps < 1.0f)) throw Error(where + ": rms_norm_eps must be below 1");
}

std::vector<BlockSpec> jamba_blocks(const ModelConfig& c) {
  std::vector<BlockSpec> list;
  for (int64_t l = 0; l < c.n_layer; ++l) {
    const std::string prefix = "model.layers." + std::to_string(l) + ".";
    // input_layernorm -> mixer -> + h -> pre_ff_layernorm -> MLP or experts -> + h.
    if (c.jamba.attention_at(l))
      list.push_back({BlockKind::Attention, l, {prefix, "self_attn.", "input_layernorm.weight"}});
    else
      list.push_back({BlockKind::Mamba1Mixer, l, {prefix, "mamba.", "input_layernorm.weight"}});
    list.push_back(
        {BlockKind::JambaFfn, l, {prefix, "feed_forward.", "pre_ff_layernorm.weight", "ffn_norm.weight"}});
  }
  return list;
}

// --- GGUF (llama.cpp's JambaModel) ---
// The converter writes no period or offset: attention layers are those whose head_count_kv entry
// is not 0, expert layers those with a router (ffn_gate_inp). The (period, offset) that give the
// same layers back, or an error naming `what` when no such pair exists.
struct JambaPeriod {
  int64_t period, offset;
};

JambaPeriod jamba_period_of(const std::vector<bool>& on, const std::string& what) {
  const int64_t n = static_cast<int64_t>(on.size());
  std::vector<int64_t> layers;
  for (int64_t l = 0; l < n; ++l)
    if (on[static_cast<size_t>(l)]) layers.push_back(l);
  // None: an offset no layer index reaches.
  if (layers.empty()) return {n + 1, n};
  const JambaPeriod p{layers.size() > 1 ? layers[1] - layers[0] : n, layers[0]};
  for (int64_t l = 0; l < n; ++l)
    if ((l % p.period == p.offset) != on[static_cast<size_t>(l)])
      throw Error(what + ": layer " + std::to_string(l) + (on[static_cast<size_t>(l)] ? " is" : " is not") +
                  " one, which no period and offset (Jamba's attn/expert_layer_period and _offset) give");
  return p;
}

int64_t jamba_layer_count(const GgufFile& file, const std::string& arch) {
  const uint64_t n = file.unsigned_value(arch + ".block_count");
  if (n < 1 || n > static_cast<uint64_t>(kMaxLayers))
    throw Error("'" + file.path() + "': metadata '" + arch + ".block_count' = " + std::to_string(n) +
                " is outside [1, " + std::to_string(kMaxLayers) + "]");
  return static_cast<int64_t>(n);
}

void jamba_gguf_extra(const GgufFile& file, const std::string& arch, json& hf) {
  const int64_t n = jamba_layer_count(file, arch);
  const std::string kv_key = arch + ".attention.head_count_kv", where = "'" + file.path() + "': metadata '";
  const GgufValue* kv = file.find(kv_key);
  if (kv == nullptr) throw Error("'" + file.path() + "': missing required metadata '" + kv_key + "'");
  if (kv->integers.empty() || (kv->is_array() && static_cast<int64_t>(kv->integers.size()) != n))
    throw Error(where + kv_key + "' must hold one integer per layer (" + std::to_string(n) + "), got " +
                std::to_string(kv->integers.size()) + " values");
  std::vector<bool> attends(static_cast<size_t>(n));
  int64_t heads = 0;
  for (int64_t l = 0; l < n; ++l) {
    const int64_t v = kv->integers[kv->is_array() ? static_cast<size_t>(l) : 0];
    if (v < 0 || v > kJambaMaxHeads || (v > 0 && heads > 0 && v != heads))
      throw Error(where + kv_key + "' holds " + std::to_string(v) + " for layer " + std::to_string(l) +
                  ": every attention layer needs the same count in [1, " + std::to_string(kJambaMaxHeads) +
                  "]");
    attends[static_cast<size_t>(l)] = v > 0;
    if (v > 0) heads = v;
  }
  const JambaPeriod attention = jamba_period_of(attends, where + kv_key + "'");
  std::vector<bool> routed(static_cast<size_t>(n));
  for (int64_t l = 0; l < n; ++l)
    routed[static_cast<size_t>(l)] =
        file.find_tensor(gguf_layer_prefix(l) + "ffn_gate_inp.weight") != nullptr;
  const JambaPeriod experts = jamba_period_of(routed, "'" + file.path() + "': the ffn_gate_inp tensors");
  const uint64_t inner = file.unsigned_value(arch + ".ssm.inner_size");
  const uint64_t d_model = file.unsigned_value(arch + ".embedding_length");
  if (d_model == 0 || inner == 0 || inner % d_model != 0)
    throw Error(where + arch + ".ssm.inner_size' = " + std::to_string(inner) +
                " is not a multiple of embedding_length " + std::to_string(d_model) +
                " (Jamba's mixers are mamba_expand x hidden wide)");
  // Bias presence is read from the first Mamba layer; the schema then requires it in every one.
  int64_t mamba = 0;
  while (mamba < n && attends[static_cast<size_t>(mamba)]) ++mamba;
  const auto has = [&](const std::string& suffix) {
    return mamba < n && file.find_tensor(gguf_layer_prefix(mamba) + suffix) != nullptr;
  };
  hf["num_key_value_heads"] = heads > 0 ? heads : hf.value("num_attention_heads", int64_t{1});
  hf["attn_layer_period"] = attention.period;
  hf["attn_layer_offset"] = attention.offset;
  hf["expert_layer_period"] = experts.period;
  hf["expert_layer_offset"] = experts.offset;
  hf["mamba_expand"] = inner / d_model;
  hf["mamba_conv_bias"] = mamba >= n || has("ssm_conv1d.bias");
  hf["mamba_proj_bias"] = has("ssm_in.bias");
}

void jamba_write_gguf_extra(GgufWriter& writer, const ModelConfig& c, const std::string& arch) {
  // The keys JambaModel.set_gguf_parameters writes that the table does not: head_count_kv per
  // layer (0 on the Mamba layers), the mixer width, and the context length (no RoPE: any).
  std::vector<int64_t> kv;
  for (int64_t l = 0; l < c.n_layer; ++l)
    kv.push_back(c.jamba.attention_at(l) ? c.hybrid.attention.n_kv_heads : 0);
  writer.set(arch + ".attention.head_count_kv", GgufValue::integer_array(GgufType::Int32, std::move(kv)));
  writer.set(arch + ".ssm.inner_size", GgufValue::u32(static_cast<uint32_t>(c.ssm.d_inner)));
  writer.set(arch + ".context_length", GgufValue::u32(262144));
}

void jamba_check_gguf(const ModelConfig& c) {
  // llama.cpp's jamba graph has no in_proj or out_proj bias (mamba_proj_bias), so its files
  // cannot hold one.
  if (c.ssm.use_bias)
    throw Error(
        "a Jamba with mamba_proj_bias cannot be written as GGUF (llama.cpp's jamba has no ssm_in or "
        "ssm_out bias)");
}

json jamba_example(int64_t d_model, int64_t n_layer, int64_t vocab) {
  // Jamba-1.5-Mini's pattern (attention every 8th layer at 4, experts on odd layers) scaled
  // down: attention every 4th layer at 1, 4 experts, 2 per token.
  return {{"model_type", "jamba"},    {"architectures", {"JambaForCausalLM"}},
          {"hidden_size", d_model},   {"num_hidden_layers", n_layer},
          {"vocab_size", vocab},      {"num_attention_heads", 4},
          {"num_key_value_heads", 2}, {"intermediate_size", 2 * d_model},
          {"attn_layer_period", 4},   {"attn_layer_offset", 1},
          {"expert_layer_period", 2}, {"expert_layer_offset", 1},
          {"num_experts", 4},         {"num_experts_per_tok", 2},
          {"mamba_d_state", 16},      {"mamba_d_conv", 4},
          {"mamba_expand", 2},        {"mamba_dt_rank", (d_model + 15) / 16},
          {"mamba_conv_bias", true},  {"mamba_proj_bias", false},
          {"rms_norm_eps", 1e-6},     {"tie_word_embeddings", false},
          {"hidden_act", "silu"},     {"bos_token_id", 1},
          {"eos_token_id", 2},        {"pad_token_id", 0},
          {"torch_dtype", "float32"}};
}

void jamba_hf_extra(const ModelConfig&, json& hf) {
  hf["architectures"] = {"JambaForCausalLM"};
  hf["hidden_act"] = "silu";
  hf["sliding_window"] = nullptr;
  hf["use_mamba_kernels"] = false;
}

Family make_jamba_family() {
  Family f;
  f.name = "jamba";
  f.id = ModelFamily::Jamba;
  f.model_types = {"jamba"};
  f.gguf_archs = {"jamba"};
  f.keys = jamba_keys();
  f.parse_extra = jamba_parse_extra;
  f.validate = jamba_validate;
  f.blocks = jamba_blocks;
  f.gguf_extra = jamba_gguf_extra;
  f.write_gguf_extra = jamba_write_gguf_extra;
  f.check_gguf = jamba_check_gguf;
  f.hf_extra = jamba_hf_extra;
  f.example = jamba_example;
  return f;
}

}  // namespace

const Family& jamba_family() {
  static const Family family = make_jamba_family();
  return family;
}

}  // namespace mb
