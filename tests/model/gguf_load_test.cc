// SPDX-License-Identifier: MIT
// GGUF checkpoints (model/gguf_checkpoint.h) against the Hugging Face folders they are written
// from: the same config, and the same logits. GGUF stores A = -exp(A_log) as an f32, so the
// models' base-2 decay A * log2(e) takes one more rounding from a GGUF file than from A_log (see
// model/blocks/mamba1_block.cc). With A_log = 0 (A = -1 exactly) that rounding vanishes and the logits must
// be bit-identical; with the fixtures' real A_log they may differ within a tight tolerance.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>

#include "common/mamba2_reference.h"
#include "common/model_fixture.h"
#include "common/test_util.h"
#include "core/error.h"
#include "io/gguf.h"
#include "model/gguf_checkpoint.h"
#include "ops/quant.h"

namespace mb {
namespace {

struct Variant {
  std::string name;
  ModelConfig config;
  DType dtype;
};

ModelConfig falcon_config() {
  ModelConfig c = test::small_config(32, 2, 97);
  c.ssm.mixer_rms_norm = true;
  c.ssm.mixer_rms_eps = 1e-6;
  return c;
}

ModelConfig biased_untied_config() {
  ModelConfig c = test::small_config(48, 3, 120);
  c.ssm.use_bias = true;
  c.tie_embeddings = false;
  c.ssm.use_conv_bias = false;
  c.ssm.dt_rank = 5;
  return c;
}

std::vector<Variant> variants() {
  ModelConfig mamba2 = test::mamba2_config(64, 16, 16, 2, 90);
  mamba2.n_layer = 2;
  return {{"mamba1_f32", test::small_config(32, 2, 97), DType::F32},
          {"mamba1_bf16", test::small_config(32, 2, 97), DType::BF16},
          {"mamba1_f16_biased_untied", biased_untied_config(), DType::F16},
          {"falcon_mamba_f32", falcon_config(), DType::F32},
          {"mamba2_f32", mamba2, DType::F32},
          {"mamba2_f16", mamba2, DType::F16},
          {"mamba2_one_group_f32", test::mamba2_config(64, 16, 16, 1, 90), DType::F32}};
}

GgufFileType file_type_for(DType dtype) {
  if (dtype == DType::F16) return GgufFileType::F16;
  if (dtype == DType::BF16) return GgufFileType::BF16;
  return GgufFileType::F32;
}

std::string write_gguf(const std::string& dir, DType dtype) {
  const std::string path = dir + "/model.gguf";
  write_gguf_checkpoint(path, load_model_config(dir), TensorSet::open_dir(dir),
                        {file_type_for(dtype), "test", {}});
  return path;
}

// Prefill logits of every position, cut to the first `vocab` columns: a GGUF model's logits
// cover the embedding's padded rows, as llama.cpp's do.
std::vector<float> logits(const Model& model, const std::vector<int32_t>& tokens, int64_t vocab) {
  SequenceState state = model.new_state();
  const auto all =
      test::prefill(model, ComputeContext{1, best_isa()}, tokens, state, {OutputKind::LogitsAll, 0});
  const int64_t width = model.config().vocab_size;
  std::vector<float> cut;
  for (size_t t = 0; t < tokens.size(); ++t)
    cut.insert(cut.end(), all.begin() + t * width, all.begin() + t * width + vocab);
  return cut;
}

// Rewrites the GGUF at `path` into `out` with every tensor's dims passed through `reshape`: the
// same metadata and tensor bytes, as another writer would lay the file out.
std::string rewrite_dims(const std::string& path, const std::string& out,
                         const std::function<std::vector<int64_t>(std::vector<int64_t>)>& reshape,
                         int& changed) {
  const GgufFile file(path);
  GgufWriter writer;
  for (const auto& [key, value] : file.metadata()) writer.set(key, value);
  changed = 0;
  for (const GgufTensorInfo& t : file.tensors()) {
    std::vector<int64_t> ne = reshape(t.ne);
    changed += ne != t.ne;
    writer.add_tensor(t.name, std::move(ne), t.type, std::vector<uint8_t>(t.data, t.data + t.byte_size));
  }
  writer.write(out);
  return out;
}

// ggml (and so llama-quantize) writes only the dims up to the last one that is not 1
// (ggml_n_dims, at least one).
std::vector<int64_t> ggml_written_dims(std::vector<int64_t> ne) {
  while (ne.size() > 1 && ne.back() == 1) ne.pop_back();
  return ne;
}

// Two unit dims more than the shape has, as far as GGUF's four allow: {n} becomes {n, 1, 1}.
std::vector<int64_t> with_surplus_unit_dims(std::vector<int64_t> ne) {
  for (int i = 0; i < 2 && ne.size() < kGgufMaxDims; ++i) ne.push_back(1);
  return ne;
}

class GgufModel : public ::testing::TestWithParam<Variant> {};

TEST_P(GgufModel, ConfigMatchesTheFolders) {
  MakeModelOptions o;
  o.config = GetParam().config;
  o.dtype = GetParam().dtype;
  const std::string dir = test::write_model(o, "gguf_config_" + GetParam().name);
  const ModelConfig want = load_model_config(dir);
  const ModelConfig got = open_gguf_checkpoint(write_gguf(dir, GetParam().dtype)).config;
  EXPECT_EQ(got.arch, want.arch);
  EXPECT_EQ(got.d_model, want.d_model);
  EXPECT_EQ(got.n_layer, want.n_layer);
  EXPECT_EQ(got.vocab_size, want.vocab_rows);  // GGUF has one vocabulary size, the embedding's rows
  EXPECT_EQ(got.ssm.d_state, want.ssm.d_state);
  EXPECT_EQ(got.ssm.d_conv, want.ssm.d_conv);
  EXPECT_EQ(got.ssm.d_inner, want.ssm.d_inner);
  EXPECT_EQ(got.norm_eps, want.norm_eps);
  EXPECT_EQ(got.tie_embeddings, want.tie_embeddings);
  EXPECT_EQ(got.ssm.use_bias, want.ssm.use_bias);
  EXPECT_EQ(got.ssm.use_conv_bias, want.ssm.use_conv_bias);
  EXPECT_EQ(got.ssm.mixer_rms_norm, want.ssm.mixer_rms_norm);
  EXPECT_EQ(static_cast<float>(got.ssm.mixer_rms_eps), static_cast<float>(want.ssm.mixer_rms_eps));
  if (want.arch == Architecture::Mamba1) {
    EXPECT_EQ(got.ssm.dt_rank, want.ssm.dt_rank);
  }
  if (want.arch == Architecture::Mamba2) {
    EXPECT_EQ(got.ssm.headdim, want.ssm.headdim);
    EXPECT_EQ(got.ssm.ngroups, want.ssm.ngroups);
  }
}

TEST_P(GgufModel, LogitsAreBitIdenticalWhenARoundsExactly) {
  MakeModelOptions o;
  o.config = GetParam().config;
  o.dtype = GetParam().dtype;
  const std::string dir = test::write_model(o, "gguf_exact_" + GetParam().name);
  test::zero_a_log(dir);
  const auto folder = Model::load(dir);
  const auto gguf = Model::load(write_gguf(dir, GetParam().dtype));
  const int64_t vocab = folder->config().vocab_size;
  const auto tokens = test::random_tokens(9, vocab, 3);
  EXPECT_TRUE(test::same_bits(logits(*folder, tokens, vocab), logits(*gguf, tokens, vocab)));
}

TEST_P(GgufModel, LogitsAgreeWithinTheOneRoundingOfA) {
  MakeModelOptions o;
  o.config = GetParam().config;
  o.dtype = GetParam().dtype;
  const std::string dir = test::write_model(o, "gguf_close_" + GetParam().name);
  const auto folder = Model::load(dir);
  const auto gguf = Model::load(write_gguf(dir, GetParam().dtype));
  const int64_t vocab = folder->config().vocab_size;
  const auto tokens = test::random_tokens(9, vocab, 4);
  const auto want = logits(*folder, tokens, vocab);
  const auto got = logits(*gguf, tokens, vocab);
  // One ulp of a decay factor moves a logit by far less than this.
  EXPECT_LE(test::max_abs_diff(want, got), 1e-5 * std::max(1.0, test::max_abs(want)));
}

TEST_P(GgufModel, FilesWithTrailingUnitDimsDroppedOrAddedLoadBitForBit) {
  // llama-quantize writes an ngroups-1 Mamba-2 norm as {d_inner}, where the converter (and this
  // engine's writer) write {d_inner, 1}; both, and surplus unit dims, are the same tensor.
  MakeModelOptions o;
  o.config = GetParam().config;
  o.dtype = GetParam().dtype;
  const std::string dir = test::write_model(o, "gguf_unit_dims_" + GetParam().name);
  const std::string normal = write_gguf(dir, GetParam().dtype);
  int dropped = 0, added = 0;
  const std::string quantize_form = rewrite_dims(normal, dir + "/dropped.gguf", ggml_written_dims, dropped);
  const std::string padded = rewrite_dims(normal, dir + "/padded.gguf", with_surplus_unit_dims, added);
  const ModelConfig& c = GetParam().config;
  // Only the one-group Mamba-2 norm ends in a unit dim among the variants' tensors.
  EXPECT_EQ(dropped > 0, c.arch == Architecture::Mamba2 && c.ssm.ngroups == 1) << dropped;
  EXPECT_EQ(added, static_cast<int>(GgufFile(normal).tensors().size()));
  const auto want_model = Model::load(normal);
  const int64_t vocab = want_model->config().vocab_size;  // every row, padding included
  const auto tokens = test::random_tokens(9, vocab, 5);
  const auto want = logits(*want_model, tokens, vocab);
  for (const std::string& path : {quantize_form, padded}) {
    SCOPED_TRACE(path);
    const auto model = Model::load(path);
    EXPECT_TRUE(test::same_bits(want, logits(*model, tokens, vocab)));
  }
}

INSTANTIATE_TEST_SUITE_P(Variants, GgufModel, ::testing::ValuesIn(variants()),
                         [](const auto& info) { return info.param.name; });

TEST(GgufModel, BothDtypePathsOfTheSameWeightsAgree) {
  // An f32 GGUF loaded with --dtype bf16 packs its matrices exactly as a folder loaded so does;
  // only the embedding rows (read in their stored dtype) differ, so compare the bf16 GGUF instead.
  MakeModelOptions o;
  o.config = test::small_config(32, 2, 97);
  o.dtype = DType::BF16;
  const std::string dir = test::write_model(o, "gguf_bf16_paths");
  test::zero_a_log(dir);
  LoadOptions as_bf16;
  as_bf16.weight_dtype = DType::BF16;
  const auto folder = Model::load(dir, as_bf16);
  const auto gguf = Model::load(write_gguf(dir, DType::BF16), as_bf16);
  EXPECT_EQ(gguf->matrix_dtype(), DType::BF16);
  const auto tokens = test::random_tokens(6, 97, 8);
  EXPECT_TRUE(test::same_bits(logits(*folder, tokens, 97), logits(*gguf, tokens, 97)));
}

TEST(GgufModel, QuantizedFilesHoldTheWeightsOfTheFolderQuantizedAtLoad) {
  // GGUF writes the same GGML blocks the loader packs from f32, so a Q8_0 or Q4_0 file equals
  // its folder loaded with that dtype, bit for bit (A = -1 exactly, as above).
  MakeModelOptions o;
  o.config = test::small_config(64, 2, 97);
  const std::string dir = test::write_model(o, "gguf_quantized");
  test::zero_a_log(dir);
  for (const auto& [type, dtype] :
       {std::pair{GgufFileType::Q8_0, DType::Q8_0}, {GgufFileType::Q4_0, DType::Q4_0}}) {
    SCOPED_TRACE(dtype_name(dtype));
    const std::string path = dir + "/" + std::string(dtype_name(dtype)) + ".gguf";
    write_gguf_checkpoint(path, load_model_config(dir), TensorSet::open_dir(dir), {type, "", {}});
    const GgufFile file(path);
    EXPECT_EQ(file.find_tensor("blk.0.ssm_in.weight")->type, dtype == DType::Q8_0 ? kGgmlQ8_0 : kGgmlQ4_0);
    EXPECT_EQ(file.find_tensor("blk.0.ssm_a")->type, kGgmlF32);
    EXPECT_EQ(file.find_tensor("blk.0.ssm_conv1d.weight")->type, kGgmlF32);
    EXPECT_EQ(file.find_tensor("blk.0.ssm_dt.weight")->type, kGgmlBF16);  // rows of dt_rank 4: not a block
    LoadOptions quantized;
    quantized.weight_dtype = dtype;
    const auto folder = Model::load(dir, quantized);
    const auto gguf = Model::load(path);
    const auto tokens = test::random_tokens(7, 97, 11);
    EXPECT_TRUE(test::same_bits(logits(*folder, tokens, 97), logits(*gguf, tokens, 97)));
  }
}

TEST(GgufModel, Q4KMUsesQ6KForTheHeadAndQ4KForTheOtherMatrices) {
  MakeModelOptions o;
  o.config = test::small_config(256, 8, 97);
  o.config.tie_embeddings = false;
  const std::string dir = test::write_model(o, "gguf_q4km");
  const std::string path = dir + "/q4_k_m.gguf";
  write_gguf_checkpoint(path, load_model_config(dir), TensorSet::open_dir(dir),
                        {GgufFileType::Q4_K_M, "", {}});
  const GgufFile file(path);
  EXPECT_EQ(file.unsigned_value("general.file_type"), 15u);
  EXPECT_EQ(file.find_tensor("output.weight")->type, kGgmlQ6_K);
  EXPECT_EQ(file.find_tensor("token_embd.weight")->type, kGgmlQ4_K);
  // llama-quantize gives more bits to attn_v and ffn_down only, which Mamba-1 has none of: its
  // out_proj (ssm_out) is Q4_K in every layer.
  for (int layer = 0; layer < 8; ++layer) {
    EXPECT_EQ(file.find_tensor("blk." + std::to_string(layer) + ".ssm_out.weight")->type, kGgmlQ4_K) << layer;
    EXPECT_EQ(file.find_tensor("blk." + std::to_string(layer) + ".ssm_in.weight")->type, kGgmlQ4_K);
  }
  EXPECT_EQ(file.find_tensor("blk.0.ssm_x.weight")->type, kGgmlQ4_K);   // 512 columns
  EXPECT_EQ(file.find_tensor("blk.0.ssm_dt.weight")->type, kGgmlBF16);  // 16 columns
  // Random weights amplify quantization noise through the layers, so the weights are compared
  // instead of logits: Q6_K's error must be well below Q4_K's.
  const TensorSet original = TensorSet::open_dir(dir);
  const GgufCheckpoint quantized = open_gguf_checkpoint(file);
  const auto relative_rms_error = [&](const std::string& name) {
    const StoredTensor& want = *original.find(name);
    const StoredTensor& got = *quantized.tensors->find(name);
    std::vector<float> values(static_cast<size_t>(got.element_count()));
    dequantize_row(*got.dtype, got.data, static_cast<int64_t>(values.size()), values.data());
    double error = 0.0, norm = 0.0;
    for (size_t i = 0; i < values.size(); ++i) {
      const double w = load_as_f32(want.data, DType::F32, i);
      error += (values[i] - w) * (values[i] - w);
      norm += w * w;
    }
    return std::sqrt(error / norm);
  };
  const double q6 = relative_rms_error("lm_head.weight");
  const double q4 = relative_rms_error("backbone.layers.1.mixer.out_proj.weight");
  EXPECT_LT(q4, 0.15);
  EXPECT_LT(q6, q4 / 2);
  EXPECT_NO_THROW(Model::load(path));
}

TEST(GgufModel, ReWritingAGgufKeepsEveryTensorByte) {
  MakeModelOptions o;
  o.config = test::mamba2_config(64, 16, 16, 2, 90);
  const std::string dir = test::write_model(o, "gguf_rewrite");
  const std::string first = write_gguf(dir, DType::F32);
  const GgufCheckpoint checkpoint = open_gguf_checkpoint(first);
  const std::string second = dir + "/again.gguf";
  write_gguf_checkpoint(second, checkpoint.config, *checkpoint.tensors, {GgufFileType::F32, "test", {}});
  const GgufFile a(first), b(second);
  ASSERT_EQ(a.tensors().size(), b.tensors().size());
  for (size_t i = 0; i < a.tensors().size(); ++i) {
    const GgufTensorInfo& x = a.tensors()[i];
    const GgufTensorInfo& y = b.tensors()[i];
    EXPECT_EQ(x.name, y.name);
    EXPECT_EQ(x.ne, y.ne);
    EXPECT_EQ(x.type, y.type);
    ASSERT_EQ(x.byte_size, y.byte_size);
    EXPECT_EQ(std::memcmp(x.data, y.data, x.byte_size), 0) << x.name;
  }
}

TEST(GgufModel, FilesTheFormatsCannotHoldAreRefused) {
  MakeModelOptions o;
  o.config = test::mamba2_config(64, 16, 16, 2, 90);
  o.config.ssm.dt_limit_max = 0.5;
  const std::string dir = test::write_model(o, "gguf_refused");
  try {
    write_gguf(dir, DType::F32);
    FAIL() << "wrote a dt limit GGUF cannot hold";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("dt limit"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace mb
