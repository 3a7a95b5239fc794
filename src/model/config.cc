#include "model/config.h"

#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/json_text.h"
#include "io/mapped_file.h"

namespace mb {
namespace {

using nlohmann::json;

// Typed, bounded access to config keys with messages that name the file and the key.
class ConfigReader {
 public:
  ConfigReader(const json& object, std::string where) : object_(object), where_(std::move(where)) {}

  bool has(const char* key) const { return object_.contains(key) && !object_[key].is_null(); }

  int64_t positive_int(const char* key, int64_t max_value) const {
    if (!has(key)) throw Error(where_ + ": missing required key '" + key + "'");
    return positive_int_value(key, object_[key], max_value);
  }
  int64_t positive_int_or(const char* key, int64_t fallback, int64_t max_value) const {
    return has(key) ? positive_int(key, max_value) : fallback;
  }
  bool boolean_or(const char* key, bool fallback) const {
    if (!has(key)) return fallback;
    if (!object_[key].is_boolean())
      throw Error(where_ + ": '" + key + "' must be true or false, got " + json_excerpt(object_[key]));
    return object_[key].get<bool>();
  }
  double positive_number_or(const char* key, double fallback) const {
    if (!has(key)) return fallback;
    const json& value = object_[key];
    if (!value.is_number() || !(value.get<double>() > 0.0))
      throw Error(where_ + ": '" + key + "' must be a positive number, got " + json_excerpt(value));
    return value.get<double>();
  }
  std::string string_or(const char* key, const std::string& fallback) const {
    if (!has(key)) return fallback;
    if (!object_[key].is_string())
      throw Error(where_ + ": '" + key + "' must be a string, got " + json_excerpt(object_[key]));
    return object_[key].get<std::string>();
  }
  const json& at(const char* key) const { return object_[key]; }

  int64_t positive_int_value(const std::string& key, const json& value, int64_t max_value) const {
    if (!value.is_number_integer() || value.get<int64_t>() <= 0)
      throw Error(where_ + ": '" + key + "' must be a positive integer, got " + json_excerpt(value));
    const int64_t v = value.get<int64_t>();
    if (v > max_value)
      throw Error(where_ + ": '" + key + "' = " + std::to_string(v) + " exceeds the supported maximum " +
                  std::to_string(max_value));
    return v;
  }

