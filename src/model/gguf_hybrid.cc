// SPDX-License-Identifier: MIT
#include "model/gguf_hybrid.h"

#include <cmath>
#include <nlohmann/json.hpp>
#include <optional>

#include "core/error.h"
#include "model/config_reader.h"
#include "model/family.h"
#include "model/weight_schema.h"

namespace mb {
namespace {

using nlohmann::json;

bool is_integer_type(GgufType type) {
  switch (type) {
    case GgufType::Uint8:
    case GgufType::Int8:
    case GgufType::Uint16:
    case GgufType::Int16:
    case GgufType::Uint32:
    case GgufType::Int32:
    case GgufType::Uint64:
    case GgufType::Int64:
      return true;
    default:
      return false;
  }
}

// Reads the {arch}.* keys of one file, each error naming the file and the key.
class HybridMetadata {
 public:
  HybridMetadata(const GgufFile& file, std::string arch) : file_(file), arch_(std::move(arch)) {}

  std::string key(const std::string& name) const { return arch_ + "." + name; }
  std::string where(const std::string& name) const {
    return "'" + file_.path() + "': metadata '" + key(name) + "'";
  }
  bool has(const std::string& name) const { return file_.find(key(name)) != nullptr; }

  int64_t size(const std::string& name, int64_t max_value) const {
    const uint64_t value = file_.unsigned_value(key(name));
    if (value < 1 || value > static_cast<uint64_t>(max_value))
      throw Error(where(name) + " = " + std::to_string(value) + " is outside [1, " +
                  std::to_string(max_value) + "]");
    return static_cast<int64_t>(value);
  }
  std::optional<int64_t> size_if_present(const std::string& name, int64_t max_value) const {
    if (!has(name)) return std::nullopt;
    return size(name, max_value);
  }
  // A count that may be 0 (experts); 0 when absent.
  uint64_t count_or_zero(const std::string& name) const {
    return file_.unsigned_if_present(key(name)).value_or(0);
  }
  // llama.cpp's multipliers: 0 or absent means its default.
  std::optional<double> multiplier(const std::string& name) const {
    if (!has(name)) return std::nullopt;
    const double value = file_.float_value(key(name));
    if (value == 0.0) return std::nullopt;
    if (!(value > 0.0) || !std::isfinite(value))
      throw Error(where(name) + " = " + std::to_string(value) + " must be a positive number (or 0 for none)");
    return value;
  }

  // The per-layer values of `name`: one scalar for every layer, or an array of n_layer integers,
  // each in [0, max_value]; nothing when the key is absent.
  std::optional<std::vector<int64_t>> per_layer(const std::string& name, int64_t n_layer,
                                                int64_t max_value) const {
    const GgufValue* value = file_.find(key(name));
    if (value == nullptr) return std::nullopt;
    if (!is_integer_type(value->element_type))
      throw Error(where(name) + " must hold integers, got " +
                  std::string(gguf_type_name(value->element_type)) + (value->is_array() ? " values" : ""));
    if (value->is_array() && static_cast<int64_t>(value->integers.size()) != n_layer)
      throw Error(where(name) + " lists " + std::to_string(value->integers.size()) +
                  " values but block_count is " + std::to_string(n_layer) + " (one per layer)");
    std::vector<int64_t> values(static_cast<size_t>(n_layer));
    for (int64_t l = 0; l < n_layer; ++l) {
      const int64_t v = value->integers[value->is_array() ? static_cast<size_t>(l) : 0];
      // A u64 beyond int64 reads as negative: out of range either way.
      if (v < 0 || v > max_value)
        throw Error(where(name) + " holds " + std::to_string(v) + " for layer " + std::to_string(l) +
                    ", outside [0, " + std::to_string(max_value) + "]");
      values[static_cast<size_t>(l)] = v;
    }
    return values;
  }
  std::vector<int64_t> required_per_layer(const std::string& name, int64_t n_layer, int64_t max_value) const {
    auto values = per_layer(name, n_layer, max_value);
    if (!values) throw Error("'" + file_.path() + "': missing required metadata '" + key(name) + "'");
    return *values;
  }

  bool has_tensor(int64_t layer, const std::string& suffix) const {
    return file_.find_tensor(gguf_layer_prefix(layer) + suffix) != nullptr;
  }
  const GgufFile& file() const { return file_; }

