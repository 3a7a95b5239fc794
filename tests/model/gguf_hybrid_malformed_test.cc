// SPDX-License-Identifier: MIT
// Malformed granitehybrid and nemotron_h files (model/gguf_hybrid.h, model/gguf_checkpoint.cc):
// each defect of the per-layer arrays, the layer kinds, the keys and the tensors is refused with
// an mb::Error naming the file and the key or tensor, never a crash or a silently different model.
#include <gtest/gtest.h>

#include <functional>

#include "common/hybrid_configs.h"
#include "common/model_fixture.h"
#include "common/test_util.h"
#include "core/error.h"
#include "io/gguf.h"
#include "model/gguf_checkpoint.h"

namespace mb {
namespace {

using Metadata = std::vector<std::pair<std::string, GgufValue>>;

struct Edit {
  std::function<void(Metadata&)> metadata = [](Metadata&) {};
  // Returns false to drop the tensor; may change its dims or type.
  std::function<bool(GgufTensorInfo&)> tensor = [](GgufTensorInfo&) { return true; };
};

// The file at `path` rewritten with `edit` applied (the same bytes for every tensor kept).
std::string rewrite(const std::string& path, const std::string& out, const Edit& edit) {
  const GgufFile file(path);
  Metadata metadata = file.metadata();
  edit.metadata(metadata);
  GgufWriter writer;
  for (const auto& [key, value] : metadata) writer.set(key, value);
  for (GgufTensorInfo t : file.tensors()) {
    const std::vector<uint8_t> bytes(t.data, t.data + t.byte_size);
    if (!edit.tensor(t)) continue;
    writer.add_tensor(t.name, t.ne, t.type,
                      t.type == file.find_tensor(t.name)->type && t.ne == file.find_tensor(t.name)->ne
                          ? bytes
                          : std::vector<uint8_t>(ggml_tensor_bytes(t.type, t.ne, t.name), 0));
  }
  writer.write(out);
  return out;
}

Edit set(const std::string& key, std::optional<GgufValue> value) {
  Edit e;
  e.metadata = [key, value](Metadata& m) {
    for (auto it = m.begin(); it != m.end(); ++it)
      if (it->first == key) {
        if (value)
          it->second = *value;
        else
          m.erase(it);
        return;
      }
    if (value) m.emplace_back(key, *value);
  };
  return e;
}

Edit both(Edit a, Edit b) {
  Edit e;
  e.metadata = [a, b](Metadata& m) {
    a.metadata(m);
    b.metadata(m);
  };
  e.tensor = [a, b](GgufTensorInfo& t) { return a.tensor(t) && b.tensor(t); };
  return e;
}

Edit drop_tensor(const std::string& name) {
  Edit e;
  e.tensor = [name](GgufTensorInfo& t) { return t.name != name; };
  return e;
}

// `name` with other dims (empty: its own) and ggml type.
Edit retype_tensor(const std::string& name, std::vector<int64_t> ne, uint32_t type) {
  Edit e;
  e.tensor = [=](GgufTensorInfo& t) {
    if (t.name == name) {
      if (!ne.empty()) t.ne = ne;
      t.type = type;
    }
    return true;
  };
  return e;
}

GgufValue i32s(std::vector<int64_t> values) {
  return GgufValue::integer_array(GgufType::Int32, std::move(values));
}

std::string written(const ModelConfig& config, const std::string& tag) {
  MakeModelOptions o;
  o.config = config;
  const std::string dir = test::write_model(o, tag);
  const std::string path = dir + "/model.gguf";
  write_gguf_checkpoint(path, load_model_config(dir), TensorSet::open_dir(dir), {GgufFileType::F32, "", {}});
  return path;
}

void expect_refused(const std::string& good, const std::vector<std::pair<Edit, std::string>>& cases) {
  ASSERT_NO_THROW(Model::load(good));
  for (size_t i = 0; i < cases.size(); ++i) {
    SCOPED_TRACE("case " + std::to_string(i) + ": " + cases[i].second);
    const std::string path = rewrite(good, good + ".bad" + std::to_string(i) + ".gguf", cases[i].first);
    try {
      Model::load(path);
      ADD_FAILURE() << "loaded";
    } catch (const Error& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find(cases[i].second), std::string::npos) << what;
      EXPECT_NE(what.find(".bad"), std::string::npos) << "the message names the file: " << what;
    }
  }
}

TEST(HybridGgufMalformed, GraniteFilesAreRefusedNamingTheKeyOrTensor) {
  // Layers: attention, Mamba, Mamba, attention; hidden 64, 4 heads / 2 KV heads of 16, MLPs of 40.
  const std::string good = written(test::granite_config("*MM*", 64), "gguf_bad_granite");
  const std::string kv = "granitehybrid.attention.head_count_kv";
  expect_refused(
      good,
      {
          {set(kv, i32s({2, 0, 0})),
           "'granitehybrid.attention.head_count_kv' lists 3 values but block_count is 4"},
          {set(kv, i32s({2, 0, 0, 4})), "is 2 for layer 0 but 4 for layer 3"},
          {set(kv, GgufValue::float_array(GgufType::Float32, {2, 0, 0, 2})), "must hold integers, got f32"},
          {set(kv, i32s({2, 0, 0, -1})), "holds -1 for layer 3"},
          // A Mamba layer's tensors in what the metadata calls an attention layer.
          {set(kv, i32s({2, 2, 0, 2})), "tensor 'blk.1.ssm_in.weight' is not part of a granitehybrid model"},
          {set("granitehybrid.attention.head_count", std::nullopt),
           "missing required metadata 'granitehybrid.attention.head_count'"},
          {set("granitehybrid.feed_forward_length", i32s({64, 64, 0, 64})),
           "'granitehybrid.feed_forward_length' is 0 for layer 2"},
          {both(set("granitehybrid.feed_forward_length", GgufValue::u32(32)),
                set("granitehybrid.expert_shared_feed_forward_length", GgufValue::u32(32))),
           "tensor 'blk.0.ffn_gate.weight' has dims {64, 40} but the metadata implies {64, 32}"},
          {set("granitehybrid.expert_shared_feed_forward_length", GgufValue::u32(32)),
           "expert_shared_feed_forward_length' = 32 differs from feed_forward_length 40"},
          // Experts the file's tensors do not have.
          {both(set("granitehybrid.expert_count", GgufValue::u32(8)),
                set("granitehybrid.expert_used_count", GgufValue::u32(2))),
           "tensor 'blk.0.ffn_gate.weight' is not part of a granitehybrid model"},
          {set("granitehybrid.expert_used_count", GgufValue::u32(2)),
           "'granitehybrid.expert_used_count' = 2 but expert_count is 0"},
          {set("granitehybrid.rope.scaling.finetuned", GgufValue::boolean(true)),
           "rope.scaling.finetuned' is true"},
          {set("granitehybrid.rope.scaling.finetuned", std::nullopt), "rope.scaling.finetuned' is absent"},
          {set("granitehybrid.attention.key_length", GgufValue::u32(8)), "Granite's heads are"},
          {set("granitehybrid.ssm.inner_size", GgufValue::u32(100)), "'granitehybrid.ssm.inner_size' = 100"},
          {set("granitehybrid.residual_scale", GgufValue::f32(-1.0f)), "'granitehybrid.residual_scale' = -1"},
          {drop_tensor("blk.2.ffn_up.weight"), "missing tensor 'blk.2.ffn_up.weight'"},
          {drop_tensor("blk.3.attn_v.weight"), "missing tensor 'blk.3.attn_v.weight'"},
          {retype_tensor("blk.0.attn_k.weight", {64, 16}, kGgmlF32),
           "tensor 'blk.0.attn_k.weight' has dims {64, 16} but the metadata implies {64, 32}"},
          {retype_tensor("blk.1.ffn_gate.weight", {64, 128}, kGgmlF32), "'blk.1.ffn_gate.weight' has dims"},
          // Q5_0 (ggml type 6): what llama-quantize's Q4_K_M falls back to for rows of 64.
          {retype_tensor("blk.1.ssm_in.weight", {}, 6), "'blk.1.ssm_in.weight' is stored as Q5_0"},
      });
}

TEST(HybridGgufMalformed, NemotronFilesAreRefusedNamingTheKeyOrTensor) {
  // Layers: Mamba, MLP, attention, Mamba, MLP, attention.
  const std::string good = written(test::nemotron_config("M-*M-*", 40), "gguf_bad_nemotron");
  const std::string ff = "nemotron_h.feed_forward_length", kv = "nemotron_h.attention.head_count_kv";
  expect_refused(
      good,
      {
          {set(ff, std::nullopt), "missing required metadata 'nemotron_h.feed_forward_length'"},
          {set(ff, i32s({0, 56, 56, 0, 56, 0})),
           "layer 2 has both nemotron_h.attention.head_count_kv 1 "
           "and nemotron_h.feed_forward_length 56: an unknown layer kind"},
          {set(ff, i32s({0, 56, 0, 0, 48, 0})), "is 56 for layer 1 but 48 for layer 4"},
          {set(kv, i32s({0, 0, 1, 0, 0, 0})),
           "tensor 'blk.5.attn_q.weight' is not part of a nemotron_h model "
           "(layer 5 is a Mamba-2 layer by its metadata)"},
          {set(kv, i32s({0, 0, 1, 0, 0})), "lists 5 values but block_count is 6"},
          {set("nemotron_h.attention.value_length", GgufValue::u32(16)), "differs from the key head size 8"},
          {both(set("nemotron_h.attention.key_length", GgufValue::u32(16)),
                set("nemotron_h.attention.value_length", GgufValue::u32(16))),
           "'blk.2.attn_q.weight' has dims {40, 32} but the metadata implies {40, 64}"},
          {set("nemotron_h.ssm.time_step_rank", GgufValue::u32(7)), "is not a multiple of the head count"},
          {set("nemotron_h.block_count", GgufValue::u32(5)), "lists 6 values but block_count is 5"},
          {set("nemotron_h.expert_count", GgufValue::u32(4)),
           "'nemotron_h.expert_used_count' = 0 must lie in [1, expert_count = 4]"},
          {drop_tensor("blk.1.ffn_down.weight"), "missing tensor 'blk.1.ffn_down.weight'"},
          {drop_tensor("blk.0.ssm_norm.weight"), "missing tensor 'blk.0.ssm_norm.weight'"},
      });
}

// ---------------------------------------------------------------------------------------------
// The mixture-of-experts files: granitehybrid with experts and nemotron_h_moe.

TEST(HybridGgufMalformed, GraniteExpertFilesAreRefusedNamingTheKeyOrTensor) {
  // 5 experts of 24 (top 2) and a shared MLP of 36 in each of the layers *, M; hidden 40.
  const std::string good = written(test::granite_moe_config("*M", 5, 2, 24), "gguf_bad_granite_moe");
  const std::string p = "granitehybrid.";
  expect_refused(
      good,
      {
          {set(p + "expert_count", GgufValue::u32(6)),
           "tensor 'blk.0.ffn_gate_inp.weight' has dims {40, 5} but the metadata implies {40, 6}"},
          {set(p + "expert_used_count", GgufValue::u32(6)),
           "'granitehybrid.expert_used_count' = 6 must lie in [1, expert_count = 5]"},
          {set(p + "expert_used_count", std::nullopt),
           "expert_used_count' = 0 must lie in [1, expert_count = 5]"},
          {set(p + "expert_count", GgufValue::u32(70000)), "'granitehybrid.expert_count' = 70000 is above"},
          // Without experts feed_forward_length is the shared MLP's width, which the other key
          // contradicts.
          {both(set(p + "expert_count", GgufValue::u32(0)), set(p + "expert_used_count", GgufValue::u32(0))),
           "expert_shared_feed_forward_length' = 36 differs from feed_forward_length 24"},
          {set(p + "expert_shared_feed_forward_length", std::nullopt),
           "missing required metadata 'granitehybrid.expert_shared_feed_forward_length'"},
          {set(p + "expert_shared_feed_forward_length", GgufValue::u32(24)),
           "'blk.0.ffn_gate_shexp.weight' has dims {40, 36} but the metadata implies {40, 24}"},
          {set(p + "feed_forward_length", GgufValue::u32(36)),
           "'blk.0.ffn_gate_exps.weight' has dims {40, 24, 5} but the metadata implies {40, 36, 5}"},
          {set(p + "expert_weights_scale", GgufValue::f32(2.5f)), "Granite's routing weights are not scaled"},
          {set(p + "expert_group_count", GgufValue::u32(2)), "group-limited expert routing"},
          {set(p + "moe_latent_size", GgufValue::u32(16)),
           "'granitehybrid.moe_latent_size' = 16: latent expert"},
          {set(p + "nextn_predict_layers", GgufValue::u32(1)), "multi-token-prediction blocks"},
          {drop_tensor("blk.1.ffn_gate_exps.weight"), "missing tensor 'blk.1.ffn_gate_exps.weight'"},
          {drop_tensor("blk.0.ffn_up_exps.weight"), "missing tensor 'blk.0.ffn_up_exps.weight'"},
          {drop_tensor("blk.1.ffn_down_exps.weight"), "missing tensor 'blk.1.ffn_down_exps.weight'"},
          {drop_tensor("blk.0.ffn_gate_inp.weight"), "missing tensor 'blk.0.ffn_gate_inp.weight'"},
          {drop_tensor("blk.1.ffn_up_shexp.weight"), "missing tensor 'blk.1.ffn_up_shexp.weight'"},
          // One expert's matrix where the experts' stack belongs, and a stack of the wrong count.
          {retype_tensor("blk.0.ffn_down_exps.weight", {24, 40}, kGgmlF32),
           "'blk.0.ffn_down_exps.weight' has dims {24, 40} but the metadata implies {24, 40, 5}"},
          {retype_tensor("blk.1.ffn_up_exps.weight", {40, 24, 4}, kGgmlF32),
           "'blk.1.ffn_up_exps.weight' has dims {40, 24, 4} but the metadata implies {40, 24, 5}"},
      });
}

TEST(HybridGgufMalformed, NemotronHMoeFilesAreRefusedNamingTheKeyOrTensor) {
  // Layers: Mamba, MoE, attention, MoE; 9 experts of 24 (top 3), a shared expert of 44; hidden 40.
  const std::string good = written(test::nemotron_moe_config("ME*E"), "gguf_bad_nemotron_moe");
  const std::string p = "nemotron_h_moe.";
  ASSERT_EQ(GgufFile(good).string_value("general.architecture"), "nemotron_h_moe");
  expect_refused(
      good,
      {
          {set(p + "expert_count", std::nullopt),
           "'nemotron_h_moe.expert_count' is absent: a nemotron_h_moe file's feed-forward layers are "
           "mixtures"},
          {set(p + "expert_used_count", GgufValue::u32(10)),
           "expert_used_count' = 10 must lie in [1, expert_count = 9]"},
          {set(p + "expert_count", GgufValue::u32(8)),
           "'blk.1.ffn_gate_inp.weight' has dims {40, 9} but the metadata implies {40, 8}"},
          {set(p + "expert_feed_forward_length", std::nullopt),
           "missing required metadata 'nemotron_h_moe.expert_feed_forward_length'"},
          {set(p + "expert_feed_forward_length", GgufValue::u32(20)),
           "'blk.1.ffn_up_exps.weight' has dims {40, 24, 9} but the metadata implies {40, 20, 9}"},
          {set(p + "expert_shared_feed_forward_length", GgufValue::u32(20)),
           "'blk.1.ffn_up_shexp.weight' has dims {40, 44} but the metadata implies {40, 20}"},
          {set(p + "expert_shared_count", GgufValue::u32(2)), "'nemotron_h_moe.expert_shared_count' = 2"},
          {set(p + "expert_weights_scale", GgufValue::f32(-2.5f)),
           "'nemotron_h_moe.expert_weights_scale' = -2.5"},
          {set(p + "expert_group_count", GgufValue::u32(3)), "'nemotron_h_moe.expert_group_count' = 3"},
          {set(p + "feed_forward_length", i32s({0, 24, 0, 0})),
           "tensor 'blk.3.ffn_up_shexp.weight' is not part of a nemotron_h_moe model "
           "(layer 3 is a Mamba-2 layer by its metadata)"},
          {set(p + "feed_forward_length", i32s({0, 24, 0, 16})), "is 24 for layer 1 but 16 for layer 3"},
          {drop_tensor("blk.3.exp_probs_b.bias"), "missing tensor 'blk.3.exp_probs_b.bias'"},
          {drop_tensor("blk.1.ffn_down_exps.weight"), "missing tensor 'blk.1.ffn_down_exps.weight'"},
          {drop_tensor("blk.3.ffn_down_shexp.weight"), "missing tensor 'blk.3.ffn_down_shexp.weight'"},
          {retype_tensor("blk.3.ffn_down_exps.weight", {24, 40, 9, 2}, kGgmlF32),
           "'blk.3.ffn_down_exps.weight' has dims {24, 40, 9, 2} but the metadata implies {24, 40, 9}"},
          {retype_tensor("blk.1.exp_probs_b.bias", {8}, kGgmlF32),
           "'blk.1.exp_probs_b.bias' has dims {8} but the metadata implies {9}"},
          // A latent width the experts were not made for, or without its projections.
          {set(p + "moe_latent_size", GgufValue::u32(16)),
           "'blk.1.ffn_up_exps.weight' has dims {40, 24, 9} but the metadata implies {16, 24, 9}"},
      });
}

TEST(HybridGgufMalformed, NemotronLatentFilesAreRefusedNamingTheKeyOrTensor) {
  // The file above with LatentMoE: experts 16 wide in and out between the two projections.
  const std::string good =
      written(test::nemotron_latent_config("ME*E", 16, 9, 3, 24), "gguf_bad_nemotron_latent");
  const std::string p = "nemotron_h_moe.";
  ASSERT_EQ(GgufFile(good).unsigned_value(p + "moe_latent_size"), 16u);
  expect_refused(
      good,
      {
          {drop_tensor("blk.3.ffn_latent_down.weight"), "missing tensor 'blk.3.ffn_latent_down.weight'"},
          {drop_tensor("blk.1.ffn_latent_up.weight"), "missing tensor 'blk.1.ffn_latent_up.weight'"},
          {set(p + "moe_latent_size", std::nullopt),
           "'blk.1.ffn_up_exps.weight' has dims {16, 24, 9} but the metadata implies {40, 24, 9}"},
          {retype_tensor("blk.1.ffn_latent_up.weight", {16, 20}, kGgmlF32),
           "'blk.1.ffn_latent_up.weight' has dims {16, 20} but the metadata implies {16, 40}"},
      });
}

}  // namespace
}  // namespace mb