 private:
  const json& object_;
  std::string where_;
};

constexpr int64_t kMaxDModel = 1 << 16;
constexpr int64_t kMaxLayers = 4096;
constexpr int64_t kMaxVocab = 1 << 24;

void parse_dt_rank(const ConfigReader& reader, const char* key, ModelConfig& config, const std::string& where) {
  config.dt_rank = (config.d_model + 15) / 16;
  if (!reader.has(key)) return;
  const json& value = reader.at(key);
  if (value.is_string()) {
    if (value.get<std::string>() != "auto")
      throw Error(where + ": '" + key + "' must be a positive integer or \"auto\", got " +
                  json_excerpt(value));
    return;
  }
  config.dt_rank = reader.positive_int_value(key, value, kMaxDModel);
}

// A number of config.json that may also be written as Python's json module writes infinities
// ("Infinity", which load_model_config turns into a string before parsing).
double number_value(const json& value, const std::string& key, const std::string& where) {
  if (value.is_number()) return value.get<double>();
  if (value.is_string()) {
    const std::string text = value.get<std::string>();
    if (text == "Infinity") return INFINITY;
    if (text == "-Infinity") return -INFINITY;
  }
  throw Error(where + ": '" + key + "' must hold numbers, got " + json_excerpt(value));
}

// time_step_limit (HF) or dt_limit (state-spaces): [min, max] with 0 <= min <= max.
void parse_dt_limit(const ConfigReader& reader, const char* key, ModelConfig& config, const std::string& where) {
  if (!reader.has(key)) return;
  const json& value = reader.at(key);
  if (!value.is_array() || value.size() != 2)
    throw Error(where + ": '" + key + "' must be a list [min, max], got " + json_excerpt(value));
  config.dt_limit_min = number_value(value[0], key, where);
  config.dt_limit_max = number_value(value[1], key, where);
  if (!(config.dt_limit_min >= 0.0 && config.dt_limit_min <= config.dt_limit_max))
    throw Error(where + ": '" + key + "' must satisfy 0 <= min <= max, got " + json_excerpt(value));
}

// Hugging Face Mamba2ForCausalLM. Absent keys take Mamba2Config's defaults, as transformers does.
void parse_hf_mamba2(const ConfigReader& reader, ModelConfig& config, const std::string& where) {
  config.arch = Architecture::Mamba2;
  config.d_model = reader.positive_int("hidden_size", kMaxDModel);
  config.n_layer = reader.positive_int("num_hidden_layers", kMaxLayers);
  config.vocab_size = reader.positive_int("vocab_size", kMaxVocab);
  config.d_state = reader.positive_int_or("state_size", 128, 1 << 20);
  config.d_conv = reader.positive_int_or("conv_kernel", 4, 1 << 20);
  config.expand = reader.positive_int_or("expand", 2, 64);
  config.d_inner = config.expand * config.d_model;
  config.headdim = reader.positive_int_or("head_dim", 64, 1 << 16);
  config.ngroups = reader.positive_int_or("n_groups", 8, 1 << 16);
  const int64_t heads = reader.positive_int_or("num_heads", 128, 1 << 20);
  if (heads * config.headdim != config.d_inner)
    throw Error(where + ": num_heads x head_dim = " + std::to_string(heads) + " x " + std::to_string(config.headdim) +
                " does not equal expand x hidden_size = " + std::to_string(config.d_inner));
  config.use_bias_from_checkpoint = !reader.has("use_bias");
  config.use_bias = reader.boolean_or("use_bias", false);
  config.use_conv_bias_from_checkpoint = !reader.has("use_conv_bias");
  config.use_conv_bias = reader.boolean_or("use_conv_bias", true);
  config.norm_eps = static_cast<float>(reader.positive_number_or("layer_norm_epsilon", 1e-5));
  config.tie_embeddings = reader.boolean_or("tie_word_embeddings", false);
  config.pad_vocab_size_multiple = reader.positive_int_or("pad_vocab_size_multiple", 1, 1 << 16);
  config.chunk_size = reader.positive_int_or("chunk_size", 256, 1 << 16);
  parse_dt_limit(reader, "time_step_limit", config, where);
}

void parse_hf(const ConfigReader& reader, ModelConfig& config, const std::string& where) {
  const std::string model_type = reader.string_or("model_type", "mamba");
  if (model_type == "mamba2") {
    parse_hf_mamba2(reader, config, where);
    return;
  }
  if (model_type != "mamba" && model_type != "falcon_mamba")
    throw Error(where + ": model_type '" + model_type +
                "' is not supported (expected \"mamba\", \"mamba2\" or \"falcon_mamba\")");
  if (model_type == "falcon_mamba") {
    config.mixer_rms_norm = true;
    // FalconMambaConfig's own default when the key is absent.
    config.mixer_rms_eps = reader.positive_number_or("mixer_rms_eps", 1e-6);
  }
  config.d_model = reader.positive_int("hidden_size", kMaxDModel);
  config.n_layer = reader.positive_int("num_hidden_layers", kMaxLayers);
  config.vocab_size = reader.positive_int("vocab_size", kMaxVocab);
  config.d_state = reader.positive_int("state_size", 1 << 20);
  config.d_conv = reader.positive_int("conv_kernel", 1 << 20);
  config.expand = reader.positive_int_or("expand", 2, 64);
  config.d_inner = reader.positive_int_or("intermediate_size", config.expand * config.d_model, kMaxDModel * 8);
  // HF lets a stated intermediate_size override expand, and tiiuae/falcon-mamba-7b relies on it
  // (expand 16 beside intermediate_size 8192 = 2 x 4096), so for FalconMamba expand follows.
  if (config.mixer_rms_norm && config.d_inner % config.d_model == 0)
    config.expand = config.d_inner / config.d_model;
  parse_dt_rank(reader, "time_step_rank", config, where);
  config.use_bias_from_checkpoint = !reader.has("use_bias");
  config.use_bias = reader.boolean_or("use_bias", false);
  config.use_conv_bias_from_checkpoint = !reader.has("use_conv_bias");
  config.use_conv_bias = reader.boolean_or("use_conv_bias", true);
  config.norm_eps = static_cast<float>(
      reader.positive_number_or("layer_norm_epsilon", reader.positive_number_or("rms_norm_eps", 1e-5)));
  config.tie_embeddings = reader.boolean_or("tie_word_embeddings", true);
  config.pad_vocab_size_multiple = reader.positive_int_or("pad_vocab_size_multiple", 1, 1 << 16);
}

void parse_original(const ConfigReader& reader, ModelConfig& config, const std::string& where) {
  config.d_model = reader.positive_int("d_model", kMaxDModel);
  config.n_layer = reader.positive_int("n_layer", kMaxLayers);
  config.vocab_size = reader.positive_int("vocab_size", kMaxVocab);
  config.pad_vocab_size_multiple = reader.positive_int_or("pad_vocab_size_multiple", 8, 1 << 16);
  config.tie_embeddings = reader.boolean_or("tie_embeddings", true);
  if (!reader.boolean_or("rms_norm", true))
    throw Error(where + ": rms_norm = false (LayerNorm blocks) is not supported");
  // mamba_ssm hard-wires the norm epsilon to 1e-5 for this form.
  config.norm_eps = static_cast<float>(reader.positive_number_or("norm_epsilon", 1e-5));

  static const json empty = json::object();
  const json& ssm = reader.has("ssm_cfg") ? reader.at("ssm_cfg") : empty;
  if (!ssm.is_object()) throw Error(where + ": 'ssm_cfg' must be an object, got " + json_excerpt(ssm));
  const ConfigReader ssm_reader(ssm, where + " (ssm_cfg)");
  const std::string layer = ssm_reader.string_or("layer", "Mamba1");
  if (layer == "Mamba1") {
    config.arch = Architecture::Mamba1;
    config.d_state = ssm_reader.positive_int_or("d_state", 16, 1 << 20);
    config.d_conv = ssm_reader.positive_int_or("d_conv", 4, 1 << 20);
    config.expand = ssm_reader.positive_int_or("expand", 2, 64);
    config.d_inner = config.expand * config.d_model;
    parse_dt_rank(ssm_reader, "dt_rank", config, where + " (ssm_cfg)");
    config.use_bias = ssm_reader.boolean_or("bias", false);
    config.use_conv_bias = ssm_reader.boolean_or("conv_bias", true);
  } else if (layer == "Mamba2") {
    // mamba_ssm's Mamba2 module defaults.
    config.arch = Architecture::Mamba2;
    config.d_state = ssm_reader.positive_int_or("d_state", 128, 1 << 20);
    config.d_conv = ssm_reader.positive_int_or("d_conv", 4, 1 << 20);
    config.expand = ssm_reader.positive_int_or("expand", 2, 64);
    config.d_inner = config.expand * config.d_model;
    config.headdim = ssm_reader.positive_int_or("headdim", 64, 1 << 16);
    config.ngroups = ssm_reader.positive_int_or("ngroups", 1, 1 << 16);
    config.chunk_size = ssm_reader.positive_int_or("chunk_size", 256, 1 << 16);
    config.use_bias = ssm_reader.boolean_or("bias", false);
    config.use_conv_bias = ssm_reader.boolean_or("conv_bias", true);
    config.gated_norm = ssm_reader.boolean_or("rmsnorm", true);
    if (ssm_reader.boolean_or("norm_before_gate", false))
      throw Error(where + " (ssm_cfg): norm_before_gate = true is not supported (released Mamba-2 models use false)");
    if (ssm_reader.has("d_ssm") && ssm_reader.positive_int("d_ssm", kMaxDModel * 8) != config.d_inner)
      throw Error(where + " (ssm_cfg): d_ssm other than d_inner (a partly SSM mixer) is not supported");
    parse_dt_limit(ssm_reader, "dt_limit", config, where + " (ssm_cfg)");
  } else if (layer == "Mamba3") {
    config.arch = Architecture::Mamba3;
    config.d_state = ssm_reader.positive_int_or("d_state", 128, 1 << 20);
    config.expand = ssm_reader.positive_int_or("expand", 2, 64);
    config.d_inner = config.expand * config.d_model;
    config.headdim = ssm_reader.positive_int_or("headdim", 64, 1 << 12);
    config.ngroups = ssm_reader.positive_int_or("ngroups", 1, 1 << 12);
    config.rope_fraction = ssm_reader.positive_number_or("rope_fraction", 0.5);
    config.a_floor = ssm_reader.positive_number_or("A_floor", 1e-4);
    config.is_outproj_norm = ssm_reader.boolean_or("is_outproj_norm", false);
    config.chunk_size = ssm_reader.positive_int_or("chunk_size", 64, 1 << 16);
  } else {
    throw Error(where + ": ssm_cfg.layer '" + layer + "' is not supported (expected Mamba1, Mamba2 or Mamba3)");
  }
  // Hybrid and MLP blocks of MambaLMHeadModel are not implemented: refuse rather than skip them.
  if (reader.has("d_intermediate") && !(reader.at("d_intermediate").is_number_integer() &&
                                        reader.at("d_intermediate").get<int64_t>() == 0))
    throw Error(where + ": 'd_intermediate' > 0 (MLP blocks) is not supported");
  if (reader.has("attn_layer_idx") &&
      !(reader.at("attn_layer_idx").is_array() && reader.at("attn_layer_idx").empty()))
    throw Error(where + ": 'attn_layer_idx' lists attention layers; hybrid models are not supported");
}

void validate(const ModelConfig& config, const std::string& where) {
  auto fail = [&](const std::string& message) { throw Error(where + ": " + message); };
  if (config.arch == Architecture::Mamba1) {
    if (config.d_inner != config.expand * config.d_model)
      fail("intermediate_size " + std::to_string(config.d_inner) + " != expand x hidden_size = " +
           std::to_string(config.expand * config.d_model));
    if (config.d_state > 256) fail("state_size " + std::to_string(config.d_state) + " exceeds the supported 256");
    if (config.d_conv > 16) fail("conv_kernel " + std::to_string(config.d_conv) + " exceeds the supported 16");
  } else if (config.arch == Architecture::Mamba2) {
    if (config.d_inner % config.headdim != 0)
      fail("d_inner " + std::to_string(config.d_inner) + " is not a multiple of the head size " +
           std::to_string(config.headdim));
    if (config.n_heads() % config.ngroups != 0)
      fail("the head count " + std::to_string(config.n_heads()) + " is not a multiple of the group count " +
           std::to_string(config.ngroups));
    if (config.d_state > 256) fail("state size " + std::to_string(config.d_state) + " exceeds the supported 256");
    if (config.d_conv > 16) fail("conv kernel " + std::to_string(config.d_conv) + " exceeds the supported 16");
  } else {
    if (config.d_inner % config.headdim != 0)
      fail("d_inner " + std::to_string(config.d_inner) + " is not a multiple of headdim " + std::to_string(config.headdim));
    if (config.n_heads() % config.ngroups != 0)
      fail("the head count " + std::to_string(config.n_heads()) + " is not a multiple of ngroups " +
           std::to_string(config.ngroups));
    if (config.d_state > 256) fail("d_state " + std::to_string(config.d_state) + " exceeds the supported 256");
    // RoPE rotates the first 2 * floor(floor(d_state * rope_fraction) / 2) state dims, so any
    // d_state works; mamba_ssm only defines the two fractions.
    if (config.rope_fraction != 0.5 && config.rope_fraction != 1.0)
      fail("ssm_cfg.rope_fraction must be 0.5 or 1.0, got " + std::to_string(config.rope_fraction));
    if (!std::isfinite(config.a_floor)) fail("ssm_cfg.A_floor must be a finite positive number");
  }
  if (!(config.norm_eps < 1.0f)) fail("the norm epsilon must be below 1");
  if (config.mixer_rms_norm && !(config.mixer_rms_eps < 1.0))
    fail("'mixer_rms_eps' must be a positive number below 1");
}

}  // namespace

ModelConfig parse_model_config(const json& object, const std::string& where) {
  if (!object.is_object()) throw Error(where + ": config is not a JSON object");
  const ConfigReader reader(object, where);
  ModelConfig config;
  const bool hf_form = reader.has("model_type") || reader.has("hidden_size");
  if (hf_form) parse_hf(reader, config, where);
  else if (reader.has("d_model")) parse_original(reader, config, where);
  else throw Error(where + ": neither 'hidden_size' (Hugging Face form) nor 'd_model' (state-spaces form) is present");
  if (reader.has("eos_token_id")) {
    const json& eos = object["eos_token_id"];
    const auto add_eos = [&](const json& id) {
      if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() >= config.vocab_size)
        throw Error(where + ": 'eos_token_id' must be token ids inside the vocabulary, got " +
                    json_excerpt(eos));
      config.eos_token_ids.push_back(id.get<int32_t>());
    };
    // A single id is checked in place: wrapping it in a list would copy the value, whatever it holds.
    if (eos.is_array()) {
      for (const json& id : eos) add_eos(id);
    } else {
      add_eos(eos);
    }
  }
  const int64_t multiple = config.pad_vocab_size_multiple;
  config.vocab_rows = (config.vocab_size + multiple - 1) / multiple * multiple;
  validate(config, where);
  return config;
}

