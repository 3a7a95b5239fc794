// SPDX-License-Identifier: MIT
// A checkpoint family declared once: every config key it reads (its Hugging Face name and
// aliases, its GGUF key, type, default, bounds, and whether it changes the state layout or the
// math), the model_type values and GGUF architectures that select it, and the few hooks a table
// cannot say (a layer pattern from per-layer GGUF arrays, values derived from several keys,
// refusals of settings the engine cannot honour, the block list).
//
// Generic code (family.cc) does the rest from the table, the same way for every family:
//   - parse_model_config: finds the family by model_type, reads each declared key (the first of
//     its HF name and aliases that is present, else its default; a required key has none), checks
//     its type and bounds with a message naming the file and the key, stores it in ModelConfig;
//   - GGUF files: gguf_family_config_json turns the {arch}.* metadata into the family's Hugging
//     Face config.json form (each key with a GGUF name, plus the family's gguf_extra hook), which
//     parse_model_config then reads, so both sources get the same checks;
//   - writing: the HF config.json (make-model) and the GGUF metadata (convert, quantize) from a
//     ModelConfig, each declared key once;
//   - the checkpoint fingerprint (state and slot files): every key whose effect is Math or State;
//   - make-model: `--arch NAME` starts from the family's example config and `--set KEY=VALUE`
//     overrides any declared key by its HF name (VALUE is JSON: 4, 1e-6, true, "rope", [1,2]).
//
// A new family is one file (src/model/families/<name>.cc) defining its Family and one line in
// all_families() (families/families.cc).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "model/config.h"

namespace mb {

class ConfigReader;
class GgufFile;
class GgufWriter;

// What a key's value is in config.json. Int: an integer in [min, max]; Number: a finite double
// in [min, max]; Bool; String: one of `choices` when the list is not empty; Numbers: a list of
// finite doubles (Falcon-H1's ssm_multipliers), its length checked by the family's validate.
enum class KeyType { Int, Number, Bool, String, Numbers };

// What changing a key changes. Math: the logits (hashed into the fingerprint); State: the layout
// of a sequence's state as well (hashed too); None: nothing the model computes (token ids,
// metadata the engine keeps for the user).
enum class KeyEffect { None, Math, State };

// Where a key's value lives in ModelConfig: one of these, returned by ConfigKey::field. A float
// field (the norm epsilon) is read as a double and rounded once.
using KeyField = std::variant<int64_t*, double*, float*, bool*, std::string*, std::vector<double>*>;

// The value a key takes when absent.
using KeyValue = std::variant<int64_t, double, bool, std::string, std::vector<double>>;

struct ConfigKey {
  std::string hf;                    // the Hugging Face name, e.g. "num_attention_heads"
  std::vector<std::string> aliases;  // other spellings the HF config class accepts, read in order
  std::string gguf;                  // relative to "{arch}.", e.g. "attention.head_count"; "" = none
  KeyType type = KeyType::Int;
  std::optional<KeyValue> fallback;  // the default when absent; nullopt = required
  double min = 1, max = 1 << 20;     // bounds of Int and Number values (inclusive)
  std::vector<std::string> choices;  // String: the values accepted (others refused naming them)
  KeyEffect effect = KeyEffect::Math;
  std::function<KeyField(ModelConfig&)> field;
  // A key whose value the engine cannot honour except `fallback` (e.g. rope_scaling): present with
  // another value, it is refused naming the key (the message says the reason).
  std::string only_default_reason;

