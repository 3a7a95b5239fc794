// SPDX-License-Identifier: MIT
// GGUF files of Jamba (llama.cpp's `jamba` architecture, written as JambaModel's converter writes
// them): the golden folder as an f32 file gives llama.cpp's logits; the names, metadata and
// layouts are the converter's (head_count_kv per layer, ssm_a = -exp(A_log), stacked experts, no
// q/k permutation); every file type holds the folder's config and weights; malformed metadata is
// refused naming the key.
#include <gtest/gtest.h>

#include <cstring>
#include <nlohmann/json.hpp>

#include "common/model_fixture.h"
#include "common/test_util.h"
#include "core/error.h"
#include "io/file_io.h"
#include "io/gguf.h"
#include "io/npy.h"
#include "model/families/jamba.h"
#include "model/family.h"
#include "model/gguf_checkpoint.h"
#include "model/gguf_tensor_names.h"
#include "ops/quant.h"

namespace mb {
namespace {

using nlohmann::json;

std::string jamba_gguf_of(const std::string& dir, GgufFileType type, const std::string& name = "model") {
  const std::string path = dir + "/" + name + ".gguf";
  write_gguf_checkpoint(path, load_model_config(dir), TensorSet::open_dir(dir), {type, "test", {}});
  return path;
}

std::vector<float> jamba_gguf_logits(const Model& model, const std::vector<int32_t>& tokens) {
  SequenceState state = model.new_state();
  return test::prefill(model, ComputeContext{1, best_isa()}, tokens, state, {OutputKind::LogitsAll, 0});
}

std::vector<int32_t> jamba_golden_tokens(const std::string& dir) {
  std::vector<int32_t> tokens;
  for (std::string text = read_text_file(dir + "/tokens.txt"); !text.empty();) {
    const size_t end = text.find_first_of(" ,\n");
    if (end != 0) tokens.push_back(std::stoi(text.substr(0, end)));
    text = end == std::string::npos ? "" : text.substr(end + 1);
  }
  return tokens;
}

void expect_same_jamba_config(const ModelConfig& got, const ModelConfig& want) {
  EXPECT_EQ(got.family, ModelFamily::Jamba);
  EXPECT_EQ(got.d_model, want.d_model);
  EXPECT_EQ(got.n_layer, want.n_layer);
  EXPECT_EQ(got.norm_eps, want.norm_eps);
  EXPECT_EQ(got.tie_embeddings, want.tie_embeddings);
  EXPECT_EQ(got.hybrid.pattern, want.hybrid.pattern);
  for (int64_t l = 0; l < want.n_layer; ++l) {
    EXPECT_EQ(got.jamba.attention_at(l), want.jamba.attention_at(l)) << l;
    EXPECT_EQ(got.jamba.experts_at(l, got.hybrid.moe.n_experts),
              want.jamba.experts_at(l, want.hybrid.moe.n_experts))
        << l;
  }
  EXPECT_EQ(got.hybrid.attention.n_heads, want.hybrid.attention.n_heads);
  EXPECT_EQ(got.hybrid.attention.n_kv_heads, want.hybrid.attention.n_kv_heads);
  EXPECT_EQ(got.hybrid.mlp.width, want.hybrid.mlp.width);
  EXPECT_EQ(got.hybrid.moe.n_experts, want.hybrid.moe.n_experts);
  EXPECT_EQ(got.hybrid.moe.top_k, want.hybrid.moe.top_k);
  EXPECT_EQ(got.ssm.d_inner, want.ssm.d_inner);
  EXPECT_EQ(got.ssm.dt_rank, want.ssm.dt_rank);
  EXPECT_EQ(got.ssm.d_state, want.ssm.d_state);
  EXPECT_EQ(got.ssm.d_conv, want.ssm.d_conv);
  EXPECT_EQ(got.ssm.use_conv_bias, want.ssm.use_conv_bias);
  EXPECT_EQ(got.ssm.mixer_norm_weights, want.ssm.mixer_norm_weights);
}

TEST(JambaGguf, OurF32FileOfTheGoldenGivesLlamaCppsLogits) {
  const std::string golden = std::string(MB_TEST_DATA_DIR) + "/goldens/jamba-dense";
  const std::string dir = test::make_temp_dir("jamba_gguf_golden");
  const std::string path = dir + "/model.gguf";
  write_gguf_checkpoint(path, load_model_config(golden), TensorSet::open_dir(golden),
                        {GgufFileType::F32, "jamba-dense", {}});
  const auto folder = Model::load(golden);
  const auto gguf = Model::load(path);
  expect_same_jamba_config(gguf->config(), folder->config());
  std::vector<int64_t> shape;
  const std::vector<float> want = read_npy_f32(golden + "/logits.npy", shape);
  const std::vector<float> got = jamba_gguf_logits(*gguf, jamba_golden_tokens(golden));
  ASSERT_EQ(got.size(), want.size());
  EXPECT_LE(test::max_abs_diff(got, want), 1e-5 * test::max_abs(want));
  for (int64_t t = 0; t < shape[0]; ++t) {
    const auto row = [&](const std::vector<float>& v) {
      return std::max_element(v.begin() + t * shape[1], v.begin() + (t + 1) * shape[1]) - v.begin();
    };
    EXPECT_EQ(row(got), row(want)) << "position " << t;
  }
  std::printf("[ golden ] jamba-dense from our f32 GGUF: max|diff|/max|golden| = %.3g\n",
              test::max_abs_diff(got, want) / test::max_abs(want));

  // The converter's metadata and layouts.
  const GgufFile file(path);
  EXPECT_EQ(file.string_value("general.architecture"), "jamba");
  EXPECT_EQ(file.find("jamba.attention.head_count_kv")->integers, (std::vector<int64_t>{0, 2, 0, 0, 0, 2}));
  EXPECT_EQ(file.unsigned_value("jamba.ssm.inner_size"), 128u);
  EXPECT_EQ(file.unsigned_value("jamba.ssm.time_step_rank"), 4u);
  EXPECT_EQ(file.unsigned_value("jamba.feed_forward_length"), 96u);
  EXPECT_EQ(file.unsigned_value("jamba.expert_count"), 1u);
  const TensorSet tensors = TensorSet::open_dir(golden);
  // No RoPE, so no permutation of q's rows.
  const StoredTensor& q = *tensors.find("model.layers.1.self_attn.q_proj.weight");
  ASSERT_NE(file.find_tensor("blk.1.attn_q.weight"), nullptr);
  EXPECT_EQ(std::memcmp(file.find_tensor("blk.1.attn_q.weight")->data, q.data, q.byte_size), 0);
  for (const char* name : {"blk.0.ssm_dt_norm.weight", "blk.0.ssm_b_norm.weight", "blk.0.ssm_c_norm.weight",
                           "blk.0.ssm_a", "blk.0.ssm_d", "blk.0.ssm_dt.bias", "blk.0.ssm_conv1d.bias",
                           "blk.0.ffn_gate.weight", "blk.0.ffn_norm.weight", "output.weight"})
    EXPECT_NE(file.find_tensor(name), nullptr) << name;
  EXPECT_EQ(file.find_tensor("blk.1.ssm_in.weight"), nullptr);
}

// Experts on odd layers (layer 1 also attends), sizes whole blocks of 32 for Q8_0 and Q4_0.
ModelConfig jamba_moe_for_gguf() {
  json hf = jamba_family().example(64, 4, 131);
  hf.update({{"num_experts", 4}, {"num_experts_per_tok", 2}, {"intermediate_size", 64}});
  return parse_model_config(hf, "jamba moe");
}

class JambaGgufTypes : public ::testing::TestWithParam<GgufFileType> {};

TEST_P(JambaGgufTypes, TheFileHoldsTheFoldersConfigAndWeights) {
  const GgufFileType type = GetParam();
  const std::optional<DType> load_dtype = type == GgufFileType::Q8_0   ? std::optional(DType::Q8_0)
                                          : type == GgufFileType::Q4_0 ? std::optional(DType::Q4_0)
                                                                       : std::nullopt;
  MakeModelOptions o;
  o.config = jamba_moe_for_gguf();
  o.dtype = type == GgufFileType::F16 ? DType::F16 : type == GgufFileType::BF16 ? DType::BF16 : DType::F32;
  o.seed = 61;
  const std::string dir = test::write_model(o, "jamba_gguf_" + std::to_string(static_cast<int>(type)));
  test::zero_a_log(dir);
  const std::string path = jamba_gguf_of(dir, type);
  const GgufFile file(path);
  EXPECT_EQ(file.find("jamba.attention.head_count_kv")->integers, (std::vector<int64_t>{0, 2, 0, 0}));
  for (const char* name : {"blk.1.ffn_gate_inp.weight", "blk.1.ffn_gate_exps.weight",
                           "blk.1.ffn_up_exps.weight", "blk.3.ffn_down_exps.weight", "blk.0.ffn_up.weight"})
    EXPECT_NE(file.find_tensor(name), nullptr) << name;
  LoadOptions load;
  load.weight_dtype = load_dtype;
  const auto folder = Model::load(dir, load);
  const auto gguf = Model::load(path);
  expect_same_jamba_config(gguf->config(), folder->config());
  const auto tokens = test::random_tokens(11, 131, 5);
  EXPECT_TRUE(test::same_bits(jamba_gguf_logits(*gguf, tokens), jamba_gguf_logits(*folder, tokens)));
  // Read back and written again: the same bytes.
  const std::string again = dir + "/again.gguf";
  const GgufCheckpoint checkpoint = open_gguf_checkpoint(path);
  write_gguf_checkpoint(again, checkpoint.config, *checkpoint.tensors, {type, "test", {}});
  const GgufFile a(path), b(again);
  ASSERT_EQ(a.tensors().size(), b.tensors().size());
  for (size_t i = 0; i < a.tensors().size(); ++i) {
    EXPECT_EQ(a.tensors()[i].name, b.tensors()[i].name);
    ASSERT_EQ(a.tensors()[i].byte_size, b.tensors()[i].byte_size);
    EXPECT_EQ(std::memcmp(a.tensors()[i].data, b.tensors()[i].data, a.tensors()[i].byte_size), 0)
        << a.tensors()[i].name;
  }
}

std::string jamba_type_name(const ::testing::TestParamInfo<GgufFileType>& info) {
  static const char* const kNames[] = {"f32", "f16", "bf16", "q8_0", "q4_0", "q4_k_m"};
  return kNames[static_cast<int>(info.param)];
}

INSTANTIATE_TEST_SUITE_P(Files, JambaGgufTypes,
                         ::testing::Values(GgufFileType::F32, GgufFileType::F16, GgufFileType::BF16,
                                           GgufFileType::Q8_0, GgufFileType::Q4_0),
                         jamba_type_name);

// Q4_K_M (llama-quantize's mix of Q4_K and Q6_K): every tensor holds exactly the f32 file's
// values quantized to the type chosen for it, and the model from it keeps prefill == decode.
TEST(JambaGguf, AQ4KMFileHoldsTheF32FilesValuesQuantizedAndStaysExact) {
  json hf = jamba_family().example(256, 2, 300);
  hf.update({{"num_experts", 4}, {"num_experts_per_tok", 2}, {"intermediate_size", 256}});
  MakeModelOptions o;
  o.config = parse_model_config(hf, "jamba q4_k_m");
  o.seed = 62;
  const std::string dir = test::write_model(o, "jamba_gguf_q4km");
  const GgufFile f32(jamba_gguf_of(dir, GgufFileType::F32, "f32"));
  const std::string q4km_path = jamba_gguf_of(dir, GgufFileType::Q4_K_M, "q4km");
  const GgufFile q4km(q4km_path);
  ASSERT_EQ(q4km.tensors().size(), f32.tensors().size());
  int quantized = 0;
  for (const GgufTensorInfo& t : q4km.tensors()) {
    const GgufTensorInfo* source = f32.find_tensor(t.name);
    ASSERT_NE(source, nullptr) << t.name;
    const DType dtype = *gguf_engine_dtype(t.type);
    if (!dtype_is_quantized(dtype)) continue;
    ++quantized;
    const int64_t row = t.ne[0], rows = t.element_count() / row;
    const size_t row_bytes = dtype_row_bytes(dtype, row);
    std::vector<uint8_t> want(static_cast<size_t>(rows) * row_bytes);
    const auto* values = reinterpret_cast<const float*>(source->data);
    for (int64_t r = 0; r < rows; ++r)
      quantize_row(dtype, values + r * row, row, want.data() + r * row_bytes);
    ASSERT_EQ(t.byte_size, want.size()) << t.name;
    EXPECT_EQ(std::memcmp(t.data, want.data(), want.size()), 0) << t.name;
  }
  EXPECT_GE(quantized, 10);
  test::expect_prefill_equals_steps_for_every_length(*Model::load(q4km_path), 24);
}

// The f32 file of a MoE Jamba with one metadata key replaced (or removed, for a null value).
std::string jamba_with_metadata(const std::string& tag, const std::string& key,
                                std::optional<GgufValue> value) {
  MakeModelOptions o;
  o.config = jamba_moe_for_gguf();
  const std::string dir = test::write_model(o, "jamba_gguf_bad_" + tag);
  const GgufFile file(jamba_gguf_of(dir, GgufFileType::F32));
  GgufWriter writer;
  for (const auto& [k, v] : file.metadata())
    if (k != key) writer.set(k, v);
  if (value) writer.set(key, *value);
  for (const GgufTensorInfo& t : file.tensors())
    writer.add_tensor(t.name, t.ne, t.type, std::vector<uint8_t>(t.data, t.data + t.byte_size));
  const std::string out = dir + "/bad.gguf";
  writer.write(out);
  return out;
}

TEST(JambaGguf, MalformedMetadataIsRefusedNamingTheKey) {
  const std::vector<std::tuple<std::string, std::optional<GgufValue>, std::string>> cases = {
      {"jamba.attention.head_count_kv", GgufValue::integer_array(GgufType::Int32, {0, 2, 0}),
       "head_count_kv"},
      {"jamba.attention.head_count_kv", GgufValue::integer_array(GgufType::Int32, {2, 2, 0, 2}),
       "head_count_kv"},
      {"jamba.attention.head_count_kv", std::nullopt, "head_count_kv"},
      {"jamba.ssm.inner_size", GgufValue::u32(100), "ssm.inner_size"},
      // Read as the config key it stands for, and named so (with the file).
      {"jamba.expert_used_count", GgufValue::u32(5), "num_experts_per_tok"},
      {"jamba.block_count", GgufValue::u32(0), "block_count"},
      {"jamba.ssm.time_step_rank", GgufValue::string("auto"), "time_step_rank"},
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    const auto& [key, value, named] = cases[i];
    const std::string path = jamba_with_metadata(std::to_string(i), key, value);
    const std::string message = test::error_of([&] { Model::load(path); });
    EXPECT_NE(message.find(named), std::string::npos) << key << ": " << message;
  }
}

}  // namespace
}  // namespace mb