namespace {

// Python's json module writes float('inf') as a bare Infinity (Mamba2Config's default
// time_step_limit is (0.0, inf)), which is not JSON. Outside string literals, the tokens
// Infinity and -Infinity become the strings "Infinity" and "-Infinity", which the number readers
// above accept; everything else is left to the JSON parser.
std::string quote_python_infinities(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char ch = text[i];
    if (in_string) {
      out += ch;
      if (ch == '\\' && i + 1 < text.size()) out += text[++i];
      else if (ch == '"') in_string = false;
      continue;
    }
    if (ch == '"') in_string = true;
    const bool negative = ch == '-' && text.compare(i + 1, 8, "Infinity") == 0;
    if (negative || text.compare(i, 8, "Infinity") == 0) {
      out += negative ? "\"-Infinity\"" : "\"Infinity\"";
      i += negative ? 8 : 7;
      continue;
    }
    out += ch;
  }
  return out;
}

}  // namespace

ModelConfig load_model_config(const std::string& dir) {
  const std::string path = (std::filesystem::path(dir) / "config.json").string();
  if (!std::filesystem::exists(path)) throw Error("'" + dir + "' has no config.json");
  // A config nests two or three levels; 64 leaves room for any plausible extension.
  const json object = parse_json_text(quote_python_infinities(read_text_file(path)), "'" + path + "'", 64);
  return parse_model_config(object, "'" + path + "'");
}

