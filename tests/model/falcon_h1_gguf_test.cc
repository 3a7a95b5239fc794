// SPDX-License-Identifier: MIT
// Falcon-H1 as GGUF (llama.cpp's "falcon-h1"): our files keep the checkpoint's weights and carry
// the muP multipliers as falcon-h1.* keys, so the golden folder written as an f32 file gives
// llama.cpp's logits and every file type holds the folder's weights (the logits bit for bit);
// llama.cpp's own files, whose converter folds the multipliers into the weights and writes no
// multiplier keys, read with multipliers 1 and give the same logits; malformed metadata is
// refused naming the key.
#include <gtest/gtest.h>

#include <cstring>

#include "common/model_fixture.h"
#include "common/test_util.h"
#include "core/error.h"
#include "io/gguf.h"
#include "io/npy.h"
#include "model/families/falcon_h1.h"
#include "model/gguf_checkpoint.h"
#include "model/gguf_tensor_names.h"
#include "ops/quant.h"

namespace mb {
namespace {

const std::string kFalconGolden = std::string(MB_TEST_DATA_DIR) + "/goldens/falcon-h1";

std::vector<float> falcon_gguf_logits(const Model& model, const std::vector<int32_t>& tokens,
                                      ScanForm form = ScanForm::Sequential) {
  SequenceState state = model.new_state();
  return test::prefill(model, ComputeContext{1, best_isa()}, tokens, state,
                       {OutputKind::LogitsAll, 0, form, form == ScanForm::Chunked ? 8 : 0});
}

std::vector<int32_t> falcon_golden_tokens() {
  std::vector<int32_t> tokens;
  for (std::string text = read_text_file(kFalconGolden + "/tokens.txt"); !text.empty();) {
    const size_t end = text.find_first_of(" ,\n");
    if (end != 0) tokens.push_back(std::stoi(text.substr(0, end)));
    text = end == std::string::npos ? "" : text.substr(end + 1);
  }
  return tokens;
}

void expect_falcon_golden(const std::vector<float>& got, const std::string& what) {
  std::vector<int64_t> shape;
  const std::vector<float> want = read_npy_f32(kFalconGolden + "/logits.npy", shape);
  ASSERT_EQ(got.size(), want.size());
  EXPECT_LE(test::max_abs_diff(got, want), 1e-5 * test::max_abs(want)) << what;
  for (int64_t t = 0; t < shape[0]; ++t) {
    const auto row = [&](const std::vector<float>& v) {
      return std::max_element(v.begin() + t * shape[1], v.begin() + (t + 1) * shape[1]) - v.begin();
    };
    EXPECT_EQ(row(got), row(want)) << what << " position " << t;
  }
  std::printf("[ golden ] falcon-h1 %s: max|diff|/max|golden| = %.3g\n", what.c_str(),
              test::max_abs_diff(got, want) / test::max_abs(want));
}

// The file at `from` rewritten: metadata through `meta` (return false to drop a key), f32 tensors
// through `scale` (a factor per row of each tensor).
void rewrite_falcon_gguf(const std::string& from, const std::string& to,
                         const std::function<bool(const std::string&, GgufValue&)>& meta,
                         const std::function<double(const std::string&, int64_t row)>& scale) {
  const GgufFile file(from);
  GgufWriter writer;
  for (auto [key, value] : file.metadata())
    if (meta(key, value)) writer.set(key, value);
  for (const GgufTensorInfo& t : file.tensors()) {
    ASSERT_EQ(t.type, kGgmlF32) << t.name;
    std::vector<float> values(static_cast<size_t>(t.element_count()));
    std::memcpy(values.data(), t.data, t.byte_size);
    const int64_t cols = t.ne[0];
    for (int64_t r = 0; r < t.element_count() / cols; ++r)
      for (int64_t i = 0; i < cols; ++i)
        values[r * cols + i] = static_cast<float>(values[r * cols + i] * scale(t.name, r));
    std::vector<uint8_t> bytes(t.byte_size);
    std::memcpy(bytes.data(), values.data(), t.byte_size);
    writer.add_tensor(t.name, t.ne, t.type, std::move(bytes));
  }
  writer.write(to);
}

TEST(FalconH1Gguf, OurF32FileGivesLlamaCppsLogitsAndTheFoldersBits) {
  const std::string dir = test::make_temp_dir("falcon_h1_gguf_golden");
  const std::string path = dir + "/model.gguf";
  write_gguf_checkpoint(path, load_model_config(kFalconGolden), TensorSet::open_dir(kFalconGolden),
                        {GgufFileType::F32, "falcon-h1", {}});
  const GgufFile file(path);
  EXPECT_EQ(file.string_value("general.architecture"), "falcon-h1");
  EXPECT_EQ(file.unsigned_value("falcon-h1.ssm.time_step_rank"), 6u);
  EXPECT_EQ(file.unsigned_value("falcon-h1.ssm.inner_size"), 96u);
  EXPECT_EQ(file.unsigned_value("falcon-h1.attention.key_length"), 24u);
  EXPECT_EQ(file.unsigned_value("falcon-h1.attention.value_length"), 24u);
  // llama.cpp's names: the shared norm is attn_norm, the pre-FF norm ffn_norm without ".weight",
  // the gated norm grouped [G, d_ssm / G], A = -exp(A_log) as [H, 1].
  EXPECT_NE(file.find_tensor("blk.0.attn_norm.weight"), nullptr);
  ASSERT_NE(file.find_tensor("blk.3.ffn_norm"), nullptr);
  EXPECT_EQ(file.find_tensor("blk.0.ssm_norm.weight")->ne, (std::vector<int64_t>{48, 2}));
  EXPECT_EQ(file.find_tensor("blk.0.ssm_a")->ne, (std::vector<int64_t>{1, 6}));
  EXPECT_NE(file.find_tensor("output.weight"), nullptr);

  const auto folder = Model::load(kFalconGolden);
  const auto gguf = Model::load(path);
  EXPECT_EQ(gguf->config().family, ModelFamily::FalconH1);
  EXPECT_EQ(gguf->config().ssm.headdim, 16);
  EXPECT_TRUE(gguf->config().falcon.mamba_rms_norm);
  EXPECT_FALSE(gguf->config().falcon.norm_before_gate);
  EXPECT_EQ(static_cast<float>(gguf->config().falcon.ssm_multipliers[0]),
            static_cast<float>(folder->config().falcon.ssm_multipliers[0]));
  const auto tokens = falcon_golden_tokens();
  expect_falcon_golden(falcon_gguf_logits(*gguf, tokens), "from our f32 GGUF");
  // The chunked scan starts from A itself, the same f32 from A_log or the file: the same bits.
  EXPECT_TRUE(test::same_bits(falcon_gguf_logits(*gguf, tokens, ScanForm::Chunked),
                              falcon_gguf_logits(*folder, tokens, ScanForm::Chunked)));
}

// llama.cpp's converter (conversion/falcon_h1.py) multiplies the weights by the multipliers and
// writes no multiplier keys; its file must give its logits here too.
TEST(FalconH1Gguf, LlamaCppsFoldedFileReadsWithMultipliersOne) {
  const std::string dir = test::make_temp_dir("falcon_h1_gguf_folded");
  const ModelConfig c = load_model_config(kFalconGolden);
  write_gguf_checkpoint(dir + "/ours.gguf", c, TensorSet::open_dir(kFalconGolden),
                        {GgufFileType::F32, "", {}});
  const FalconH1Config& f = c.falcon;
  const int64_t di = c.ssm.d_inner, gn = c.ssm.ngroups * c.ssm.d_state;
  const auto fold = [&](const std::string& name, int64_t row) -> double {
    const auto is = [&](const char* part) { return name.find(part) != std::string::npos; };
    if (is("ssm_in.weight")) {
      const int64_t bounds[] = {di, 2 * di, 2 * di + gn, 2 * di + 2 * gn};
      int segment = 4;
      for (int s = 3; s >= 0; --s)
        if (row < bounds[s]) segment = s;
      return f.ssm_in * f.ssm_multipliers[segment];
    }
    if (is("ffn_gate.weight")) return f.mlp_multipliers[0];
    if (is("ffn_down.weight")) return f.mlp_multipliers[1];
    if (is("attn_k.weight")) return f.key * f.attention_in;
    if (is("attn_q.weight") || is("attn_v.weight")) return f.attention_in;
    if (is("attn_output.weight")) return f.attention_out;
    if (is("ssm_out.weight")) return f.ssm_out;
    if (name == "output.weight") return f.lm_head;
    if (name == "token_embd.weight") return c.hybrid.embedding_multiplier;
    return 1.0;
  };
  const auto drop_multipliers = [](const std::string& key, GgufValue&) {
    return key.find("multiplier") == std::string::npos && key != "falcon-h1.ssm.norm_before_gate";
  };
  rewrite_falcon_gguf(dir + "/ours.gguf", dir + "/folded.gguf", drop_multipliers, fold);
  const auto model = Model::load(dir + "/folded.gguf");
  EXPECT_DOUBLE_EQ(model->config().falcon.key, 1.0);
  EXPECT_DOUBLE_EQ(model->config().hybrid.embedding_multiplier, 1.0);
  EXPECT_EQ(model->config().falcon.ssm_multipliers, std::vector<double>(5, 1.0));
  expect_falcon_golden(falcon_gguf_logits(*model, falcon_golden_tokens()), "from a folded (llama.cpp) file");
}

struct FalconTypeCase {
  std::string name;
  GgufFileType type;
  DType folder_dtype;
  std::optional<DType> load_dtype;
  bool tied = false;
};

class FalconH1GgufTypes : public ::testing::TestWithParam<FalconTypeCase> {};

TEST_P(FalconH1GgufTypes, TheFileHoldsTheFoldersConfigAndWeights) {
  const FalconTypeCase& p = GetParam();
  MakeModelOptions o;
  // Sizes that are multiples of 32 for the quantized types; biases everywhere they can be.
  nlohmann::json hf = falcon_h1_family().example(64, 2, 131);
  hf["intermediate_size"] = 64;
  hf["head_dim"] = 16;
  hf["attention_bias"] = true;
  hf["mlp_bias"] = true;
  hf["projectors_bias"] = true;
  hf["mamba_norm_before_gate"] = true;
  // Tied: the file's token_embd is the folder's embedding unscaled, both multipliers kept as keys.
  hf["tie_word_embeddings"] = p.tied;
  o.config = parse_model_config(hf, "falcon-h1 gguf test");
  o.dtype = p.folder_dtype;
  o.seed = 33;
  const std::string dir = test::write_model(o, "falcon_h1_gguf_" + p.name);
  test::zero_a_log(dir);
  const std::string path = dir + "/model.gguf";
  write_gguf_checkpoint(path, load_model_config(dir), TensorSet::open_dir(dir), {p.type, "test", {}});
  LoadOptions load;
  load.weight_dtype = p.load_dtype;
  const auto folder = Model::load(dir, load);
  const auto gguf = Model::load(path);
  EXPECT_TRUE(gguf->config().falcon.norm_before_gate);
  EXPECT_TRUE(gguf->config().falcon.projectors_bias);
  EXPECT_TRUE(gguf->config().hybrid.attention.bias);
  EXPECT_EQ(gguf->config().tie_embeddings, p.tied);
  if (p.load_dtype) EXPECT_EQ(gguf->matrix_dtype(), *p.load_dtype);
  const auto tokens = test::random_tokens(11, 131, 5);
  EXPECT_TRUE(test::same_bits(falcon_gguf_logits(*gguf, tokens), falcon_gguf_logits(*folder, tokens)));
}

INSTANTIATE_TEST_SUITE_P(
    Files, FalconH1GgufTypes,
    ::testing::Values(FalconTypeCase{"f32", GgufFileType::F32, DType::F32, std::nullopt},
                      FalconTypeCase{"f16", GgufFileType::F16, DType::F16, std::nullopt},
                      FalconTypeCase{"bf16", GgufFileType::BF16, DType::BF16, std::nullopt},
                      FalconTypeCase{"q8_0", GgufFileType::Q8_0, DType::F32, DType::Q8_0},
                      FalconTypeCase{"q4_0", GgufFileType::Q4_0, DType::F32, DType::Q4_0},
                      FalconTypeCase{"f32_tied", GgufFileType::F32, DType::F32, std::nullopt, true},
                      FalconTypeCase{"q8_0_tied", GgufFileType::Q8_0, DType::F32, DType::Q8_0, true}),
    [](const auto& info) { return info.param.name; });

// Q4_K_M: every matrix whose rows are whole Q4_K blocks (256 wide) is the f32 file's values
// quantized to the type llama-quantize's recipe gives it, and the exactness contract holds on it.
TEST(FalconH1Gguf, Q4KMFileHoldsTheF32FilesValuesQuantizedAndStaysExact) {
  nlohmann::json hf = falcon_h1_family().example(256, 2, 300);
  hf["intermediate_size"] = 256;
  hf["head_dim"] = 64;
  hf["mamba_d_ssm"] = 256;
  hf["mamba_n_heads"] = 4;
  hf["mamba_d_head"] = 64;
  MakeModelOptions o;
  o.config = parse_model_config(hf, "falcon-h1 q4_k_m test");
  o.seed = 34;
  const std::string dir = test::write_model(o, "falcon_h1_q4km");
  write_gguf_checkpoint(dir + "/f32.gguf", load_model_config(dir), TensorSet::open_dir(dir),
                        {GgufFileType::F32, "", {}});
  write_gguf_checkpoint(dir + "/q4km.gguf", load_model_config(dir), TensorSet::open_dir(dir),
                        {GgufFileType::Q4_K_M, "", {}});
  const GgufFile f32(dir + "/f32.gguf"), q4km(dir + "/q4km.gguf");
  ASSERT_EQ(f32.tensors().size(), q4km.tensors().size());
  int q4_k = 0, q6_k = 0;
  for (size_t i = 0; i < f32.tensors().size(); ++i) {
    const GgufTensorInfo &a = f32.tensors()[i], &b = q4km.tensors()[i];
    ASSERT_EQ(a.name, b.name);
    ASSERT_EQ(a.ne, b.ne);
    q4_k += b.type == kGgmlQ4_K;
    q6_k += b.type == kGgmlQ6_K;
    const DType type = *gguf_engine_dtype(b.type);
    const int64_t row = a.ne[0], rows = a.element_count() / row;
    const size_t row_bytes = dtype_row_bytes(type, row);
    std::vector<uint8_t> want(static_cast<size_t>(rows) * row_bytes);
    for (int64_t r = 0; r < rows; ++r)
      quantize_row(type, reinterpret_cast<const float*>(a.data) + r * row, row, want.data() + r * row_bytes);
    ASSERT_EQ(want.size(), b.byte_size) << b.name;
    EXPECT_EQ(std::memcmp(want.data(), b.data, b.byte_size), 0) << b.name;
  }
  EXPECT_GT(q4_k, 8);
  EXPECT_GT(q6_k, 0);
  const auto model = Model::load(dir + "/q4km.gguf");
  test::expect_prefill_equals_steps_for_every_length(*model, 20);
  test::expect_threads_rounds_and_isas_change_no_bit(*model, test::random_tokens(30, 300, 4), {0, 1, 7});
}

TEST(FalconH1Gguf, MalformedMetadataIsRefusedNamingTheKey) {
  const std::string dir = test::make_temp_dir("falcon_h1_gguf_bad");
  write_gguf_checkpoint(dir + "/ours.gguf", load_model_config(kFalconGolden),
                        TensorSet::open_dir(kFalconGolden), {GgufFileType::F32, "", {}});
  const auto keep = [](const std::string&, int64_t) { return 1.0; };
  // The key, and what the message names: the file's key, or the config key it stands for where
  // the check is the config's own.
  struct BadKey {
    std::string key;
    GgufValue value;
    std::string named;
  };
  const std::vector<BadKey> cases = {
      {"falcon-h1.ssm.time_step_rank", GgufValue::u32(5), "ssm.time_step_rank"},
      {"falcon-h1.attention.value_length", GgufValue::u32(16), "attention.value_length"},
      {"falcon-h1.ssm_multipliers", GgufValue::string("0.5"), "ssm_multipliers"},
      {"falcon-h1.key_multiplier", GgufValue::string("big"), "key_multiplier"},
      {"falcon-h1.ssm.group_count", GgufValue::u32(4), "mamba_n_groups"},
  };
  for (const BadKey& bad : cases) {
    const std::string path = dir + "/bad.gguf";
    rewrite_falcon_gguf(
        dir + "/ours.gguf", path,
        [&](const std::string& key, GgufValue& value) {
          if (key == bad.key) value = bad.value;
          return true;
        },
        keep);
    try {
      Model::load(path);
      ADD_FAILURE() << bad.key << " accepted";
    } catch (const Error& e) {
      const std::string message = e.what();
      EXPECT_NE(message.find(bad.named), std::string::npos) << bad.key << ": " << message;
    }
  }
}

}  // namespace
}  // namespace mb
