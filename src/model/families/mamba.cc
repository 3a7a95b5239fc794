// SPDX-License-Identifier: MIT
// The pure Mamba families: Mamba-1 (`mamba`), FalconMamba (`falcon_mamba`: Mamba-1 with a
// weightless RMSNorm on dt, B and C) and Mamba-2 (`mamba2`) in their Hugging Face form, each read
// as transformers' configuration class reads it (its defaults where a key is absent), with
// llama.cpp's `mamba` and `mamba2` GGUF architectures; and Mamba-3 SISO, which exists only in the
// state-spaces form. The four share ModelFamily::Mamba and tell their configs apart by `owns`.
//
// The state-spaces form of Mamba-1 and Mamba-2 (d_model, n_layer, ssm_cfg) is the separate path of
// families/mamba_original.cc; its values land in the same ModelConfig fields, which these tables
// write and hash.
//
// Read by parse_extra rather than the table: time_step_rank ("auto" or a number), Mamba-2's
// num_heads (d_inner = num_heads x head_dim, which must equal expand x hidden_size) and
// time_step_limit (a pair that may hold Infinity). The first two change the tensors' shapes, which
// the fingerprint hashes; the fingerprint hashes the dt limit beside the keys (model.cc).
#include <cmath>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/json_text.h"
#include "io/gguf.h"
#include "model/blocks/mamba_schema.h"
#include "model/config_reader.h"
#include "model/families/families.h"
#include "model/gguf_tensor_names.h"
#include "model/weight_schema.h"