namespace {

json mamba2_hf_json(const ModelConfig& c) {
  json config = {{"model_type", "mamba2"},          {"architectures", {"Mamba2ForCausalLM"}},
                 {"hidden_size", c.d_model},         {"num_hidden_layers", c.n_layer},
                 {"vocab_size", c.vocab_size},       {"num_heads", c.n_heads()},
                 {"head_dim", c.headdim},            {"n_groups", c.ngroups},
                 {"state_size", c.d_state},          {"expand", c.expand},
                 {"conv_kernel", c.d_conv},          {"use_bias", c.use_bias},
                 {"use_conv_bias", c.use_conv_bias}, {"layer_norm_epsilon", c.norm_eps},
                 {"chunk_size", c.chunk_size},       {"tie_word_embeddings", c.tie_embeddings},
                 {"pad_vocab_size_multiple", c.pad_vocab_size_multiple},
                 {"rms_norm", true},                 {"residual_in_fp32", true},
                 {"bos_token_id", 0},                {"eos_token_id", 0},
                 {"pad_token_id", 0},                {"hidden_act", "silu"},
                 {"torch_dtype", "float32"}};
  // JSON has no infinity: the unlimited default is left out rather than written as null.
  if (std::isfinite(c.dt_limit_max) || c.dt_limit_min != 0.0)
    config["time_step_limit"] = {c.dt_limit_min, std::isfinite(c.dt_limit_max) ? json(c.dt_limit_max) : json("Infinity")};
  return config;
}

}  // namespace

