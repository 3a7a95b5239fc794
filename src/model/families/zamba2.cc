// SPDX-License-Identifier: MIT
// Zamba2 (Hugging Face model_type "zamba2"), declared once: ../shared/specs/hybrids.md section 6
// and hybrids-2.md section 4. The defaults are transformers' Zamba2Config's. llama.cpp has no
// Zamba2 (its PR is unmerged), so the GGUF keys are our own, in llama.cpp's naming style (README:
// "Zamba2 GGUF files").
#include "model/families/zamba2.h"

#include <cmath>
#include <nlohmann/json.hpp>
#include <string>

#include "core/error.h"
#include "core/json_text.h"
#include "io/gguf.h"
#include "model/blocks/mamba_config.h"
#include "model/config.h"
#include "model/config_reader.h"
#include "model/family.h"

namespace mb {
namespace {

using nlohmann::json;

// transformers' default layers_block_type ("Zamba2-2.7B style"), when config.json has none.
std::vector<std::string> default_layer_types() {
  std::vector<std::string> types = {"mamba"};
  for (int i = 0; i < 7; ++i) {
    types.insert(types.end(), 5, "mamba");
    types.push_back("hybrid");
  }
  types.insert(types.end(), 4, "mamba");
  types.push_back("hybrid");
  types.insert(types.end(), 3, "mamba");
  types.push_back("hybrid");
  types.insert(types.end(), 2, "mamba");
  return types;
}

void parse_layer_types(const ConfigReader& reader, ModelConfig& c) {
  std::vector<std::string> types;
  if (reader.has("layers_block_type")) {
    const json& list = reader.at("layers_block_type");
    if (!list.is_array())
      throw Error(reader.where() + ": 'layers_block_type' must be a list of \"mamba\" and \"hybrid\", got " +
                  json_excerpt(list));
    for (size_t l = 0; l < list.size(); ++l) {
      if (!list[l].is_string() || (list[l] != "mamba" && list[l] != "hybrid"))
        throw Error(reader.where() + ": 'layers_block_type' entry " + std::to_string(l) +
                    " must be \"mamba\" or \"hybrid\", got " + json_excerpt(list[l]));
      types.push_back(list[l].get<std::string>());
    }
  } else {
    types = default_layer_types();
  }
  if (static_cast<int64_t>(types.size()) != c.n_layer)
    throw Error(
        reader.where() + ": 'layers_block_type' has " + std::to_string(types.size()) +
        " entries but 'num_hidden_layers' is " + std::to_string(c.n_layer) +
        (reader.has("layers_block_type") ? "" : " (the default pattern, used when it is absent, has 54)"));
  c.zamba2.hybrid_layers.clear();
  for (size_t l = 0; l < types.size(); ++l)
    if (types[l] == "hybrid") c.zamba2.hybrid_layers.push_back(static_cast<int64_t>(l));
}

// Values derived from several keys, and the refusals a single key's bounds cannot say.
void parse_zamba2_extra(const ConfigReader& reader, ModelConfig& c) {
  c.family = ModelFamily::Zamba2;
  c.arch = Architecture::Mamba2;
  c.vocab_rows = c.vocab_size;
  parse_layer_types(reader, c);
  Zamba2Config& z = c.zamba2;
  MambaMixerConfig& ssm = c.ssm;
  ssm.d_inner = ssm.expand * c.d_model;
  if (ssm.d_inner % z.mamba_heads != 0)
    throw Error(reader.where() + ": 'n_mamba_heads' = " + std::to_string(z.mamba_heads) +
                " does not divide mamba_expand x hidden_size = " + std::to_string(ssm.d_inner));
  ssm.headdim = ssm.d_inner / z.mamba_heads;
  ssm.gated_norm = true;
  if (z.n_kv_heads == 0) z.n_kv_heads = z.n_heads;
  if (z.n_kv_heads != z.n_heads)
    throw Error(reader.where() + ": 'num_key_value_heads' = " + std::to_string(z.n_kv_heads) +
                " differs from 'num_attention_heads' = " + std::to_string(z.n_heads) +
                ": Zamba2's shared attention and its adapters are multi-head (as vLLM requires too)");
  if ((2 * c.d_model) % z.n_heads != 0)
    throw Error(
        reader.where() + ": 'num_attention_heads' = " + std::to_string(z.n_heads) +
        " does not divide the shared attention's width 2 x hidden_size = " + std::to_string(2 * c.d_model));
  z.head_dim = 2 * c.d_model / z.n_heads;
  if (z.mlp_width == 0) z.mlp_width = 4 * c.d_model;
}

void validate_zamba2(const ModelConfig& c, const std::string& where) {
  validate_mamba_mixer(c.ssm, Architecture::Mamba2, c.d_model, where);
  // HF's Zamba2RMSNormGated hard-codes 1e-5, and the Mamba-2 mixer takes one epsilon for both its
  // norms.
  if (c.norm_eps != 1e-5f)
    throw Error(where +
                ": 'rms_norm_eps' other than 1e-5 is not supported (Zamba2's gated norm uses 1e-5 "
                "whatever it says, and mambacpp's Mamba-2 mixer takes one epsilon for both its norms)");
  const Zamba2Config& z = c.zamba2;
  if (z.mem_rope && (z.head_dim % 2 != 0 || z.head_dim <= 2))
    throw Error(where + ": RoPE (use_mem_rope) needs an even attention head size above 2, got " +
                std::to_string(z.head_dim));
}

std::vector<BlockSpec> zamba2_blocks(const ModelConfig& c) {
  std::vector<BlockSpec> list;
  for (int64_t l = 0; l < c.n_layer; ++l) {
    const std::string prefix = "model.layers." + std::to_string(l) + ".";
    if (c.zamba2.hybrid_index(l) < 0) {
      list.push_back({BlockKind::Mamba2Mixer, l, {prefix, "mamba.", "input_layernorm.weight"}});
      continue;
    }
    list.push_back({BlockKind::Zamba2Shared,
                    l,
                    {prefix, "shared_transformer.", "shared_transformer.input_layernorm.weight"}});
    list.push_back({BlockKind::Mamba2Mixer,
                    l,
                    {prefix, "mamba_decoder.mamba.", "mamba_decoder.input_layernorm.weight"}});
  }
  return list;
}

void zamba2_hf_extra(const ModelConfig& c, json& hf) {
  json types = json::array();
  for (int64_t l = 0; l < c.n_layer; ++l) types.push_back(c.zamba2.hybrid_index(l) < 0 ? "mamba" : "hybrid");
  hf["layers_block_type"] = types;
  hf["architectures"] = {"Zamba2ForCausalLM"};
}

// Our GGUF layout's pattern: {arch}.hybrid_layer_ids, the "hybrid" layers' indices (u32 array,
// HF's derived hybrid_layer_ids), read back into layers_block_type; malformed ones are refused
// naming the key.
void zamba2_gguf_extra(const GgufFile& file, const std::string& arch, json& hf) {
  const std::string key = arch + ".hybrid_layer_ids";
  const GgufValue* ids = file.find(key);
  if (ids == nullptr) throw Error(file.path() + ": GGUF key '" + key + "' is missing");
  if (!ids->is_array() || ids->integers.size() != ids->size())
    throw Error(file.path() + ": GGUF key '" + key + "' must be an array of layer indices");
  const int64_t n_layer = hf.value("num_hidden_layers", int64_t{0});
  json types = json::array();
  for (int64_t l = 0; l < n_layer; ++l) types.push_back("mamba");
  int64_t previous = -1;
  for (int64_t id : ids->integers) {
    if (id <= previous || id >= n_layer)
      throw Error(file.path() + ": GGUF key '" + key + "' holds " + std::to_string(id) +
                  ", not an ascending layer index below the block count " + std::to_string(n_layer));
    types[id] = "hybrid";
    previous = id;
  }
  hf["layers_block_type"] = types;
  hf["architectures"] = {"Zamba2ForCausalLM"};
}

void zamba2_write_gguf_extra(GgufWriter& writer, const ModelConfig& c, const std::string& arch) {
  writer.set(arch + ".hybrid_layer_ids",
             GgufValue::integer_array(GgufType::Uint32,
                                      {c.zamba2.hybrid_layers.begin(), c.zamba2.hybrid_layers.end()}));
}

json zamba2_example(int64_t d_model, int64_t n_layer, int64_t vocab) {
  json types = json::array();
  for (int64_t l = 0; l < n_layer; ++l) types.push_back(l % 3 == 2 ? "hybrid" : "mamba");
  return {{"model_type", "zamba2"},
          {"architectures", {"Zamba2ForCausalLM"}},
          {"hidden_size", d_model},
          {"num_hidden_layers", n_layer},
          {"vocab_size", vocab},
          {"layers_block_type", types},
          {"num_mem_blocks", 2},
          {"num_attention_heads", 4},
          {"intermediate_size", d_model},
          {"adapter_rank", 8},
          {"use_shared_attention_adapter", true},
          {"use_mem_rope", true},
          {"mamba_d_state", 16},
          {"n_mamba_heads", std::max<int64_t>(1, 2 * d_model / 16)},
          {"tie_word_embeddings", true}};
}

std::vector<ConfigKey> zamba2_keys() {
  using E = KeyEffect;
  return {
      int_key(
          "hidden_size", "embedding_length", [](ModelConfig& c) -> KeyField { return &c.d_model; },
          std::nullopt, 1, kMaxDModel, E::State),
      int_key(
          "num_hidden_layers", "block_count", [](ModelConfig& c) -> KeyField { return &c.n_layer; }, 54, 1,
          kMaxLayers, E::State),
      int_key(
          "vocab_size", "", [](ModelConfig& c) -> KeyField { return &c.vocab_size; }, 32000, 1, kMaxVocab),
      // Only 1e-5 (validate_zamba2): a refusal here would also refuse a GGUF file's f32 of 1e-5.
      number_key(
          "rms_norm_eps", "attention.layer_norm_rms_epsilon",
          [](ModelConfig& c) -> KeyField { return &c.norm_eps; }, 1e-5, 0, 1),
      bool_key(
          "tie_word_embeddings", "", [](ModelConfig& c) -> KeyField { return &c.tie_embeddings; }, true),
      int_key(
          "mamba_d_state", "ssm.state_size", [](ModelConfig& c) -> KeyField { return &c.ssm.d_state; }, 64, 1,
          1024, E::State),
      int_key(
          "mamba_d_conv", "ssm.conv_kernel", [](ModelConfig& c) -> KeyField { return &c.ssm.d_conv; }, 4, 2,
          64, E::State),
      int_key(
          "mamba_expand", "ssm.expand", [](ModelConfig& c) -> KeyField { return &c.ssm.expand; }, 2, 1, 64,
          E::State),
      int_key(
          "n_mamba_heads", "ssm.time_step_rank",
          [](ModelConfig& c) -> KeyField { return &c.zamba2.mamba_heads; }, 8, 1, 1 << 16, E::State),
      int_key(
          "mamba_ngroups", "ssm.group_count", [](ModelConfig& c) -> KeyField { return &c.ssm.ngroups; }, 1, 1,
          1 << 16, E::State),
      // The chunked scan's SSD chunk: a speed setting (the sequential form's bits are its own).
      int_key(
          "chunk_size", "", [](ModelConfig& c) -> KeyField { return &c.ssm.chunk_size; }, 256, 1, 1 << 16,
          E::None),
      bool_key(
          "use_conv_bias", "ssm.conv_bias", [](ModelConfig& c) -> KeyField { return &c.ssm.use_conv_bias; },
          true),
      bool_key(
          "add_bias_linear", "", [](ModelConfig& c) -> KeyField { return &c.ssm.use_bias; }, false)
          .only_default("the Zamba2 models have no linear biases, and mambacpp's shared blocks take none"),
      // The exact (erf) GELU; vLLM refuses the others too.
      string_key("hidden_act", "", [](ModelConfig& c) -> KeyField { return &c.zamba2.activation; },
                 std::string("gelu"), {"gelu"}),
      int_key(
          "num_attention_heads", "attention.head_count",
          [](ModelConfig& c) -> KeyField { return &c.zamba2.n_heads; }, 32, 1, 4096, E::State),
      // 0: as num_attention_heads (transformers' default); any other value must equal it.
      int_key(
          "num_key_value_heads", "attention.head_count_kv",
          [](ModelConfig& c) -> KeyField { return &c.zamba2.n_kv_heads; }, 0, 0, 4096, E::State),
      // 0: 4 x hidden_size (transformers' default).
      int_key(
          "intermediate_size", "feed_forward_length",
          [](ModelConfig& c) -> KeyField { return &c.zamba2.mlp_width; }, 0, 0, 1 << 20),
      int_key(
          "num_mem_blocks", "shared_block_count",
          [](ModelConfig& c) -> KeyField { return &c.zamba2.mem_blocks; }, 1, 1, 1024),
      int_key(
          "adapter_rank", "adapter_rank", [](ModelConfig& c) -> KeyField { return &c.zamba2.adapter_rank; },
          128, 1, 1 << 16),
      bool_key(
          "use_shared_attention_adapter", "attention.shared_adapter",
          [](ModelConfig& c) -> KeyField { return &c.zamba2.attention_adapter; }, false),
      bool_key(
          "use_mem_rope", "rope.enabled", [](ModelConfig& c) -> KeyField { return &c.zamba2.mem_rope; },
          false),
      bool_key(
          "use_long_context", "rope.long_context",
          [](ModelConfig& c) -> KeyField { return &c.zamba2.long_context; }, false),
      number_key(
          "rope_theta", "rope.freq_base", [](ModelConfig& c) -> KeyField { return &c.zamba2.rope_theta; },
          10000.0, 1e-6, 1e30),
  };
}

Family make_zamba2_family() {
  Family f;
  f.name = "zamba2";
  f.id = ModelFamily::Zamba2;
  f.model_types = {"zamba2"};
  f.gguf_archs = {"zamba2"};
  f.keys = zamba2_keys();
  f.parse_extra = parse_zamba2_extra;
  f.validate = validate_zamba2;
  f.blocks = zamba2_blocks;
  f.gguf_arch = [](const ModelConfig&) { return std::string("zamba2"); };
  f.hf_extra = zamba2_hf_extra;
  f.gguf_extra = zamba2_gguf_extra;
  f.write_gguf_extra = zamba2_write_gguf_extra;
  f.example = zamba2_example;
  return f;
}

}  // namespace

const Family& zamba2_family() {
  static const Family family = make_zamba2_family();
  return family;
}

}  // namespace mb