 private:
  const GgufFile& file_;
  std::string arch_;
};

// The one non-zero value `values` holds on the layers `on` selects, which must all agree (the
// engine runs one attention and one MLP shape); `fallback` when no layer is selected.
int64_t common_value(const HybridMetadata& meta, const std::string& name, const std::vector<int64_t>& values,
                     const std::vector<bool>& on, int64_t fallback) {
  int64_t found = 0, first_layer = -1;
  for (size_t l = 0; l < values.size(); ++l) {
    if (!on[l]) continue;
    if (values[l] == 0)
      throw Error(meta.where(name) + " is 0 for layer " + std::to_string(l) + ", which needs it");
    if (found == 0) {
      found = values[l];
      first_layer = static_cast<int64_t>(l);
    } else if (values[l] != found) {
      throw Error(meta.where(name) + " is " + std::to_string(found) + " for layer " +
                  std::to_string(first_layer) + " but " + std::to_string(values[l]) + " for layer " +
                  std::to_string(l) + ": the engine runs one shape for every such layer");
    }
  }
  return found != 0 ? found : fallback;
}

int first_layer_of(const std::string& pattern, char kind) {
  const size_t at = pattern.find(kind);
  return at == std::string::npos ? -1 : static_cast<int>(at);
}

constexpr int64_t kMaxExperts = 1 << 16;

// The routed experts: expert_count (0 or absent: a dense model) and expert_used_count (top-k),
// which llama.cpp requires to lie in [1, expert_count] where there are experts and to be 0 (or
// absent) where there are none. Routing the engine does not run is refused: grouped selection
// (expert_group_count above 1).
struct ExpertCounts {
  int64_t experts = 0, used = 0;
};

ExpertCounts expert_counts(const HybridMetadata& meta) {
  const uint64_t experts = meta.count_or_zero("expert_count"), used = meta.count_or_zero("expert_used_count");
  if (experts > static_cast<uint64_t>(kMaxExperts))
    throw Error(meta.where("expert_count") + " = " + std::to_string(experts) + " is above " +
                std::to_string(kMaxExperts));
  if (experts == 0) {
    if (used != 0)
      throw Error(meta.where("expert_used_count") + " = " + std::to_string(used) +
                  " but expert_count is 0 (a file without experts)");
    return {};
  }
  if (used < 1 || used > experts)
    throw Error(meta.where("expert_used_count") + " = " + std::to_string(used) +
                " must lie in [1, expert_count = " + std::to_string(experts) + "]");
  if (const uint64_t groups = meta.count_or_zero("expert_group_count"); groups > 1)
    throw Error(meta.where("expert_group_count") + " = " + std::to_string(groups) +
                ": group-limited expert routing is not supported");
  return {static_cast<int64_t>(experts), static_cast<int64_t>(used)};
}

// The sizes both families share: model, Mamba-2 mixer, attention heads and head size.
struct CommonSizes {
  int64_t d_model, n_layer, d_inner, ssm_heads, n_heads, n_kv_heads, head_dim;
  std::vector<int64_t> kv;  // head_count_kv per layer
  std::string pattern;      // the layer kinds ('M', '*', '-')
};

CommonSizes common_sizes(const HybridMetadata& meta) {
  CommonSizes s{};
  s.d_model = meta.size("embedding_length", kMaxDModel);
  s.n_layer = meta.size("block_count", kMaxLayers);
  s.d_inner = meta.size("ssm.inner_size", 1 << 20);
  s.ssm_heads = meta.size("ssm.time_step_rank", 1 << 20);
  if (s.d_inner % s.ssm_heads != 0)
    throw Error(meta.where("ssm.inner_size") + " = " + std::to_string(s.d_inner) +
                " is not a multiple of the head count (ssm.time_step_rank) " + std::to_string(s.ssm_heads));
  // llama.cpp appends a multi-token-prediction head as extra blocks (Nemotron-3-Super's), which
  // block_count counts; the engine runs no such head.
  if (const uint64_t nextn = meta.count_or_zero("nextn_predict_layers"); nextn > 0)
    throw Error(meta.where("nextn_predict_layers") + " = " + std::to_string(nextn) +
                ": multi-token-prediction blocks are not supported");
  const std::vector<int64_t> heads = meta.required_per_layer("attention.head_count", s.n_layer, 1 << 12);
  // llama.cpp: head_count_kv defaults to head_count (every layer attends).
  s.kv = meta.per_layer("attention.head_count_kv", s.n_layer, 1 << 12).value_or(heads);
  std::vector<bool> attends(static_cast<size_t>(s.n_layer));
  for (size_t l = 0; l < attends.size(); ++l) attends[l] = s.kv[l] > 0;
  s.n_heads = common_value(meta, "attention.head_count", heads, attends, std::max<int64_t>(heads[0], 1));
  s.n_kv_heads = common_value(meta, "attention.head_count_kv", s.kv, attends, s.n_heads);
  s.head_dim = s.d_model / s.n_heads;
  if (const auto key_length = meta.size_if_present("attention.key_length", 1 << 12)) s.head_dim = *key_length;
  if (const auto value_length = meta.size_if_present("attention.value_length", 1 << 12);
      value_length && *value_length != s.head_dim)
    throw Error(meta.where("attention.value_length") + " = " + std::to_string(*value_length) +
                " differs from the key head size " + std::to_string(s.head_dim) +
                " (attention.key_length, or embedding_length / head_count)");
  return s;
}

// The keys both families' configs take alike.
json common_config(const HybridMetadata& meta, const CommonSizes& s, int64_t vocab_rows) {
  const double eps = meta.file().float_value(meta.key("attention.layer_norm_rms_epsilon"));
  if (!(eps > 0.0 && eps < 1.0))
    throw Error(meta.where("attention.layer_norm_rms_epsilon") + " must lie in (0, 1)");
  const int m = first_layer_of(s.pattern, kMambaLayer), a = first_layer_of(s.pattern, kAttentionLayer);
  const ModelTensors own = model_tensor_specs(ModelConfig{}, true, 0);
  json config = {{"hidden_size", s.d_model},
                 {"num_hidden_layers", s.n_layer},
                 {"vocab_size", vocab_rows},
                 {"tie_word_embeddings", meta.file().find_tensor(own.tail[kLmHead].gguf) == nullptr},
                 {"num_attention_heads", s.n_heads},
                 {"num_key_value_heads", s.n_kv_heads},
                 // Bias presence is read from the first layer of each kind; the weight schema then
                 // requires them in every such layer.
                 {"attention_bias", a >= 0 && meta.has_tensor(a, "attn_q.bias")},
                 {"mamba_proj_bias", m >= 0 && meta.has_tensor(m, "ssm_in.bias")},
                 {"mamba_conv_bias", m < 0 || meta.has_tensor(m, "ssm_conv1d.bias")}};
  config["mamba_d_state"] = meta.size("ssm.state_size", 1 << 20);
  config["mamba_d_conv"] = meta.size("ssm.conv_kernel", 1 << 20);
  config["mamba_n_groups"] = meta.size("ssm.group_count", 1 << 16);
  if (const auto eos = meta.file().unsigned_if_present("tokenizer.ggml.eos_token_id"))
    config["eos_token_id"] = *eos;
  // Granite's key for the norm epsilon; Nemotron-H's parser reads it too, after its own.
  config["rms_norm_eps"] = eps;
  return config;
}

json granite_config(const HybridMetadata& meta, int64_t vocab_rows) {
  CommonSizes s = common_sizes(meta);
  for (int64_t kv : s.kv) s.pattern += kv > 0 ? kAttentionLayer : kMambaLayer;
  // llama.cpp applies RoPE to a granitehybrid file unless rope.scaling.finetuned says false.
  const std::optional<bool> rope = meta.file().bool_if_present(meta.key("rope.scaling.finetuned"));
  if (rope.value_or(true))
    throw Error(
        meta.where("rope.scaling.finetuned") + (rope ? " is true" : " is absent") +
        ": llama.cpp then runs the attention with RoPE (Bamba, Granite without Mamba layers), which this "
        "engine does not read from GGUF files (Granite-4.0-H files set it false; load a RoPE Granite from "
        "its "
        "Hugging Face folder)");
  if (s.d_inner % s.d_model != 0)
    throw Error(meta.where("ssm.inner_size") + " = " + std::to_string(s.d_inner) +
                " is not a multiple of embedding_length " + std::to_string(s.d_model) +
                " (Granite's mixers are mamba_expand x hidden wide)");
  if (s.head_dim * s.n_heads != s.d_model)
    throw Error(meta.where("attention.key_length") + " = " + std::to_string(s.head_dim) +
                ": Granite's heads are embedding_length / head_count = " +
                std::to_string(s.d_model / s.n_heads) + " wide");
  // Every layer's feed_forward_length is the same: the shared MLP's width in a dense file, each
  // routed expert's where there are experts (llama.cpp's n_ff for ffn_*_exps), whose shared MLP
  // then has expert_shared_feed_forward_length.
  const std::vector<int64_t> ff = meta.required_per_layer("feed_forward_length", s.n_layer, 1 << 20);
  const int64_t width = common_value(meta, "feed_forward_length", ff, std::vector<bool>(ff.size(), true), 0);
  const ExpertCounts e = expert_counts(meta);
  if (const uint64_t latent = meta.count_or_zero("moe_latent_size"); latent > 0)
    throw Error(meta.where("moe_latent_size") + " = " + std::to_string(latent) +
                ": latent expert projections are Nemotron-3-Super's (nemotron_h_moe), not Granite's");
  int64_t shared_width = width;
  if (e.experts > 0) {
    // llama.cpp runs a Granite file's experts without a shared MLP when this key is absent; every
    // Granite-4.0-H mixture-of-experts model has one.
    shared_width = meta.size("expert_shared_feed_forward_length", 1 << 20);
    // llama.cpp scales a granitehybrid file's routing weights by this key; Granite has no such
    // factor (HF's GraniteMoeHybridTopKGating), so a file that sets one is not a Granite model.
    if (const auto scale = meta.multiplier("expert_weights_scale"); scale && *scale != 1.0)
      throw Error(meta.where("expert_weights_scale") + " = " + std::to_string(*scale) +
                  ": Granite's routing weights are not scaled (0 or 1 expected)");
  } else if (const auto shared = meta.size_if_present("expert_shared_feed_forward_length", 1 << 20);
             shared && *shared != width) {
    throw Error(meta.where("expert_shared_feed_forward_length") + " = " + std::to_string(*shared) +
                " differs from feed_forward_length " + std::to_string(width) +
                " in a file without experts (the shared MLP is the only one)");
  }
  json config = common_config(meta, s, vocab_rows);
  json layer_types = json::array();
  for (char kind : s.pattern) layer_types.push_back(kind == kAttentionLayer ? "attention" : "mamba");
  config.update(
      {{"model_type", "granitemoehybrid"},
       {"layer_types", layer_types},
       {"position_embedding_type", "nope"},
       {"shared_intermediate_size", shared_width},
       {"intermediate_size", width},
       {"num_local_experts", e.experts},
       {"num_experts_per_tok", e.used},
       {"mamba_expand", s.d_inner / s.d_model},
       {"mamba_n_heads", s.ssm_heads},
       {"mamba_d_head", s.d_inner / s.ssm_heads},
       // llama.cpp's defaults where a key is 0 or absent.
       {"attention_multiplier",
        meta.multiplier("attention.scale").value_or(1.0 / std::sqrt(static_cast<double>(s.head_dim)))},
       {"embedding_multiplier", meta.multiplier("embedding_scale").value_or(1.0)},
       {"residual_multiplier", meta.multiplier("residual_scale").value_or(1.0)},
       {"logits_scaling", meta.multiplier("logit_scale").value_or(1.0)}});
  return config;
}

// The expert keys of a nemotron_h_moe file, as Hugging Face's NemotronHConfig names them.
json nemotron_moe_keys(const HybridMetadata& meta, const ExpertCounts& e) {
  // llama.cpp sizes every shared expert by expert_shared_feed_forward_length alone.
  if (const uint64_t shared = meta.count_or_zero("expert_shared_count");
      meta.has("expert_shared_count") && shared != 1)
    throw Error(meta.where("expert_shared_count") + " = " + std::to_string(shared) +
                ": the Nemotron-H mixture-of-experts layers have one shared expert");
  // llama.cpp's defaults: no renormalization, and a scale of 0 (or absent) means none.
  return {{"n_routed_experts", e.experts},
          {"num_experts_per_tok", e.used},
          {"moe_intermediate_size", meta.size("expert_feed_forward_length", 1 << 20)},
          {"moe_shared_expert_intermediate_size", meta.size("expert_shared_feed_forward_length", 1 << 20)},
          {"n_shared_experts", 1},
          {"norm_topk_prob", meta.file().bool_if_present(meta.key("expert_weights_norm")).value_or(false)},
          {"routed_scaling_factor", meta.multiplier("expert_weights_scale").value_or(1.0)},
          // LatentMoE (Nemotron-3-Super): 0 or absent in the files without it.
          {"moe_latent_size",
           meta.count_or_zero("moe_latent_size") > 0 ? json(meta.size("moe_latent_size", 1 << 20)) : json()}};
}

json nemotron_config(const HybridMetadata& meta, int64_t vocab_rows, bool moe_arch) {
  CommonSizes s = common_sizes(meta);
  if (moe_arch && meta.count_or_zero("expert_count") == 0)
    throw Error(meta.where("expert_count") + (meta.has("expert_count") ? " is 0" : " is absent") +
                ": a nemotron_h_moe file's feed-forward layers are mixtures of experts");
  const ExpertCounts e = expert_counts(meta);
  // In a file with experts every feed-forward layer is a mixture of experts (llama.cpp's loader
  // decides by expert_count), else an MLP.
  const char ffn_kind = e.experts > 0 ? kMoeLayer : kMlpLayer;
  const std::vector<int64_t> ff = meta.required_per_layer("feed_forward_length", s.n_layer, 1 << 20);
  std::vector<bool> ffn(ff.size());
  for (size_t l = 0; l < ff.size(); ++l) {
    // llama.cpp: recurrent iff both are 0, attention iff only head_count_kv is set, else MLP or MoE.
    if (s.kv[l] > 0 && ff[l] > 0)
      throw Error("'" + meta.file().path() + "': layer " + std::to_string(l) + " has both " +
                  meta.key("attention.head_count_kv") + " " + std::to_string(s.kv[l]) + " and " +
                  meta.key("feed_forward_length") + " " + std::to_string(ff[l]) +
                  ": an unknown layer kind (a Nemotron-H layer is Mamba-2, attention, MLP or MoE)");
    ffn[l] = ff[l] > 0;
    s.pattern += ff[l] > 0 ? ffn_kind : s.kv[l] > 0 ? kAttentionLayer : kMambaLayer;
  }
  // Only the MLP layers' width matters to the model; a MoE file's values (the converter writes the
  // experts' width) must agree all the same, as llama.cpp's one n_ff per layer kind.
  const int64_t width = common_value(meta, "feed_forward_length", ff, ffn, 1);
  const int l = first_layer_of(s.pattern, kMlpLayer);
  json config = common_config(meta, s, vocab_rows);
  config.update({{"model_type", "nemotron_h"},
                 {"hybrid_override_pattern", s.pattern},
                 {"head_dim", s.head_dim},
                 {"intermediate_size", width},
                 {"mlp_bias", l >= 0 && meta.has_tensor(l, "ffn_up.bias")},
                 {"mamba_num_heads", s.ssm_heads},
                 {"mamba_head_dim", s.d_inner / s.ssm_heads}});
  if (e.experts > 0) config.update(nemotron_moe_keys(meta, e));
  return config;
}

const auto u32 = [](int64_t value) { return GgufValue::u32(static_cast<uint32_t>(value)); };

GgufValue per_layer_array(const std::string& pattern, char kind, int64_t value) {
  std::vector<int64_t> values;
  for (char c : pattern) values.push_back(c == kind ? value : 0);
  return GgufValue::integer_array(GgufType::Int32, std::move(values));
}

}  // namespace

json gguf_hybrid_config_json(const GgufFile& file, const std::string& arch, int64_t vocab_rows) {
  const HybridMetadata meta(file, arch);
  return arch == kGgufGraniteHybrid ? granite_config(meta, vocab_rows)
                                    : nemotron_config(meta, vocab_rows, arch == kGgufNemotronHMoe);
}

void apply_gguf_hybrid_overrides(const GgufFile& file, const std::string& arch, ModelConfig& config) {
  const HybridMetadata meta(file, arch);
  if (arch != kGgufGraniteHybrid)
    if (const auto scale = meta.multiplier("attention.scale")) config.hybrid.attention.scale = *scale;
}

std::string gguf_architecture(const ModelConfig& c) {
  if (const Family* family = find_family(c.family))
    return family->gguf_arch ? family->gguf_arch(c) : family->gguf_archs.at(0);
  switch (c.family) {
    case ModelFamily::GraniteHybrid:
      return kGgufGraniteHybrid;
    case ModelFamily::NemotronH:
      return c.hybrid.moe.n_experts > 0 ? kGgufNemotronHMoe : kGgufNemotronH;
    case ModelFamily::Mamba:
    case ModelFamily::Zamba2:  // declared: answered above
      break;
  }
  return c.arch == Architecture::Mamba2 ? "mamba2" : "mamba";
}

void set_gguf_hybrid_metadata(GgufWriter& writer, const ModelConfig& c, int64_t vocab_rows) {
  const std::string arch = gguf_architecture(c);
  const HybridConfig& h = c.hybrid;
  const AttentionConfig& a = h.attention;
  const bool granite = c.family == ModelFamily::GraniteHybrid;
  const auto key = [&](const char* name) { return arch + "." + name; };
  // The keys, and their order, of convert_hf_to_gguf.py's GraniteHybridModel and NemotronHModel.
  writer.set(key("block_count"), u32(c.n_layer));
  writer.set(key("context_length"), u32(1 << 20));  // no RoPE: the converter's "unlimited"
  writer.set(key("embedding_length"), u32(c.d_model));
  const MoeConfig& e = h.moe;
  const bool moe = e.n_experts > 0;
  // Granite: one width for every layer, the experts' where there are experts (the shared MLP's
  // then goes to expert_shared_feed_forward_length); Nemotron-H: per layer, the MLP's or, in a
  // file with experts, the experts' on the E layers.
  writer.set(key("feed_forward_length"), granite ? u32(moe ? e.width : h.mlp.width)
                                         : moe   ? per_layer_array(h.pattern, kMoeLayer, e.width)
                                                 : per_layer_array(h.pattern, kMlpLayer, h.mlp.width));
  writer.set(key("attention.head_count"), u32(a.n_heads));
  writer.set(key("attention.head_count_kv"), per_layer_array(h.pattern, kAttentionLayer, a.n_kv_heads));
  writer.set(key("attention.layer_norm_rms_epsilon"), GgufValue::f32(c.norm_eps));
  if (granite) {
    writer.set(key("expert_count"), u32(e.n_experts));
    writer.set(key("expert_used_count"), u32(moe ? e.top_k : 0));
    writer.set(key("vocab_size"), u32(vocab_rows));
    writer.set(key("attention.scale"), GgufValue::f32(static_cast<float>(a.scale)));
    writer.set(key("embedding_scale"), GgufValue::f32(static_cast<float>(h.embedding_multiplier)));
    writer.set(key("residual_scale"), GgufValue::f32(static_cast<float>(h.residual_multiplier)));
    writer.set(key("logit_scale"), GgufValue::f32(static_cast<float>(h.logits_scaling)));
    writer.set(key("expert_shared_feed_forward_length"), u32(h.mlp.width));
  } else {
    // llama.cpp's nemotron_h loader requires the plain layer-norm epsilon too.
    writer.set(key("attention.layer_norm_epsilon"), GgufValue::f32(c.norm_eps));
    writer.set(key("vocab_size"), u32(vocab_rows));
    writer.set(key("attention.key_length"), u32(a.head_dim));
    writer.set(key("attention.value_length"), u32(a.head_dim));
    // llama.cpp's default scale is 1 / sqrt(key_length) in float; another one is spelled out.
    if (static_cast<float>(a.scale) != 1.0f / std::sqrt(static_cast<float>(a.head_dim)))
      writer.set(key("attention.scale"), GgufValue::f32(static_cast<float>(a.scale)));
    if (moe) {
      writer.set(key("expert_used_count"), u32(e.top_k));
      writer.set(key("expert_feed_forward_length"), u32(e.width));
      writer.set(key("expert_shared_feed_forward_length"), u32(e.shared_width));
      writer.set(key("expert_count"), u32(e.n_experts));
      writer.set(key("expert_shared_count"), u32(1));
      writer.set(key("expert_weights_norm"), GgufValue::boolean(e.normalize));
      writer.set(key("expert_weights_scale"), GgufValue::f32(static_cast<float>(e.scale)));
      writer.set(key("expert_group_count"), u32(1));
      if (e.latent > 0) writer.set(key("moe_latent_size"), u32(e.latent));
    }
  }
  writer.set(key("ssm.conv_kernel"), u32(c.ssm.d_conv));
  writer.set(key("ssm.state_size"), u32(c.ssm.d_state));
  writer.set(key("ssm.group_count"), u32(c.ssm.ngroups));
  writer.set(key("ssm.inner_size"), u32(c.ssm.d_inner));
  writer.set(key("ssm.time_step_rank"), u32(c.ssm.n_heads()));
  // Granite uses rope.scaling.finetuned as its RoPE switch; these models have none.
  writer.set(key("rope.scaling.finetuned"), GgufValue::boolean(false));
}

}  // namespace mb
