// SPDX-License-Identifier: MIT
// Q4_K_M files of the hybrids: each tensor in the type llama-quantize's Q4_K_M would give it
// (model/gguf_export.cc) and holding exactly the f32 file's values quantized to that type; and
// the exactness contract (prefill == steps, threads, rounds and instruction sets, batch == solo)
// on a model loaded from such a file, whose matrices are Q4_K and Q6_K.
#include <gtest/gtest.h>

#include <cstring>
#include <map>

#include "common/hybrid_configs.h"
#include "common/model_fixture.h"
#include "common/test_util.h"
#include "io/gguf.h"
#include "model/gguf_checkpoint.h"
#include "model/gguf_tensor_names.h"
#include "ops/quant.h"

namespace mb {
namespace {

// Rows of 256 (whole Q4_K blocks) wherever a matrix's rows have d_model, the MLP width or the
// Mamba width: hidden 256, 4 heads of 64. The type tests take the long patterns, the exactness
// tests (which run many prefills) the short ones.
ModelConfig granite_q4km(const std::string& pattern) {
  ModelConfig c = test::granite_config(pattern, 256, 300);
  c.ssm.expand = 2;
  c.ssm.d_inner = 512;
  c.ssm.headdim = 64;
  c.hybrid.attention = {4, 2, 64, 0.015625, false};
  c.hybrid.mlp.width = 256;
  return c;
}

ModelConfig nemotron_q4km(const std::string& pattern) {
  ModelConfig c = test::nemotron_config(pattern, 256, 300);
  c.ssm.d_inner = 256;
  c.ssm.headdim = 32;
  c.ssm.ngroups = 4;
  c.hybrid.attention = {4, 2, 64, 0.125, false};
  c.hybrid.mlp.width = 512;
  return c;
}

struct Files {
  std::string f32, q4km;
};

const Files& files_for(const std::string& name) {
  static std::map<std::string, Files> files;
  auto it = files.find(name);
  if (it == files.end()) {
    MakeModelOptions o;
    const bool small = name.ends_with("_small");
    o.config = name.starts_with("granite") ? granite_q4km(small ? "*M" : "*MM*M*MM")
                                           : nemotron_q4km(small ? "M-*" : "M-*M-*-M-");
    o.seed = 41;
    const std::string dir = test::write_model(o, "gguf_q4km_" + name);
    const ModelConfig config = load_model_config(dir);
    const TensorSet tensors = TensorSet::open_dir(dir);
    Files f{dir + "/f32.gguf", dir + "/q4km.gguf"};
    write_gguf_checkpoint(f.f32, config, tensors, {GgufFileType::F32, "", {}});
    write_gguf_checkpoint(f.q4km, config, tensors, {GgufFileType::Q4_K_M, "", {}});
    it = files.emplace(name, f).first;
  }
  return it->second;
}

std::map<std::string, uint32_t> types_of(const GgufFile& file) {
  std::map<std::string, uint32_t> types;
  for (const GgufTensorInfo& t : file.tensors()) types[t.name] = t.type;
  return types;
}

// llama.cpp's use_more_bits(i, n).
bool more_bits(int i, int n) {
  return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2;
}

TEST(HybridGgufQ4KM, GraniteTensorTypesAreLlamaQuantizesChoices) {
  const GgufFile file(files_for("granite").q4km);
  EXPECT_EQ(file.unsigned_value("general.file_type"), 15u);
  auto types = types_of(file);
  EXPECT_EQ(types["token_embd.weight"], kGgmlQ6_K);  // tied: the LM head
  EXPECT_EQ(types.count("output.weight"), 0u);
  EXPECT_EQ(types["output_norm.weight"], kGgmlF32);
  const std::string pattern = "*MM*M*MM";
  int attention = 0;
  const int n_attention = 3;
  for (int l = 0; l < 8; ++l) {
    const std::string b = "blk." + std::to_string(l) + ".";
    SCOPED_TRACE(b);
    EXPECT_EQ(types[b + "attn_norm.weight"], kGgmlF32);
    EXPECT_EQ(types[b + "ffn_norm.weight"], kGgmlF32);
    EXPECT_EQ(types[b + "ffn_gate.weight"], kGgmlQ4_K);
    EXPECT_EQ(types[b + "ffn_up.weight"], kGgmlQ4_K);
    // Every Granite layer has an MLP, so ffn_down counts layers: 0 and 7, then 3 and 6.
    EXPECT_EQ(types[b + "ffn_down.weight"], more_bits(l, 8) ? kGgmlQ6_K : kGgmlQ4_K);
    if (pattern[l] == '*') {
      EXPECT_EQ(types[b + "attn_q.weight"], kGgmlQ4_K);
      EXPECT_EQ(types[b + "attn_k.weight"], kGgmlQ4_K);
      EXPECT_EQ(types[b + "attn_output.weight"], kGgmlQ4_K);
      // attn_v counts the attention layers: the third of three.
      EXPECT_EQ(types[b + "attn_v.weight"], more_bits(attention, n_attention) ? kGgmlQ6_K : kGgmlQ4_K);
      EXPECT_EQ(more_bits(attention, n_attention), attention == 2);
      ++attention;
    } else {
      EXPECT_EQ(types[b + "ssm_in.weight"], kGgmlQ4_K);
      EXPECT_EQ(types[b + "ssm_out.weight"], kGgmlQ4_K);
      for (const char* f32 :
           {"ssm_conv1d.weight", "ssm_conv1d.bias", "ssm_dt.bias", "ssm_a", "ssm_d", "ssm_norm.weight"})
        EXPECT_EQ(types[b + f32], kGgmlF32) << f32;
    }
  }
}

TEST(HybridGgufQ4KM, NemotronCountsItsMlpLayersForFfnDown) {
  const GgufFile file(files_for("nemotron").q4km);
  auto types = types_of(file);
  EXPECT_EQ(types["output.weight"], kGgmlQ6_K);
  EXPECT_EQ(types["token_embd.weight"], kGgmlQ4_K);  // untied: the default type
  // MLP layers 1, 4, 6, 8 are the 0th..3rd ffn_down tensors, counted over block_count = 9:
  // use_more_bits(i, 9) holds for i = 0 and 3. Layer 6 stays Q4_K although use_more_bits(6, 9)
  // would hold for its layer number.
  const std::vector<std::pair<int, uint32_t>> downs = {
      {1, kGgmlQ6_K}, {4, kGgmlQ4_K}, {6, kGgmlQ4_K}, {8, kGgmlQ6_K}};
  for (const auto& [layer, type] : downs)
    EXPECT_EQ(types["blk." + std::to_string(layer) + ".ffn_down.weight"], type) << layer;
  EXPECT_TRUE(more_bits(6, 9));
  // Two attention layers: use_more_bits(i, 2) holds for i = 1 (>= 7 * 2 / 8).
  EXPECT_EQ(types["blk.2.attn_v.weight"], kGgmlQ4_K);
  EXPECT_EQ(types["blk.5.attn_v.weight"], kGgmlQ6_K);
}

class HybridGgufQ4KMValues : public ::testing::TestWithParam<std::string> {};

TEST_P(HybridGgufQ4KMValues, EveryTensorIsTheF32FilesQuantizedToItsType) {
  const GgufFile f32(files_for(GetParam()).f32), q4km(files_for(GetParam()).q4km);
  ASSERT_EQ(f32.tensors().size(), q4km.tensors().size());
  int quantized = 0;
  for (size_t i = 0; i < f32.tensors().size(); ++i) {
    const GgufTensorInfo &a = f32.tensors()[i], &b = q4km.tensors()[i];
    ASSERT_EQ(a.name, b.name);
    ASSERT_EQ(a.ne, b.ne);
    const DType type = *gguf_engine_dtype(b.type);
    const int64_t row = a.ne[0], rows = a.element_count() / row;
    const size_t row_bytes = dtype_row_bytes(type, row);
    std::vector<uint8_t> want(static_cast<size_t>(rows) * row_bytes);
    for (int64_t r = 0; r < rows; ++r)
      quantize_row(type, reinterpret_cast<const float*>(a.data) + r * row, row, want.data() + r * row_bytes);
    ASSERT_EQ(want.size(), b.byte_size) << b.name;
    EXPECT_EQ(std::memcmp(want.data(), b.data, b.byte_size), 0) << b.name;
    quantized += dtype_is_quantized(type);
  }
  EXPECT_GT(quantized, 10);
}

TEST_P(HybridGgufQ4KMValues, PrefillEqualsStepsThreadsAndBatchesOnTheQ4KMFile) {
  const GgufFile file(files_for(GetParam() + "_small").q4km);
  int q4_k = 0, q6_k = 0;
  for (const GgufTensorInfo& t : file.tensors()) {
    q4_k += t.type == kGgmlQ4_K;
    q6_k += t.type == kGgmlQ6_K;
  }
  EXPECT_GT(q4_k, 3);
  EXPECT_GT(q6_k, 0);
  const auto model = Model::load(file.path());
  test::expect_prefill_equals_steps_for_every_length(*model, 33);
  test::expect_threads_rounds_and_isas_change_no_bit(*model, test::random_tokens(50, 300, 4), {0, 1, 7, 32});
  std::vector<std::vector<int32_t>> prompts;
  for (size_t length : {1, 9, 33, 4}) prompts.push_back(test::random_tokens(length, 300, 50 + length));
  test::expect_batch_equals_each_alone(*model, prompts, {OutputKind::LogitsAll}, {0, 5});
}

INSTANTIATE_TEST_SUITE_P(Archs, HybridGgufQ4KMValues, ::testing::Values("granite", "nemotron"));

}  // namespace
}  // namespace mb