namespace mb {
namespace {

using nlohmann::json;

// The keys every Hugging Face Mamba config has, with the epsilon's spellings and the tie default
// of the model type.
std::vector<ConfigKey> common_keys(std::vector<std::string> eps_aliases, bool tied) {
  Key eps = Key("layer_norm_epsilon", [](ModelConfig& c) -> KeyField { return &c.norm_eps; });
  for (std::string& alias : eps_aliases) eps.alias(std::move(alias));
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
      eps.gguf("attention.layer_norm_rms_epsilon")
          .type(KeyType::Number)
          .fallback(1e-5)
          .range(kMinPositive, 1),
      Key("tie_word_embeddings", [](ModelConfig& c) -> KeyField { return &c.tie_embeddings; })
          .type(KeyType::Bool)
          .fallback(tied),
      Key("pad_vocab_size_multiple", [](ModelConfig& c) -> KeyField { return &c.pad_vocab_size_multiple; })
          .fallback(int64_t{1})
          .max(1 << 16),
      Key("use_bias", [](ModelConfig& c) -> KeyField { return &c.ssm.use_bias; })
          .type(KeyType::Bool)
          .fallback(false),
      Key("use_conv_bias", [](ModelConfig& c) -> KeyField { return &c.ssm.use_conv_bias; })
          .type(KeyType::Bool)
          .fallback(true),
  };
}

Key ssm_size(const char* name, int64_t MambaMixerConfig::*member) {
  return Key(name, [member](ModelConfig& c) -> KeyField { return &(c.ssm.*member); });
}

// Mamba-1's (and FalconMamba's) mixer keys: MambaConfig requires state_size and conv_kernel.
void add_mamba1_keys(std::vector<ConfigKey>& keys) {
  keys.push_back(
      ssm_size("state_size", &MambaMixerConfig::d_state).gguf("ssm.state_size").effect(KeyEffect::State));
  keys.push_back(
      ssm_size("conv_kernel", &MambaMixerConfig::d_conv).gguf("ssm.conv_kernel").effect(KeyEffect::State));
  keys.push_back(
      ssm_size("expand", &MambaMixerConfig::expand).fallback(int64_t{2}).max(64).effect(KeyEffect::State));
  // 0 when absent: expand x hidden_size (parse_extra).
  keys.push_back(ssm_size("intermediate_size", &MambaMixerConfig::d_inner)
                     .gguf("ssm.inner_size")
                     .fallback(int64_t{0})
                     .max(kMaxDModel * 8)
                     .effect(KeyEffect::State));
}

// time_step_rank: a positive integer or "auto" (ceil(hidden_size / 16), also when absent).
void parse_dt_rank(const ConfigReader& reader, int64_t d_model, MambaMixerConfig& m) {
  const char* key = "time_step_rank";
  m.dt_rank = (d_model + 15) / 16;
  if (!reader.has(key)) return;
  const json& value = reader.at(key);
  if (value.is_string()) {
    if (value.get<std::string>() != "auto")
      throw Error(reader.where() + ": '" + key + "' must be a positive integer or \"auto\", got " +
                  json_excerpt(value));
    return;
  }
  m.dt_rank = reader.positive_int_value(key, value, kMaxDModel);
}

// Bias presence is read from the checkpoint when config.json does not say (the Mamba-1 and
// Mamba-2 blocks).
void note_bias_sources(const ConfigReader& reader, MambaMixerConfig& m) {
  m.use_bias_from_checkpoint = !reader.has("use_bias");
  m.use_conv_bias_from_checkpoint = !reader.has("use_conv_bias");
}

void parse_mamba1_extra(const ConfigReader& reader, ModelConfig& c) {
  c.arch = Architecture::Mamba1;
  if (c.ssm.d_inner == 0) c.ssm.d_inner = c.ssm.expand * c.d_model;
  parse_dt_rank(reader, c.d_model, c.ssm);
  note_bias_sources(reader, c.ssm);
}

void parse_falcon_mamba_extra(const ConfigReader& reader, ModelConfig& c) {
  parse_mamba1_extra(reader, c);
  c.ssm.mixer_rms_norm = true;
  // HF lets a stated intermediate_size override expand, and tiiuae/falcon-mamba-7b relies on it
  // (expand 16 beside intermediate_size 8192 = 2 x 4096), so for FalconMamba expand follows.
  if (c.ssm.d_inner % c.d_model == 0) c.ssm.expand = c.ssm.d_inner / c.d_model;
}

// Hugging Face Mamba2ForCausalLM: d_inner is num_heads x head_dim, which must be expand x hidden.
void parse_mamba2_extra(const ConfigReader& reader, ModelConfig& c) {
  c.arch = Architecture::Mamba2;
  MambaMixerConfig& m = c.ssm;
  m.d_inner = m.expand * c.d_model;
  const int64_t heads = reader.positive_int_or("num_heads", 128, 1 << 20);
  if (heads * m.headdim != m.d_inner)
    throw Error(reader.where() + ": num_heads x head_dim = " + std::to_string(heads) + " x " +
                std::to_string(m.headdim) +
                " does not equal expand x hidden_size = " + std::to_string(m.d_inner));
  note_bias_sources(reader, m);
  parse_dt_limit(reader, "time_step_limit", m);
}

// JSON has no infinity: the unlimited default is left out rather than written as null.
void add_dt_limit(const MambaMixerConfig& m, json& out) {
  if (std::isfinite(m.dt_limit_max) || m.dt_limit_min != 0.0)
    out["time_step_limit"] = {m.dt_limit_min,
                              std::isfinite(m.dt_limit_max) ? json(m.dt_limit_max) : json("Infinity")};
}

json identity(const char* model_type, const char* architecture) {
  return {{"model_type", model_type},
          {"architectures", {architecture}},
          {"residual_in_fp32", true},
          {"hidden_act", "silu"}};
}

int64_t gguf_size(const GgufFile& file, const std::string& key, int64_t max_value) {
  const uint64_t value = file.unsigned_value(key);
  if (value < 1 || value > static_cast<uint64_t>(max_value))
    throw Error("'" + file.path() + "': metadata '" + key + "' = " + std::to_string(value) +
                " is outside [1, " + std::to_string(max_value) + "]");
  return static_cast<int64_t>(value);
}

// What a Mamba file's metadata says beside the declared keys: expand from the inner size, the
// biases its first layer's tensors show, and its epsilon's range.
void gguf_common(const GgufFile& file, const std::string& arch, json& hf) {
  // The sizes every Mamba file must have, each refused naming its metadata key.
  for (const char* key : {"block_count", "ssm.state_size", "ssm.conv_kernel"})
    (void)gguf_size(file, arch + "." + key, std::string(key) == "block_count" ? kMaxLayers : 1 << 20);
  const int64_t d_model = gguf_size(file, arch + ".embedding_length", kMaxDModel);
  const int64_t d_inner = gguf_size(file, arch + ".ssm.inner_size", 1 << 20);
  if (d_inner % d_model != 0)
    throw Error("'" + file.path() + "': ssm.inner_size " + std::to_string(d_inner) +
                " is not a multiple of embedding_length " + std::to_string(d_model));
  const double eps = file.float_value(arch + ".attention.layer_norm_rms_epsilon");
  if (!(eps > 0.0 && eps < 1.0))
    throw Error("'" + file.path() + "': metadata '" + arch +
                ".attention.layer_norm_rms_epsilon' must lie in (0, 1)");
  const BlockSpec first_layer{BlockKind::Mamba1Mixer, 0, {layer_prefix(0)}};
  hf.update(
      {{"expand", d_inner / d_model},
       {"pad_vocab_size_multiple", 1},
       {"use_bias", file.find_tensor(mamba_schema::in_proj_bias(first_layer, 0, true).gguf) != nullptr},
       {"use_conv_bias", file.find_tensor(mamba_schema::conv_bias(first_layer, 0, true).gguf) != nullptr}});
}

// llama.cpp's mamba: FalconMamba is the same arch with ssm.dt_b_c_rms set.
void mamba1_gguf_extra(const GgufFile& file, const std::string& arch, json& hf) {
  gguf_common(file, arch, hf);
  hf["intermediate_size"] = gguf_size(file, arch + ".ssm.inner_size", 1 << 20);
  hf["time_step_rank"] = gguf_size(file, arch + ".ssm.time_step_rank", 1 << 16);
  if (file.bool_if_present(arch + ".ssm.dt_b_c_rms").value_or(false)) {
    hf["model_type"] = "falcon_mamba";
    // llama.cpp normalizes dt, B and C with the layer norm's epsilon; files this engine writes
    // carry FalconMamba's own mixer_rms_eps under a key of their own.
    hf["mixer_rms_eps"] = file.find(kGgufMixerRmsEpsKey) != nullptr
                              ? file.float_value(kGgufMixerRmsEpsKey)
                              : file.float_value(arch + ".attention.layer_norm_rms_epsilon");
  }
}

void mamba2_gguf_extra(const GgufFile& file, const std::string& arch, json& hf) {
  gguf_common(file, arch, hf);
  const int64_t d_inner = gguf_size(file, arch + ".ssm.inner_size", 1 << 20);
  const int64_t heads = gguf_size(file, arch + ".ssm.time_step_rank", 1 << 20);
  if (d_inner % heads != 0)
    throw Error("'" + file.path() + "': ssm.inner_size " + std::to_string(d_inner) +
                " is not a multiple of the head count (ssm.time_step_rank) " + std::to_string(heads));
  hf["num_heads"] = heads;
  hf["head_dim"] = d_inner / heads;
  hf["n_groups"] = gguf_size(file, arch + ".ssm.group_count", 1 << 16);
  hf["chunk_size"] = 256;
}

// The placeholder keys convert_hf_to_gguf.py's Mamba models write, and the mixer's sizes the
// table does not hold.
void write_mamba_gguf_extra(GgufWriter& writer, const ModelConfig& c, const std::string& arch) {
  const bool mamba2 = c.arch == Architecture::Mamba2;
  const auto u32 = [](int64_t value) { return GgufValue::u32(static_cast<uint32_t>(value)); };
  writer.set(arch + ".context_length", u32(1 << 20));
  writer.set(arch + ".feed_forward_length", u32(0));
  writer.set(arch + ".attention.head_count", u32(0));
  writer.set(arch + ".ssm.inner_size", u32(c.ssm.d_inner));
  writer.set(arch + ".ssm.time_step_rank", u32(mamba2 ? c.ssm.n_heads() : c.ssm.dt_rank));
  if (!mamba2) writer.set(arch + ".ssm.dt_b_c_rms", GgufValue::boolean(c.ssm.mixer_rms_norm));
  if (c.ssm.mixer_rms_norm && static_cast<float>(c.ssm.mixer_rms_eps) != c.norm_eps)
    writer.set(kGgufMixerRmsEpsKey, GgufValue::f32(static_cast<float>(c.ssm.mixer_rms_eps)));
}

std::vector<BlockSpec> mamba_blocks(const ModelConfig& c) {
  const BlockKind mixer = c.arch == Architecture::Mamba1   ? BlockKind::Mamba1Mixer
                          : c.arch == Architecture::Mamba2 ? BlockKind::Mamba2Mixer
                                                           : BlockKind::Mamba3Mixer;
  std::vector<BlockSpec> list;
  for (int64_t l = 0; l < c.n_layer; ++l) list.push_back({mixer, l, {layer_prefix(l)}});
  return list;
}

void validate_mamba(const ModelConfig& c, const std::string& where) {
  validate_mamba_mixer(c.ssm, c.arch, c.d_model, where);
}

json example_sizes(const char* model_type, int64_t d_model, int64_t n_layer, int64_t vocab) {
  return {{"model_type", model_type},
          {"hidden_size", d_model},
          {"num_hidden_layers", n_layer},
          {"vocab_size", vocab}};
}

Family make_mamba1() {
  Family f;
  f.name = "mamba1";
  f.id = ModelFamily::Mamba;
  f.model_types = {"mamba"};
  f.gguf_archs = {"mamba"};
  // MambaConfig reads either epsilon key.
  f.keys = common_keys({"rms_norm_eps"}, true);
  add_mamba1_keys(f.keys);
  f.owns = [](const ModelConfig& c) { return c.arch == Architecture::Mamba1 && !c.ssm.mixer_rms_norm; };
  f.parse_extra = parse_mamba1_extra;
  f.validate = validate_mamba;
  f.blocks = mamba_blocks;
  f.gguf_extra = mamba1_gguf_extra;
  f.write_gguf_extra = write_mamba_gguf_extra;
  f.gguf_arch = [](const ModelConfig&) { return std::string("mamba"); };
  f.hf_extra = [](const ModelConfig& c, json& hf) {
    hf.update(identity("mamba", "MambaForCausalLM"));
    hf["time_step_rank"] = c.ssm.dt_rank;
  };
  f.example = [](int64_t d_model, int64_t n_layer, int64_t vocab) {
    json hf = example_sizes("mamba", d_model, n_layer, vocab);
    hf.update({{"state_size", 16}, {"conv_kernel", 4}});
    return hf;
  };
  return f;
}

Family make_falcon_mamba() {
  Family f = make_mamba1();
  f.name = "falcon-mamba";
  f.model_types = {"falcon_mamba"};
  f.gguf_archs = {};  // llama.cpp's "mamba" with ssm.dt_b_c_rms: mamba1's gguf_extra tells them apart
  // FalconMambaConfig's own default.
  f.keys.push_back(Key("mixer_rms_eps", [](ModelConfig& c) -> KeyField { return &c.ssm.mixer_rms_eps; })
                       .type(KeyType::Number)
                       .fallback(1e-6)
                       .range(kMinPositive, 1));
  f.owns = [](const ModelConfig& c) { return c.arch == Architecture::Mamba1 && c.ssm.mixer_rms_norm; };
  f.parse_extra = parse_falcon_mamba_extra;
  f.hf_extra = [](const ModelConfig& c, json& hf) {
    hf.update(identity("falcon_mamba", "FalconMambaForCausalLM"));
    hf["time_step_rank"] = c.ssm.dt_rank;
  };
  f.example = [](int64_t d_model, int64_t n_layer, int64_t vocab) {
    json hf = example_sizes("falcon_mamba", d_model, n_layer, vocab);
    hf.update({{"state_size", 16}, {"conv_kernel", 4}});
    return hf;
  };
  return f;
}

Family make_mamba2() {
  Family f;
  f.name = "mamba2";
  f.id = ModelFamily::Mamba;
  f.model_types = {"mamba2"};
  f.gguf_archs = {"mamba2"};
  // Mamba2Config reads only its own epsilon key, unties the head by default, and has these
  // defaults.
  f.keys = common_keys({}, false);
  f.keys.push_back(ssm_size("state_size", &MambaMixerConfig::d_state)
                       .gguf("ssm.state_size")
                       .fallback(int64_t{128})
                       .effect(KeyEffect::State));
  f.keys.push_back(ssm_size("conv_kernel", &MambaMixerConfig::d_conv)
                       .gguf("ssm.conv_kernel")
                       .fallback(int64_t{4})
                       .effect(KeyEffect::State));
  f.keys.push_back(
      ssm_size("expand", &MambaMixerConfig::expand).fallback(int64_t{2}).max(64).effect(KeyEffect::State));
  f.keys.push_back(ssm_size("head_dim", &MambaMixerConfig::headdim)
                       .fallback(int64_t{64})
                       .max(1 << 16)
                       .effect(KeyEffect::State));
  f.keys.push_back(ssm_size("n_groups", &MambaMixerConfig::ngroups)
                       .gguf("ssm.group_count")
                       .fallback(int64_t{8})
                       .max(1 << 16)
                       .effect(KeyEffect::State));
  // The SSD chunk length changes no bit (the chunked scan equals the recurrence).
  f.keys.push_back(ssm_size("chunk_size", &MambaMixerConfig::chunk_size)
                       .fallback(int64_t{256})
                       .max(1 << 16)
                       .effect(KeyEffect::None));
  f.owns = [](const ModelConfig& c) { return c.arch == Architecture::Mamba2; };
  f.parse_extra = parse_mamba2_extra;
  f.validate = validate_mamba;
  f.blocks = mamba_blocks;
  f.gguf_extra = mamba2_gguf_extra;
  f.write_gguf_extra = write_mamba_gguf_extra;
  f.gguf_arch = [](const ModelConfig&) { return std::string("mamba2"); };
  f.check_gguf = [](const ModelConfig& c) {
    if (!c.ssm.gated_norm) throw Error("Mamba-2 models without the gated norm cannot be written as GGUF");
    if (c.ssm.dt_limit_min != 0.0 || std::isfinite(c.ssm.dt_limit_max))
      throw Error("Mamba-2 models with a dt limit cannot be written as GGUF (llama.cpp has no key for it)");
  };
  f.hf_extra = [](const ModelConfig& c, json& hf) {
    hf.update(identity("mamba2", "Mamba2ForCausalLM"));
    hf["rms_norm"] = true;
    hf["num_heads"] = c.ssm.n_heads();
    add_dt_limit(c.ssm, hf);
  };
  f.example = [](int64_t d_model, int64_t n_layer, int64_t vocab) {
    json hf = example_sizes("mamba2", d_model, n_layer, vocab);
    hf.update({{"head_dim", 16}, {"num_heads", 2 * d_model / 16}, {"n_groups", 1}});
    return hf;
  };
  return f;
}

// Mamba-3 SISO, which exists only in the state-spaces form: its keys are the top-level ones and
// ssm_cfg's, read from one object that holds both (their names do not collide), with mamba_ssm's
// defaults. mamba_original.cc reads a config whose ssm_cfg.layer is "Mamba3" through this table.
Family make_mamba3() {
  Family f;
  f.name = "mamba3";
  f.id = ModelFamily::Mamba;
  f.keys = {
      Key("d_model", [](ModelConfig& c) -> KeyField { return &c.d_model; })
          .max(kMaxDModel)
          .effect(KeyEffect::State),
      Key("n_layer", [](ModelConfig& c) -> KeyField { return &c.n_layer; })
          .max(kMaxLayers)
          .effect(KeyEffect::State),
      Key("vocab_size", [](ModelConfig& c) -> KeyField { return &c.vocab_size; }).max(kMaxVocab),
      Key("pad_vocab_size_multiple", [](ModelConfig& c) -> KeyField { return &c.pad_vocab_size_multiple; })
          .fallback(int64_t{8})
          .max(1 << 16),
      Key("tie_embeddings", [](ModelConfig& c) -> KeyField { return &c.tie_embeddings; })
          .type(KeyType::Bool)
          .fallback(true),
      // mamba_ssm hard-wires the norm epsilon to 1e-5 for this form.
      Key("norm_epsilon", [](ModelConfig& c) -> KeyField { return &c.norm_eps; })
          .type(KeyType::Number)
          .fallback(1e-5)
          .range(kMinPositive, 1),
      ssm_size("d_state", &MambaMixerConfig::d_state).fallback(int64_t{128}).effect(KeyEffect::State),
      ssm_size("expand", &MambaMixerConfig::expand).fallback(int64_t{2}).max(64).effect(KeyEffect::State),
      ssm_size("headdim", &MambaMixerConfig::headdim)
          .fallback(int64_t{64})
          .max(1 << 12)
          .effect(KeyEffect::State),
      ssm_size("ngroups", &MambaMixerConfig::ngroups)
          .fallback(int64_t{1})
          .max(1 << 12)
          .effect(KeyEffect::State),
      // The SSD chunk length changes no bit (the chunked scan equals the recurrence).
      ssm_size("chunk_size", &MambaMixerConfig::chunk_size)
          .fallback(int64_t{64})
          .max(1 << 16)
          .effect(KeyEffect::None),
      Key("rope_fraction", [](ModelConfig& c) -> KeyField { return &c.ssm.rope_fraction; })
          .type(KeyType::Number)
          .fallback(0.5)
          .range(kMinPositive, 1e30),
      Key("A_floor", [](ModelConfig& c) -> KeyField { return &c.ssm.a_floor; })
          .type(KeyType::Number)
          .fallback(1e-4)
          .range(kMinPositive, 1e30),
      Key("is_outproj_norm", [](ModelConfig& c) -> KeyField { return &c.ssm.is_outproj_norm; })
          .type(KeyType::Bool)
          .fallback(false),
  };
  f.owns = [](const ModelConfig& c) { return c.arch == Architecture::Mamba3; };
  f.parse_extra = [](const ConfigReader&, ModelConfig& c) {
    c.arch = Architecture::Mamba3;
    c.ssm.d_inner = c.ssm.expand * c.d_model;
  };
  f.validate = validate_mamba;
  f.blocks = mamba_blocks;
  f.check_gguf = [](const ModelConfig&) {
    throw Error("Mamba-3 models cannot be written as GGUF (llama.cpp has no mamba3)");
  };
  f.example = [](int64_t d_model, int64_t n_layer, int64_t vocab) {
    return json{{"d_model", d_model},
                {"n_layer", n_layer},
                {"vocab_size", vocab},
                {"ssm_cfg", {{"layer", "Mamba3"}, {"d_state", 16}, {"headdim", 16}}}};
  };
  return f;
}

}  // namespace

void parse_dt_limit(const ConfigReader& reader, const char* key, MambaMixerConfig& config) {
  if (!reader.has(key)) return;
  const json& value = reader.at(key);
  if (!value.is_array() || value.size() != 2)
    throw Error(reader.where() + ": '" + key + "' must be a list [min, max], got " + json_excerpt(value));
  config.dt_limit_min = reader.number_value(value[0], key);
  config.dt_limit_max = reader.number_value(value[1], key);
  if (!(config.dt_limit_min >= 0.0 && config.dt_limit_min <= config.dt_limit_max))
    throw Error(reader.where() + ": '" + key + "' must satisfy 0 <= min <= max, got " + json_excerpt(value));
}

const Family& mamba1_family() {
  static const Family family = make_mamba1();
  return family;
}

const Family& falcon_mamba_family() {
  static const Family family = make_falcon_mamba();
  return family;
}

const Family& mamba2_family() {
  static const Family family = make_mamba2();
  return family;
}

const Family& mamba3_family() {
  static const Family family = make_mamba3();
  return family;
}

}  // namespace mb