json model_config_to_hf_json(const ModelConfig& c) {
  if (c.arch == Architecture::Mamba2) return mamba2_hf_json(c);
  json hf = {{"model_type", "mamba"},         {"architectures", {"MambaForCausalLM"}},
             {"hidden_size", c.d_model},      {"num_hidden_layers", c.n_layer},
             {"vocab_size", c.vocab_size},    {"state_size", c.d_state},
             {"conv_kernel", c.d_conv},       {"expand", c.expand},
             {"intermediate_size", c.d_inner}, {"time_step_rank", c.dt_rank},
             {"use_bias", c.use_bias},        {"use_conv_bias", c.use_conv_bias},
             {"layer_norm_epsilon", c.norm_eps}, {"tie_word_embeddings", c.tie_embeddings},
             {"pad_vocab_size_multiple", c.pad_vocab_size_multiple},
             {"residual_in_fp32", true},      {"bos_token_id", 0},
             {"eos_token_id", 0},             {"pad_token_id", 0},
             {"hidden_act", "silu"},          {"torch_dtype", "float32"}};
  if (c.mixer_rms_norm) {
    hf["model_type"] = "falcon_mamba";
    hf["architectures"] = {"FalconMambaForCausalLM"};
    hf["mixer_rms_eps"] = c.mixer_rms_eps;
  }
  return hf;
}

