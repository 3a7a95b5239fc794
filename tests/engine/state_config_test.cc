// SPDX-License-Identifier: MIT
// A saved state belongs to the checkpoint and to every config value that changes the computation:
// the same weights under another top-k, routed scale, RoPE base, head tying or layer list answer
// differently, so a state file, a slot file or a shared prefix-store file saved under one config is
// refused under the other (a replica must never resume another configuration's prefix), while the
// unchanged config keeps loading it.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <functional>

#include <nlohmann/json.hpp>

#include "common/hybrid_configs.h"
#include "common/model_fixture.h"
#include "common/test_util.h"
#include "core/error.h"
#include "engine/prefix_store.h"
#include "engine/slot_file.h"
#include "engine/state_file.h"
#include "io/safetensors.h"

namespace mb {
namespace {

using nlohmann::json;

// A copy of the checkpoint `dir` whose config.json went through `edit`.
std::string config_variant(const std::string& dir, const std::string& tag,
                           const std::function<void(json&)>& edit) {
  const std::string out = test::make_temp_dir(tag);
  std::filesystem::copy(dir, out, std::filesystem::copy_options::recursive);
  json config = json::parse(std::ifstream(out + "/config.json"));
  edit(config);
  std::ofstream(out + "/config.json") << config.dump(1);
  return out;
}

void expect_refused_as_other_model(const std::function<void()>& load, const std::string& what) {
  try {
    load();
    ADD_FAILURE() << what << " was accepted under another config";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("different model"), std::string::npos) << e.what();
  }
}

// Saves a state, a slot file and a prefix-store file with the checkpoint `dir` as it is, then loads
// the config variant `edit` makes: it must compute differently (else the case tests nothing) and
// refuse all three, while the unedited copy accepts them.
void expect_config_change_refused(const std::string& dir, const std::string& tag,
                                  const std::function<void(json&)>& edit) {
  SCOPED_TRACE(tag);
  const auto original = Model::load(dir);
  const auto tokens = test::random_tokens(7, original->config().vocab_size, 5);
  const std::string files = test::make_temp_dir(tag + "_files");
  save_state(files + "/a.state", *original, test::state_after(*original, tokens));
  save_slot_file(files + "/a.mbslot", *original, tokens, test::state_after(*original, tokens));
  std::string stored_name;
  std::filesystem::create_directory(files + "/store");
  {
    PrefixStore store(*original, {.folder = files + "/store"});
    stored_name = store.file_name(tokens);
    store.save(tokens, test::state_after(*original, tokens));
    store.flush();
  }

  const auto same = Model::load(config_variant(dir, tag + "_same", [](json&) {}));
  EXPECT_EQ(load_state(files + "/a.state", *same).position, 7);
  EXPECT_EQ(load_slot_file(files + "/a.mbslot", *same).tokens.size(), 7u);

  const auto edited = Model::load(config_variant(dir, tag + "_edited", edit));
  const ComputeContext ctx{1, best_isa()};
  SequenceState s1 = original->new_state(), s2 = edited->new_state();
  EXPECT_FALSE(test::same_bits(test::step_logits(*original, ctx, tokens, s1),
                               test::step_logits(*edited, ctx, tokens, s2)))
      << "the edit does not change the computation";
  EXPECT_NE(edited->fingerprint(), original->fingerprint());
  expect_refused_as_other_model([&] { load_state(files + "/a.state", *edited); }, "the state file");
  expect_refused_as_other_model([&] { load_slot_file(files + "/a.mbslot", *edited); }, "the slot file");
  // The shared store names files by the model key, so the edited config never sees the file; under
  // its own name (a collision, or a copy) the file is still refused, and removed.
  PrefixStore store(*edited, {.folder = files + "/store"});
  EXPECT_FALSE(store.find_longest(tokens, 1, tokens.size()).has_value());
  EXPECT_NE(store.file_name(tokens), stored_name);
  std::filesystem::rename(files + "/store/" + stored_name, files + "/store/" + store.file_name(tokens));
  EXPECT_FALSE(store.find_longest(tokens, 1, tokens.size()).has_value());
  EXPECT_EQ(store.counters().rejected, 1u);
}

std::string write_hybrid(const ModelConfig& config, const std::string& tag) {
  MakeModelOptions o;
  o.config = config;
  o.seed = 41;
  return test::write_model(o, tag);
}

TEST(StateConfig, IntegerSettingTopK) {
  const std::string dir = write_hybrid(test::nemotron_moe_config(), "statecfg_topk");
  expect_config_change_refused(dir, "statecfg_topk", [](json& c) { c["num_experts_per_tok"] = 2; });
}

TEST(StateConfig, FloatSettingsRoutedScaleAndRopeTheta) {
  const std::string moe = write_hybrid(test::nemotron_moe_config(), "statecfg_scale");
  expect_config_change_refused(moe, "statecfg_scale", [](json& c) { c["routed_scaling_factor"] = 1.5; });
  const std::string rope = write_hybrid(test::granite_rope_config("*M*", 1e4), "statecfg_theta");
  expect_config_change_refused(rope, "statecfg_theta", [](json& c) { c["rope_theta"] = 500.0; });
}

TEST(StateConfig, BoolSettingsNormalizeAndTiedHead) {
  const std::string moe = write_hybrid(test::nemotron_moe_config(), "statecfg_norm");
  expect_config_change_refused(moe, "statecfg_norm", [](json& c) { c["norm_topk_prob"] = false; });
  // Nemotron-H's head is untied; tied, the stored lm_head is ignored for the embedding's rows.
  const std::string untied = write_hybrid(test::nemotron_config("M*-"), "statecfg_tie");
  expect_config_change_refused(untied, "statecfg_tie", [](json& c) { c["tie_word_embeddings"] = true; });
}

TEST(StateConfig, StringSettingPositionEmbeddingType) {
  const std::string nope = write_hybrid(test::granite_config("*M"), "statecfg_rope");
  expect_config_change_refused(nope, "statecfg_rope", [](json& c) { c["position_embedding_type"] = "rope"; });
}

// The layer list decides which block reads which tensors: a checkpoint holding both layers' tensors
// under one list or another is either refused at load (tensors the config does not describe) or,
// where it loads, computes differently and refuses the other list's states.
TEST(StateConfig, PerLayerListLayerTypes) {
  const std::string dir = write_hybrid(test::granite_config("*M"), "statecfg_layers");
  const std::string swapped = write_hybrid(test::granite_config("M*"), "statecfg_layers_swapped");
  SafetensorsWriter writer;
  {
    const TensorSet a = TensorSet::open_dir(dir), b = TensorSet::open_dir(swapped);
    for (const TensorSet* set : {&a, &b})
      for (const auto& [name, t] : set->tensors())
        if (set == &a || a.find(name) == nullptr)
          writer.add(name, *t.dtype, t.shape, std::vector<uint8_t>(t.data, t.data + t.byte_size));
  }
  writer.write(dir + "/model.safetensors");
  try {
    Model::load(dir);
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("does not describe"), std::string::npos) << e.what();
    return;
  }
  expect_config_change_refused(dir, "statecfg_layers", [](json& c) {
    c["layer_types"] = json::array({"mamba", "attention"});
  });
}