  // Copies with one field changed, for compact tables: int_key(...).aka({"n_layer"}).
  ConfigKey aka(std::vector<std::string> names) const;
  ConfigKey in_gguf(std::string name) const;
  ConfigKey with_effect(KeyEffect e) const;
  ConfigKey only_default(std::string reason) const;
};

// Builders for the usual keys (fallback nullopt: required). `field` returns the ModelConfig member.
using FieldOf = std::function<KeyField(ModelConfig&)>;
ConfigKey int_key(std::string hf, std::string gguf, FieldOf field, std::optional<int64_t> fallback,
                  int64_t min = 1, int64_t max = 1 << 20, KeyEffect effect = KeyEffect::Math);
ConfigKey number_key(std::string hf, std::string gguf, FieldOf field, std::optional<double> fallback,
                     double min, double max, KeyEffect effect = KeyEffect::Math);
ConfigKey bool_key(std::string hf, std::string gguf, FieldOf field, std::optional<bool> fallback,
                   KeyEffect effect = KeyEffect::Math);
ConfigKey string_key(std::string hf, std::string gguf, FieldOf field, std::optional<std::string> fallback,
                     std::vector<std::string> choices, KeyEffect effect = KeyEffect::Math);
ConfigKey numbers_key(std::string hf, std::string gguf, FieldOf field,
                      std::optional<std::vector<double>> fallback, KeyEffect effect = KeyEffect::Math);

struct Family {
  std::string name;                      // make-model's --arch and messages: "falcon-h1"
  ModelFamily id = ModelFamily::Mamba;   // the enum the blocks switch on
  std::vector<std::string> model_types;  // HF model_type values: {"falcon_h1"}
  std::vector<std::string> gguf_archs;   // llama.cpp general.architecture values: {"falcon-h1"}
  std::vector<ConfigKey> keys;

  // After the keys are read: values derived from several keys (d_inner = heads x headdim), list-
  // valued keys (layer_types, hybrid_override_pattern), refusals of unsupported settings. May be
  // null.
  std::function<void(const ConfigReader&, ModelConfig&)> parse_extra;
  // Throws mb::Error (prefixed by `where`) for sizes the blocks cannot run. May be null.
  std::function<void(const ModelConfig&, const std::string& where)> validate;
  // The blocks of the model, in order, with their checkpoint names.
  std::function<std::vector<BlockSpec>(const ModelConfig&)> blocks;

  // GGUF: the HF keys the declared table cannot map one to one (a pattern from per-layer
  // arrays, presence of biases from tensors), added to the config built from the declared keys;
  // and their inverse when writing. May be null.
  std::function<void(const GgufFile&, const std::string& arch, nlohmann::json& hf)> gguf_extra;
  std::function<void(GgufWriter&, const ModelConfig&, const std::string& arch)> write_gguf_extra;
  // The GGUF architecture a config is written as (several for one family: nemotron_h_moe). May be
  // null: gguf_archs[0].
  std::function<std::string(const ModelConfig&)> gguf_arch;
  // Throws mb::Error naming the setting when `config` cannot be written as GGUF (llama.cpp's
  // layout has no place for it). May be null.
  std::function<void(const ModelConfig&)> check_gguf;
  // HF keys the table does not write (layer_types, architectures, ...), added by make-model's
  // writer. May be null.
  std::function<void(const ModelConfig&, nlohmann::json& hf)> hf_extra;
  // A small, valid Hugging Face config of the family with these sizes, for make-model --arch (its
  // --set flags override any declared key).
  std::function<nlohmann::json(int64_t d_model, int64_t n_layer, int64_t vocab)> example;
};

// Every family, in the order make-model lists them.
const std::vector<const Family*>& all_families();
// The family of a model_type, a GGUF architecture or a make-model --arch name; null if none.
const Family* family_by_model_type(const std::string& model_type);
const Family* family_by_gguf_arch(const std::string& arch);
const Family* family_by_name(const std::string& name);
// The declared family of a parsed config (by ModelConfig::family); null for a family still parsed
// by hand (none, once every family is declared).
const Family* find_family(ModelFamily id);

// Reads every declared key of `family` into `config` (defaults where absent), then parse_extra.
void parse_family_keys(const Family& family, const ConfigReader& reader, ModelConfig& config);
// The family's HF config.json form of a GGUF file's metadata, for parse_model_config.
nlohmann::json gguf_family_config_json(const Family& family, const GgufFile& file, const std::string& arch,
                                       int64_t vocab_rows);
// The declared keys (and hf_extra's) of `config` as config.json holds them.
nlohmann::json family_config_to_hf_json(const Family& family, const ModelConfig& config);
// The declared keys with a GGUF name (and write_gguf_extra's), as {arch}.* metadata.
void set_gguf_family_metadata(const Family& family, GgufWriter& writer, const ModelConfig& config);
// Mixes every Math and State key's value (in declaration order, each behind its name) into `hash`.
uint64_t hash_family_keys(const Family& family, const ModelConfig& config, uint64_t hash);

}  // namespace mb