json model_config_to_original_json(const ModelConfig& c) {
  json ssm;
  if (c.arch == Architecture::Mamba1) {
    ssm = {{"layer", "Mamba1"}, {"d_state", c.d_state}, {"d_conv", c.d_conv}, {"expand", c.expand},
           {"dt_rank", c.dt_rank}, {"bias", c.use_bias}, {"conv_bias", c.use_conv_bias}};
  } else if (c.arch == Architecture::Mamba2) {
    ssm = {{"layer", "Mamba2"},          {"d_state", c.d_state},   {"d_conv", c.d_conv},
           {"expand", c.expand},         {"headdim", c.headdim},   {"ngroups", c.ngroups},
           {"chunk_size", c.chunk_size}, {"bias", c.use_bias},     {"conv_bias", c.use_conv_bias},
           {"rmsnorm", c.gated_norm}};
    if (std::isfinite(c.dt_limit_max) || c.dt_limit_min != 0.0)
      ssm["dt_limit"] = {c.dt_limit_min, std::isfinite(c.dt_limit_max) ? json(c.dt_limit_max) : json("Infinity")};
  } else {
    ssm = {{"layer", "Mamba3"},         {"d_state", c.d_state},     {"expand", c.expand},
           {"headdim", c.headdim},      {"ngroups", c.ngroups},     {"rope_fraction", c.rope_fraction},
           {"A_floor", c.a_floor},      {"is_outproj_norm", c.is_outproj_norm}, {"chunk_size", c.chunk_size}};
  }
  return {{"d_model", c.d_model},     {"n_layer", c.n_layer},
          {"d_intermediate", 0},      {"attn_layer_idx", json::array()},
          {"vocab_size", c.vocab_size}, {"ssm_cfg", ssm},
          {"rms_norm", true},         {"residual_in_fp32", true},
          {"fused_add_norm", true},   {"pad_vocab_size_multiple", c.pad_vocab_size_multiple},
          {"tie_embeddings", c.tie_embeddings}};
}

}  // namespace mb