// A State key (it sizes the state, yet here no tensor): without num_key_value_heads, Granite's
// head count splits the same q/k/v rows and the same KV width into more, smaller heads.
TEST(StateConfig, StateKeyAttentionHeadCount) {
  ModelConfig heads = test::granite_config("*M");
  heads.hybrid.attention.n_kv_heads = heads.hybrid.attention.n_heads;
  const std::string written = write_hybrid(heads, "statecfg_heads_written");
  const std::string dir = config_variant(written, "statecfg_heads", [](json& c) {
    c.erase("num_key_value_heads");
    c["attention_multiplier"] = 0.25;
  });
  expect_config_change_refused(dir, "statecfg_heads", [](json& c) { c["num_attention_heads"] = 8; });
}

// The pure Mamba families' keys: a Number (the norm epsilon, Mamba-1; FalconMamba's mixer
// epsilon) and a list (Mamba-2's time_step_limit, read beside the table).
TEST(StateConfig, MambaFamiliesNumbersAndList) {
  MakeModelOptions o;
  o.config = test::small_config();
  o.seed = 43;
  const std::string mamba1 = test::write_model(o, "statecfg_eps");
  expect_config_change_refused(mamba1, "statecfg_eps", [](json& c) { c["layer_norm_epsilon"] = 0.5; });
  o.config.ssm.mixer_rms_norm = true;
  const std::string falcon = test::write_model(o, "statecfg_mixer_eps");
  expect_config_change_refused(falcon, "statecfg_mixer_eps", [](json& c) { c["mixer_rms_eps"] = 0.5; });
  o.config = test::small_config();
  o.config.arch = Architecture::Mamba2;
  o.config.ssm.d_state = 16;
  o.config.ssm.headdim = 16;
  o.config.ssm.chunk_size = 16;
  const std::string mamba2 = test::write_model(o, "statecfg_dt_limit");
  expect_config_change_refused(mamba2, "statecfg_dt_limit", [](json& c) {
    c["time_step_limit"] = json::array({0.0, 0.01});
  });
}

}  // namespace
}  // namespace mb
