// SPDX-License-Identifier: MIT
// Bamba (model_family bamba, model/families/bamba.cc): its config as transformers' BambaConfig
// reads it (partial RoPE over half the head, attn_layer_indices, separate gate and up products),
// refusals naming the key, the exactness contract on make-model checkpoints (memcmp), and its GGUF
// files (llama.cpp's granitehybrid with RoPE) against the folder they are written from.
#include <gtest/gtest.h>

#include <cstring>
#include <nlohmann/json.hpp>

#include "common/hybrid_configs.h"
#include "common/model_fixture.h"
#include "common/test_util.h"
#include "core/error.h"
#include "io/file_io.h"
#include "io/gguf.h"
#include "io/npy.h"
#include "model/family.h"
#include "model/gguf_checkpoint.h"
#include "model/gguf_tensor_names.h"
#include "ops/quant.h"

namespace mb {
namespace {

using nlohmann::json;
using test::same_bits;

json bamba_golden_config() {
  return json::parse(read_text_file(std::string(MB_TEST_DATA_DIR) + "/goldens/bamba/config.json"));
}

json bamba_with(json config, const std::string& key, const json& value) {
  config[key] = value;
  return config;
}

void expect_bamba_refused(const json& config, const std::string& needle) {
  try {
    parse_model_config(config, "bamba.json");
    ADD_FAILURE() << "accepted; expected an error naming " << needle;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

TEST(BambaConfig, TheGoldensConfigReadsAsTransformersBambaConfigDoes) {
  const ModelConfig c = parse_model_config(bamba_golden_config(), "bamba");
  EXPECT_EQ(c.family, ModelFamily::Bamba);
  EXPECT_EQ(c.arch, Architecture::Mamba2);
  EXPECT_EQ(c.hybrid.pattern, "M*MM*");
  const AttentionConfig& a = c.hybrid.attention;
  EXPECT_EQ(a.n_heads, 4);
  EXPECT_EQ(a.n_kv_heads, 2);
  EXPECT_EQ(a.head_dim, 16);
  EXPECT_DOUBLE_EQ(a.scale, 0.25);
  EXPECT_DOUBLE_EQ(a.rope_theta, 10000.0);
  EXPECT_EQ(a.rotary_dims(), 8);  // partial_rotary_factor 0.5, hard-coded by BambaConfig
  EXPECT_TRUE(c.hybrid.mlp.separate_gate);
  EXPECT_EQ(c.hybrid.mlp.width, 96);
  EXPECT_EQ(c.ssm.d_inner, 128);
  EXPECT_EQ(c.ssm.headdim, 16);
  EXPECT_EQ(c.ssm.d_state, 16);
  EXPECT_TRUE(c.ssm.gated_norm);
  EXPECT_EQ(c.ssm.dt_limit_max, INFINITY);
  EXPECT_FALSE(c.tie_embeddings);
  EXPECT_EQ(c.hybrid.embedding_multiplier, 1.0);
  EXPECT_EQ(c.hybrid.residual_multiplier, 1.0);
  EXPECT_EQ(c.hybrid.logits_scaling, 1.0);
  const std::vector<BlockSpec> blocks = c.blocks();
  ASSERT_EQ(blocks.size(), 10u);
  EXPECT_EQ(blocks[2].kind, BlockKind::Attention);
  EXPECT_EQ(blocks[2].tensor("q_proj.weight"), "model.layers.1.self_attn.q_proj.weight");
  EXPECT_EQ(blocks[3].tensor("gate_proj.weight"), "model.layers.1.feed_forward.gate_proj.weight");
  EXPECT_EQ(blocks[3].norm(), "model.layers.1.pre_ff_layernorm.weight");
}

TEST(BambaConfig, SettingsTheEngineCannotHonourAreRefusedNamingTheKey) {
  const json golden = bamba_golden_config();
  expect_bamba_refused(bamba_with(golden, "mamba_n_groups", 2), "mamba_n_groups");
  expect_bamba_refused(bamba_with(golden, "rope_scaling", {{"type", "linear"}, {"factor", 2.0}}),
                       "rope_scaling");
  expect_bamba_refused(bamba_with(golden, "rope_parameters", {{"rope_type", "yarn"}}),
                       "rope_parameters.rope_type");
  expect_bamba_refused(bamba_with(golden, "partial_rotary_factor", 0.3), "partial_rotary_factor");
  expect_bamba_refused(bamba_with(golden, "hidden_act", "gelu"), "hidden_act");
  expect_bamba_refused(bamba_with(golden, "attn_layer_indices", {1, 5}), "attn_layer_indices");
  expect_bamba_refused(bamba_with(golden, "attn_layer_indices", {1, 1}), "attn_layer_indices");
  expect_bamba_refused(bamba_with(golden, "mamba_n_heads", 7), "mamba_n_heads");
  expect_bamba_refused(bamba_with(golden, "num_key_value_heads", 3), "num_key_value_heads");
}

// ---------------------------------------------------------------------------------------------
// Exactness (memcmp): f32 and bf16 make-model checkpoints, attention at both ends.

struct BambaShape {
  std::string name;
  MakeModelOptions options;
  int64_t max_length;
};

std::vector<BambaShape> bamba_shapes() {
  MakeModelOptions a;
  a.config = test::bamba_config("*MM*", 64);
  a.seed = 41;
  MakeModelOptions b;
  b.config = test::bamba_config("M*M*", 48);
  b.dtype = DType::BF16;
  b.seed = 42;
  return {{"bamba_f32", a, 200}, {"bamba_bf16", b, 80}};
}

const Model& bamba_model_for(const BambaShape& shape) {
  static std::map<std::string, std::unique_ptr<Model>> models;
  auto it = models.find(shape.name);
  if (it == models.end())
    it = models.emplace(shape.name, Model::load(test::write_model(shape.options, "bamba"))).first;
  return *it->second;
}

class BambaExactness : public ::testing::TestWithParam<BambaShape> {};

TEST_P(BambaExactness, PrefillEqualsDecodeStepsForEveryLength) {
  test::expect_prefill_equals_steps_for_every_length(bamba_model_for(GetParam()), GetParam().max_length);
}

TEST_P(BambaExactness, ThreadCountsRoundSizesAndInstructionSetsChangeNoBit) {
  const Model& model = bamba_model_for(GetParam());
  test::expect_threads_rounds_and_isas_change_no_bit(
      model, test::random_tokens(150, model.config().vocab_size, 4), {0, 1, 7, 64});
}

TEST_P(BambaExactness, EachSequenceOfABatchEqualsItAlone) {
  const Model& model = bamba_model_for(GetParam());
  const std::vector<size_t> lengths = {1, 5, 17, 70, 3};
  std::vector<std::vector<int32_t>> prompts;
  for (size_t i = 0; i < lengths.size(); ++i)
    prompts.push_back(test::random_tokens(lengths[i], model.config().vocab_size, 30 + i));
  test::expect_batch_equals_each_alone(model, prompts, {OutputKind::LogitsLast, OutputKind::LogitsAll},
                                       {0, 4});
  test::expect_batched_steps_equal_solo(model, ComputeContext{2, best_isa()}, prompts.size(), 8);
}

TEST_P(BambaExactness, PrefillThenDecodeContinuesLikeDecodeAllTheWay) {
  test::expect_prefill_then_decode_equals_decode(bamba_model_for(GetParam()), ComputeContext{2, best_isa()},
                                                 {OutputKind::None, 8});
}

INSTANTIATE_TEST_SUITE_P(Shapes, BambaExactness, ::testing::ValuesIn(bamba_shapes()),
                         [](const auto& info) { return info.param.name; });

// ---------------------------------------------------------------------------------------------
// GGUF: llama.cpp's granitehybrid with RoPE.

std::vector<float> bamba_logits(const Model& model, const std::vector<int32_t>& tokens,
                                ScanForm form = ScanForm::Sequential) {
  SequenceState state = model.new_state();
  return test::prefill(model, ComputeContext{1, best_isa()}, tokens, state,
                       {OutputKind::LogitsAll, 0, form, form == ScanForm::Chunked ? 8 : 0});
}

TEST(BambaGguf, TheGoldenWrittenAsGgufKeepsTransformersLogitsAndItsMetadataIsLlamaCpps) {
  const std::string golden = std::string(MB_TEST_DATA_DIR) + "/goldens/bamba";
  const std::string path = test::make_temp_dir("bamba_gguf_golden") + "/model.gguf";
  write_gguf_checkpoint(path, load_model_config(golden), TensorSet::open_dir(golden),
                        {GgufFileType::F32, "bamba", {}});
  {
    const GgufFile file(path);
    EXPECT_EQ(file.string_value("general.architecture"), "granitehybrid");
    EXPECT_EQ(file.bool_if_present("granitehybrid.rope.scaling.finetuned"), true);
    EXPECT_EQ(file.unsigned_value("granitehybrid.rope.dimension_count"), 8u);
    EXPECT_EQ(file.find("granitehybrid.attention.head_count_kv")->integers,
              (std::vector<int64_t>{0, 2, 0, 0, 2}));
    EXPECT_EQ(file.unsigned_value("granitehybrid.ssm.inner_size"), 128u);
    EXPECT_EQ(file.unsigned_value("granitehybrid.ssm.time_step_rank"), 8u);
    EXPECT_EQ(file.unsigned_value("granitehybrid.feed_forward_length"), 96u);
    EXPECT_EQ(file.find("granitehybrid.embedding_scale"), nullptr);
    EXPECT_NE(file.find_tensor("blk.0.ffn_gate.weight"), nullptr);
    EXPECT_NE(file.find_tensor("blk.0.ffn_up.weight"), nullptr);
    EXPECT_NE(file.find_tensor("blk.1.attn_q.weight"), nullptr);
    EXPECT_NE(file.find_tensor("output.weight"), nullptr);
  }
  const auto folder = Model::load(golden);
  const auto gguf = Model::load(path);
  EXPECT_EQ(gguf->config().family, ModelFamily::Bamba);
  EXPECT_EQ(gguf->config().hybrid.pattern, "M*MM*");
  EXPECT_EQ(gguf->config().hybrid.attention.rotary_dims(), 8);
  std::vector<int64_t> shape;
  const std::vector<float> want = read_npy_f32(golden + "/logits.npy", shape);
  const auto tokens = test::random_tokens(20, 256, 3);
  // The chunked scan starts from A itself, the same f32 from A_log or from the file's A; q and k
  // come back in transformers' row order, so the partial rotation is transformers'.
  EXPECT_TRUE(same_bits(bamba_logits(*gguf, tokens, ScanForm::Chunked),
                        bamba_logits(*folder, tokens, ScanForm::Chunked)));
  const std::vector<float> a = bamba_logits(*gguf, tokens), b = bamba_logits(*folder, tokens);
  EXPECT_LE(test::max_abs_diff(a, b), 1e-5 * test::max_abs(b));
}

struct BambaTypeCase {
  std::string name;
  GgufFileType type;
};

class BambaGgufTypes : public ::testing::TestWithParam<BambaTypeCase> {};

TEST_P(BambaGgufTypes, TheFileHoldsTheFoldersConfigAndWeightsAndIsRewrittenByteForByte) {
  const BambaTypeCase& p = GetParam();
  const std::optional<DType> load_dtype = p.type == GgufFileType::Q8_0   ? std::optional(DType::Q8_0)
                                          : p.type == GgufFileType::Q4_0 ? std::optional(DType::Q4_0)
                                                                         : std::nullopt;
  MakeModelOptions o;
  o.config = test::bamba_config("*MM*", 64);
  o.config.hybrid.mlp.width = 64;
  o.dtype = p.type == GgufFileType::F16    ? DType::F16
            : p.type == GgufFileType::BF16 ? DType::BF16
                                           : DType::F32;
  o.seed = 43;
  const std::string dir = test::write_model(o, "bamba_gguf_" + p.name);
  test::zero_a_log(dir);
  const std::string path = dir + "/model.gguf";
  write_gguf_checkpoint(path, load_model_config(dir), TensorSet::open_dir(dir), {p.type, "test", {}});
  LoadOptions load;
  load.weight_dtype = load_dtype;
  const auto folder = Model::load(dir, load);
  const auto gguf = Model::load(path);
  EXPECT_EQ(gguf->config().family, ModelFamily::Bamba);
  EXPECT_EQ(gguf->config().hybrid.pattern, folder->config().hybrid.pattern);
  EXPECT_EQ(gguf->config().hybrid.attention.rotary_dims(), folder->config().hybrid.attention.rotary_dims());
  const auto tokens = test::random_tokens(11, 131, 5);
  EXPECT_TRUE(same_bits(bamba_logits(*gguf, tokens), bamba_logits(*folder, tokens)));
  const std::string again = dir + "/again.gguf";
  const GgufCheckpoint checkpoint = open_gguf_checkpoint(path);
  write_gguf_checkpoint(again, checkpoint.config, *checkpoint.tensors, {p.type, "test", {}});
  EXPECT_EQ(read_text_file(again), read_text_file(path));
}

INSTANTIATE_TEST_SUITE_P(Files, BambaGgufTypes,
                         ::testing::Values(BambaTypeCase{"f32", GgufFileType::F32},
                                           BambaTypeCase{"f16", GgufFileType::F16},
                                           BambaTypeCase{"bf16", GgufFileType::BF16},
                                           BambaTypeCase{"q8_0", GgufFileType::Q8_0},
                                           BambaTypeCase{"q4_0", GgufFileType::Q4_0}),
                         [](const auto& info) { return info.param.name; });

// The GGUF file at `path` with metadata `key` set to `value` (removed when none), its tensors kept.
std::string bamba_rewritten(const std::string& path, const std::string& out, const std::string& key,
                            const std::optional<GgufValue>& value) {
  const GgufFile file(path);
  GgufWriter writer;
  bool found = false;
  for (const auto& [k, v] : file.metadata()) {
    if (k != key) {
      writer.set(k, v);
    } else if (value) {
      writer.set(k, *value);
    }
    found = found || k == key;
  }
  if (!found && value) writer.set(key, *value);
  for (const GgufTensorInfo& t : file.tensors())
    writer.add_tensor(t.name, t.ne, t.type, std::vector<uint8_t>(t.data, t.data + t.byte_size));
  writer.write(out);
  return out;
}

TEST(BambaGguf, MalformedMetadataIsRefusedNamingTheFileAndKey) {
  MakeModelOptions o;
  o.config = test::bamba_config("*MM*", 64);  // heads of 16 channels, 8 of them rotated
  o.seed = 44;
  const std::string dir = test::write_model(o, "bamba_gguf_bad");
  const std::string good = dir + "/model.gguf";
  write_gguf_checkpoint(good, load_model_config(dir), TensorSet::open_dir(dir), {GgufFileType::F32, "", {}});
  ASSERT_NO_THROW(Model::load(good));
  const auto ints = [](std::vector<int64_t> v) {
    return GgufValue::integer_array(GgufType::Int32, std::move(v));
  };
  const std::vector<std::tuple<std::string, std::optional<GgufValue>, std::string>> cases = {
      {"rope.dimension_count", GgufValue::u32(7), "'granitehybrid.rope.dimension_count' = 7"},
      {"rope.dimension_count", GgufValue::u32(32), "'granitehybrid.rope.dimension_count' = 32"},
      {"attention.head_count_kv", ints({2, 0, 0}), "'granitehybrid.attention.head_count_kv' must list"},
      {"attention.head_count_kv", ints({2, 0, 0, 1}), "'granitehybrid.attention.head_count_kv' holds 1"},
      {"embedding_scale", GgufValue::f32(12.0f), "'granitehybrid.embedding_scale' is set"},
      {"attention.scale", GgufValue::f32(0.0625f), "'granitehybrid.attention.scale' is not head_dim^-0.5"},
      {"expert_count", GgufValue::u32(4), "'granitehybrid.expert_count' is set"},
      {"ssm.inner_size", GgufValue::u32(100), "'granitehybrid.ssm.inner_size' = 100"},
      {"ssm.time_step_rank", std::nullopt, "'granitehybrid.ssm.time_step_rank' must be"},
      {"rope.freq_base", GgufValue::string("x"), "'granitehybrid.rope.freq_base' holds string"},
      {"ssm.group_count", GgufValue::u32(2), "mamba_n_groups"},
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    const auto& [key, value, needle] = cases[i];
    SCOPED_TRACE(key);
    const std::string bad =
        bamba_rewritten(good, dir + "/bad" + std::to_string(i) + ".gguf", "granitehybrid." + key, value);
    try {
      Model::load(bad);
      ADD_FAILURE() << "loaded";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("/bad"), std::string::npos) << "names the file: " << e.what();
    }
  }
}

TEST(BambaGguf, Q4KMFileHoldsTheF32FilesValuesInLlamaQuantizesTypesAndRunsExactly) {
  MakeModelOptions o;
  o.config = test::bamba_config("M*M*", 256, 300);  // rows of 256: whole K-quant blocks
  o.config.hybrid.mlp.width = 256;
  o.seed = 45;
  const std::string dir = test::write_model(o, "bamba_gguf_q4km");
  const ModelConfig config = load_model_config(dir);
  const TensorSet tensors = TensorSet::open_dir(dir);
  write_gguf_checkpoint(dir + "/f32.gguf", config, tensors, {GgufFileType::F32, "", {}});
  write_gguf_checkpoint(dir + "/q4km.gguf", config, tensors, {GgufFileType::Q4_K_M, "", {}});
  const GgufFile f32(dir + "/f32.gguf"), q4km(dir + "/q4km.gguf");
  ASSERT_EQ(f32.tensors().size(), q4km.tensors().size());
  int q4_k = 0, q6_k = 0;
  for (size_t i = 0; i < f32.tensors().size(); ++i) {
    const GgufTensorInfo &a = f32.tensors()[i], &b = q4km.tensors()[i];
    ASSERT_EQ(a.name, b.name);
    const DType type = *gguf_engine_dtype(b.type);
    const int64_t row = a.ne[0], rows = a.element_count() / row;
    const size_t row_bytes = dtype_row_bytes(type, row);
    std::vector<uint8_t> want(static_cast<size_t>(rows) * row_bytes);
    for (int64_t r = 0; r < rows; ++r)
      quantize_row(type, reinterpret_cast<const float*>(a.data) + r * row, row, want.data() + r * row_bytes);
    ASSERT_EQ(want.size(), b.byte_size) << b.name;
    EXPECT_EQ(std::memcmp(want.data(), b.data, b.byte_size), 0) << b.name;
    q4_k += b.type == kGgmlQ4_K;
    q6_k += b.type == kGgmlQ6_K;
  }
  EXPECT_GT(q4_k, 3);
  EXPECT_GT(q6_k, 0);
  const auto model = Model::load(q4km.path());
  test::expect_prefill_equals_steps_for_every_length(*model, 24);
  test::expect_threads_rounds_and_isas_change_no_bit(*model, test::random_tokens(40, 300, 4), {0, 1, 7});
}

}  // namespace
}  // namespace mb
