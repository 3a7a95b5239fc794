// SPDX-License-Identifier: MIT
// The generic half of a declared checkpoint family (model/family.h): reading each declared key
// (aliases, defaults, types, bounds, refusals) from config.json and from GGUF metadata, writing
// both back, and hashing exactly the keys that change the math. A family of its own, declared
// here and not registered, so that the test does not depend on any real family's table.
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "common/test_util.h"
#include "core/error.h"
#include "io/gguf.h"
#include "model/config_reader.h"
#include "model/family.h"

namespace mb {
namespace {

using nlohmann::json;

Family declared_test_family() {
  Family f;
  f.name = "test-family";
  f.id = ModelFamily::Mamba;
  f.model_types = {"test_family"};
  f.gguf_archs = {"testfam"};
  f.keys = {
      int_key(
          "hidden_size", "embedding_length", [](ModelConfig& c) -> KeyField { return &c.d_model; },
          std::nullopt, 1, 1 << 16, KeyEffect::State),
      int_key(
          "num_hidden_layers", "block_count", [](ModelConfig& c) -> KeyField { return &c.n_layer; }, 2, 1, 64,
          KeyEffect::State)
          .aka({"n_layer"}),
      number_key(
          "rms_norm_eps", "attention.layer_norm_rms_epsilon",
          [](ModelConfig& c) -> KeyField { return &c.norm_eps; }, 1e-6, 1e-12, 0.5),
      bool_key(
          "attention_bias", "", [](ModelConfig& c) -> KeyField { return &c.hybrid.attention.bias; }, false),
      number_key(
          "rope_theta", "rope.freq_base",
          [](ModelConfig& c) -> KeyField { return &c.hybrid.attention.rope_theta; }, 10000.0, 1.0, 1e12),
      string_key("layer_kinds", "layer_kinds", [](ModelConfig& c) -> KeyField { return &c.hybrid.pattern; },
                 "M*", {"M*", "MM"}),
      int_key(
          "pad_token_id", "", [](ModelConfig& c) -> KeyField { return &c.pad_vocab_size_multiple; }, 1, 0,
          1 << 20, KeyEffect::None),
      number_key(
          "rope_scaling_factor", "", [](ModelConfig& c) -> KeyField { return &c.hybrid.logits_scaling; }, 1.0,
          0.0, 100.0)
          .only_default("only unscaled RoPE"),
  };
  f.blocks = [](const ModelConfig&) { return std::vector<BlockSpec>{}; };
  return f;
}

ModelConfig parse_declared(const Family& f, const json& object) {
  ModelConfig c;
  parse_family_keys(f, ConfigReader(object, "'cfg.json'"), c);
  return c;
}

std::string declared_error(const Family& f, const json& object) {
  try {
    parse_declared(f, object);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(DeclaredFamily, ReadsKeysAliasesAndDefaults) {
  const Family f = declared_test_family();
  const ModelConfig c = parse_declared(f, {{"hidden_size", 48}, {"n_layer", 5}, {"attention_bias", true}});
  EXPECT_EQ(c.d_model, 48);
  EXPECT_EQ(c.n_layer, 5);  // read through its alias
  EXPECT_EQ(c.norm_eps, 1e-6f);
  EXPECT_TRUE(c.hybrid.attention.bias);
  EXPECT_EQ(c.hybrid.attention.rope_theta, 10000.0);
  EXPECT_EQ(c.hybrid.pattern, "M*");
  // The HF name wins over an alias.
  EXPECT_EQ(parse_declared(f, {{"hidden_size", 8}, {"num_hidden_layers", 3}, {"n_layer", 9}}).n_layer, 3);
}

TEST(DeclaredFamily, RefusesBadValuesNamingTheFileAndKey) {
  const Family f = declared_test_family();
  EXPECT_NE(declared_error(f, json::object()).find("'cfg.json': missing required key 'hidden_size'"),
            std::string::npos);
  EXPECT_NE(declared_error(f, {{"hidden_size", 0}}).find("'hidden_size' must be an integer in [1, 65536]"),
            std::string::npos);
  EXPECT_NE(declared_error(f, {{"hidden_size", 1.5}}).find("'hidden_size'"), std::string::npos);
  EXPECT_NE(declared_error(f, {{"hidden_size", 8}, {"n_layer", 65}}).find("'n_layer'"), std::string::npos);
  EXPECT_NE(declared_error(f, {{"hidden_size", 8}, {"rms_norm_eps", 0.9}}).find("'rms_norm_eps'"),
            std::string::npos);
  EXPECT_NE(declared_error(f, {{"hidden_size", 8}, {"attention_bias", 1}}).find("true or false"),
            std::string::npos);
  EXPECT_NE(declared_error(f, {{"hidden_size", 8}, {"layer_kinds", "M-"}}).find("one of \"M*\", \"MM\""),
            std::string::npos);
  EXPECT_NE(declared_error(f, {{"hidden_size", 8}, {"rope_scaling_factor", 2.0}})
                .find("'rope_scaling_factor' = 2.0 is not supported (only unscaled RoPE)"),
            std::string::npos);
  // The default itself, written out, is accepted.
  EXPECT_EQ(declared_error(f, {{"hidden_size", 8}, {"rope_scaling_factor", 1.0}}), "");
  // A null value is an absent one (transformers writes None as null).
  EXPECT_EQ(parse_declared(f, {{"hidden_size", 8}, {"rope_theta", nullptr}}).hybrid.attention.rope_theta,
            10000.0);
}

TEST(DeclaredFamily, HuggingFaceFormRoundTrips) {
  const Family f = declared_test_family();
  const ModelConfig c = parse_declared(f, {{"hidden_size", 24},
                                           {"n_layer", 3},
                                           {"rms_norm_eps", 1e-5},
                                           {"rope_theta", 5e5},
                                           {"layer_kinds", "MM"}});
  const json hf = family_config_to_hf_json(f, c);
  EXPECT_EQ(hf["model_type"], "test_family");
  EXPECT_EQ(hf["num_hidden_layers"], 3);
  const ModelConfig back = parse_declared(f, hf);
  EXPECT_EQ(back.d_model, 24);
  EXPECT_EQ(back.n_layer, 3);
  EXPECT_EQ(back.norm_eps, 1e-5f);
  EXPECT_EQ(back.hybrid.attention.rope_theta, 5e5);
  EXPECT_EQ(back.hybrid.pattern, "MM");
}

TEST(DeclaredFamily, GgufMetadataRoundTripsAndIsChecked) {
  const Family f = declared_test_family();
  ModelConfig c =
      parse_declared(f, {{"hidden_size", 40}, {"n_layer", 4}, {"rope_theta", 1e6}, {"layer_kinds", "MM"}});
  c.vocab_size = 300;
  const std::string dir = test::make_temp_dir("declared_family");
  const std::string path = (std::filesystem::path(dir) / "m.gguf").string();
  {
    GgufWriter writer;
    writer.set("general.architecture", GgufValue::string("testfam"));
    set_gguf_family_metadata(f, writer, c);
    writer.write(path);
  }
  const GgufFile file(path);
  EXPECT_EQ(file.unsigned_value("testfam.embedding_length"), 40u);
  EXPECT_EQ(file.float_value("testfam.rope.freq_base"), 1e6);
  EXPECT_EQ(file.string_value("testfam.layer_kinds"), "MM");
  EXPECT_EQ(file.find("testfam.pad_token_id"), nullptr);  // keys without a GGUF name are not written
  const json hf = gguf_family_config_json(f, file, "testfam", 304);
  EXPECT_EQ(hf["vocab_size"], 304);
  EXPECT_EQ(hf["tie_word_embeddings"], true);  // no output.weight
  const ModelConfig back = parse_declared(f, hf);
  EXPECT_EQ(back.d_model, 40);
  EXPECT_EQ(back.n_layer, 4);
  EXPECT_EQ(back.hybrid.attention.rope_theta, 1e6);
  EXPECT_EQ(back.hybrid.pattern, "MM");

  // A value of the wrong GGUF type is refused naming the metadata key and the config key.
  const std::string bad = (std::filesystem::path(dir) / "bad.gguf").string();
  {
    GgufWriter writer;
    writer.set("general.architecture", GgufValue::string("testfam"));
    writer.set("testfam.embedding_length", GgufValue::string("forty"));
    writer.write(bad);
  }
  try {
    gguf_family_config_json(f, GgufFile(bad), "testfam", 304);
    FAIL() << "a string embedding_length was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("metadata 'testfam.embedding_length' holds string"),
              std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("'hidden_size'"), std::string::npos) << e.what();
  }
  std::filesystem::remove_all(dir);
}

TEST(DeclaredFamily, HashCoversEveryMathKeyAndNoOther) {
  const Family f = declared_test_family();
  const json base = {{"hidden_size", 16}};
  const uint64_t h0 = hash_family_keys(f, parse_declared(f, base), 1);
  EXPECT_EQ(hash_family_keys(f, parse_declared(f, base), 1), h0);
  const json changes[] = {{{"hidden_size", 17}},      {{"n_layer", 3}},          {{"rms_norm_eps", 2e-6}},
                          {{"attention_bias", true}}, {{"rope_theta", 10001.0}}, {{"layer_kinds", "MM"}}};
  for (const json& change : changes) {
    json object = base;
    object.update(change);
    EXPECT_NE(hash_family_keys(f, parse_declared(f, object), 1), h0) << change.dump();
  }
  json metadata_only = base;
  metadata_only["pad_token_id"] = 7;  // KeyEffect::None
  EXPECT_EQ(hash_family_keys(f, parse_declared(f, metadata_only), 1), h0);
}

}  // namespace
}  // namespace mb
