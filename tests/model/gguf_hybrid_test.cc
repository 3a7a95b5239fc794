// SPDX-License-Identifier: MIT
// GGUF files of the hybrids (llama.cpp's granitehybrid and nemotron_h; model/gguf_hybrid.h)
// against the Hugging Face folders they are written from: the goldens' folders written as f32
// GGUF files give llama.cpp's logits; every file type holds the folder's config and weights (the
// logits bit for bit where A = -1 exactly, see gguf_load_test.cc; Q4_K_M tensor by tensor); a
// re-written file keeps every byte; the exactness contract holds on a Q4_K_M file.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>

#include "common/hybrid_configs.h"
#include "common/model_fixture.h"
#include "common/test_util.h"
#include "core/error.h"
#include "io/gguf.h"
#include "io/npy.h"
#include "model/gguf_checkpoint.h"
#include "model/gguf_tensor_names.h"
#include "ops/quant.h"

namespace mb {
namespace {

std::string write_gguf(const std::string& dir, GgufFileType type, const std::string& name = "model") {
  const std::string path = dir + "/" + name + ".gguf";
  write_gguf_checkpoint(path, load_model_config(dir), TensorSet::open_dir(dir), {type, "test", {}});
  return path;
}

std::vector<float> logits(const Model& model, const std::vector<int32_t>& tokens,
                          ScanForm form = ScanForm::Sequential) {
  SequenceState state = model.new_state();
  return test::prefill(model, ComputeContext{1, best_isa()}, tokens, state,
                       {OutputKind::LogitsAll, 0, form, form == ScanForm::Chunked ? 8 : 0});
}

void expect_same_config(const ModelConfig& got, const ModelConfig& want) {
  EXPECT_EQ(got.family, want.family);
  EXPECT_EQ(got.d_model, want.d_model);
  EXPECT_EQ(got.n_layer, want.n_layer);
  EXPECT_EQ(got.vocab_size, want.vocab_rows);
  EXPECT_EQ(got.norm_eps, want.norm_eps);
  EXPECT_EQ(got.tie_embeddings, want.tie_embeddings);
  EXPECT_EQ(got.hybrid.pattern, want.hybrid.pattern);
  const AttentionConfig &a = got.hybrid.attention, &b = want.hybrid.attention;
  EXPECT_EQ(a.n_heads, b.n_heads);
  EXPECT_EQ(a.n_kv_heads, b.n_kv_heads);
  EXPECT_EQ(a.head_dim, b.head_dim);
  EXPECT_EQ(a.bias, b.bias);
  // GGUF holds the multipliers as f32, the precision the engine applies them in.
  EXPECT_EQ(static_cast<float>(a.scale), static_cast<float>(b.scale));
  EXPECT_EQ(static_cast<float>(got.hybrid.embedding_multiplier),
            static_cast<float>(want.hybrid.embedding_multiplier));
  EXPECT_EQ(static_cast<float>(got.hybrid.residual_multiplier),
            static_cast<float>(want.hybrid.residual_multiplier));
  EXPECT_EQ(static_cast<float>(got.hybrid.logits_scaling), static_cast<float>(want.hybrid.logits_scaling));
  EXPECT_EQ(got.hybrid.mlp.width, want.hybrid.mlp.width);
  EXPECT_EQ(got.hybrid.mlp.activation, want.hybrid.mlp.activation);
  EXPECT_EQ(got.hybrid.mlp.bias, want.hybrid.mlp.bias);
  EXPECT_EQ(got.ssm.d_inner, want.ssm.d_inner);
  EXPECT_EQ(got.ssm.headdim, want.ssm.headdim);
  EXPECT_EQ(got.ssm.ngroups, want.ssm.ngroups);
  EXPECT_EQ(got.ssm.d_state, want.ssm.d_state);
  EXPECT_EQ(got.ssm.d_conv, want.ssm.d_conv);
  EXPECT_EQ(got.ssm.use_conv_bias, want.ssm.use_conv_bias);
  EXPECT_EQ(got.ssm.dt_limit_min, want.ssm.dt_limit_min);
  EXPECT_EQ(got.ssm.dt_limit_max, want.ssm.dt_limit_max);
}

void expect_same_tensors(const std::string& a_path, const std::string& b_path) {
  const GgufFile a(a_path), b(b_path);
  ASSERT_EQ(a.tensors().size(), b.tensors().size());
  for (size_t i = 0; i < a.tensors().size(); ++i) {
    const GgufTensorInfo& x = a.tensors()[i];
    const GgufTensorInfo& y = b.tensors()[i];
    EXPECT_EQ(x.name, y.name);
    EXPECT_EQ(x.ne, y.ne);
    EXPECT_EQ(x.type, y.type) << x.name;
    ASSERT_EQ(x.byte_size, y.byte_size) << x.name;
    EXPECT_EQ(std::memcmp(x.data, y.data, x.byte_size), 0) << x.name;
  }
}

// ---------------------------------------------------------------------------------------------
// The goldens: llama.cpp's logits for the same weights.

class HybridGgufGolden : public ::testing::TestWithParam<std::string> {};

TEST_P(HybridGgufGolden, OurF32FileGivesLlamaCppsLogitsAndTheFoldersWhereTheMathIsTheSame) {
  const std::string golden = std::string(MB_TEST_DATA_DIR) + "/goldens/" + GetParam();
  const std::string dir = test::make_temp_dir("gguf_golden_" + GetParam());
  const std::string path = dir + "/model.gguf";
  write_gguf_checkpoint(path, load_model_config(golden), TensorSet::open_dir(golden),
                        {GgufFileType::F32, GetParam(), {}});
  const auto folder = Model::load(golden);
  const auto gguf = Model::load(path);
  expect_same_config(gguf->config(), folder->config());

  std::vector<int64_t> shape;
  const std::vector<float> want = read_npy_f32(golden + "/logits.npy", shape);
  std::vector<int32_t> tokens;
  for (std::string text = read_text_file(golden + "/tokens.txt"); !text.empty();) {
    const size_t end = text.find_first_of(" ,\n");
    if (end != 0) tokens.push_back(std::stoi(text.substr(0, end)));
    text = end == std::string::npos ? "" : text.substr(end + 1);
  }
  ASSERT_EQ(static_cast<int64_t>(tokens.size()), shape[0]);
  const std::vector<float> got = logits(*gguf, tokens);
  ASSERT_EQ(got.size(), want.size());
  // tests/data/goldens/README.txt: max |ours - golden| / max |golden| <= 1e-5, same argmax.
  EXPECT_LE(test::max_abs_diff(got, want), 1e-5 * test::max_abs(want));
  const int64_t vocab = shape[1];
  for (int64_t t = 0; t < shape[0]; ++t) {
    const auto row = [&](const std::vector<float>& v) {
      return std::max_element(v.begin() + t * vocab, v.begin() + (t + 1) * vocab) - v.begin();
    };
    EXPECT_EQ(row(got), row(want)) << "position " << t;
  }
  std::printf("[ golden ] %s from our f32 GGUF: max|diff|/max|golden| = %.3g\n", GetParam().c_str(),
              test::max_abs_diff(got, want) / test::max_abs(want));
  // The chunked scan starts from A itself, the same f32 from A_log or from the file: the same
  // bits. The sequential scan's A log2(e) takes one more rounding from the file's A (see
  // model/blocks/mamba2_block.cc), so it agrees within that.
  EXPECT_TRUE(
      test::same_bits(logits(*gguf, tokens, ScanForm::Chunked), logits(*folder, tokens, ScanForm::Chunked)));
  const std::vector<float> folder_logits = logits(*folder, tokens);
  EXPECT_LE(test::max_abs_diff(got, folder_logits), 1e-5 * test::max_abs(folder_logits));
}

INSTANTIATE_TEST_SUITE_P(LlamaCpp, HybridGgufGolden,
                         ::testing::Values("granite-4.0-h-dense", "nemotron-h-dense"), [](const auto& info) {
                           std::string name = info.param;
                           for (char& c : name)
                             if (c == '-' || c == '.') c = '_';
                           return name;
                         });

// ---------------------------------------------------------------------------------------------
// Every file type.

ModelConfig granite_for_gguf() {
  ModelConfig c = test::granite_config("*MM*", 64, 131);
  c.hybrid.mlp.width = 64;
  return c;
}

// Attention heads of 8 in an odd spot, Mamba heads of 16 over 96 channels in 2 groups, biased
// MLPs and attention.
ModelConfig nemotron_for_gguf() {
  ModelConfig c = test::nemotron_config("M-*M-*", 64, 131);
  c.hybrid.mlp.width = 64;
  c.hybrid.mlp.bias = true;
  c.hybrid.attention.bias = true;
  return c;
}

struct TypeCase {
  std::string name;
  ModelConfig config;
  GgufFileType type;
};

std::vector<TypeCase> type_cases() {
  std::vector<TypeCase> cases;
  for (const auto& [arch, config] :
       {std::pair{"granite", granite_for_gguf()}, {"nemotron", nemotron_for_gguf()}})
    for (const auto& [type_name, type] : {std::pair{"f32", GgufFileType::F32},
                                          {"f16", GgufFileType::F16},
                                          {"bf16", GgufFileType::BF16},
                                          {"q8_0", GgufFileType::Q8_0},
                                          {"q4_0", GgufFileType::Q4_0}})
      cases.push_back({std::string(arch) + "_" + type_name, config, type});
  return cases;
}

class HybridGgufTypes : public ::testing::TestWithParam<TypeCase> {};

TEST_P(HybridGgufTypes, TheFileHoldsTheFoldersConfigAndWeights) {
  const TypeCase& p = GetParam();
  // Float files are compared with a folder stored in their dtype, quantized ones with an f32
  // folder loaded in theirs: the same bytes either way.
  const std::optional<DType> load_dtype = p.type == GgufFileType::Q8_0   ? std::optional(DType::Q8_0)
                                          : p.type == GgufFileType::Q4_0 ? std::optional(DType::Q4_0)
                                                                         : std::nullopt;
  MakeModelOptions o;
  o.config = p.config;
  o.dtype = p.type == GgufFileType::F16    ? DType::F16
            : p.type == GgufFileType::BF16 ? DType::BF16
                                           : DType::F32;
  o.seed = 31;
  const std::string dir = test::write_model(o, "gguf_hybrid_" + p.name);
  test::zero_a_log(dir);
  const std::string path = write_gguf(dir, p.type);
  LoadOptions load;
  load.weight_dtype = load_dtype;
  const auto folder = Model::load(dir, load);
  const auto gguf = Model::load(path);
  expect_same_config(gguf->config(), folder->config());
  if (load_dtype) {
    EXPECT_EQ(gguf->matrix_dtype(), *load_dtype);
  }
  const auto tokens = test::random_tokens(11, p.config.vocab_size, 5);
  EXPECT_TRUE(test::same_bits(logits(*gguf, tokens), logits(*folder, tokens)));
  // Split and reordered tensors are written back as they were read.
  const std::string again = dir + "/again.gguf";
  const GgufCheckpoint checkpoint = open_gguf_checkpoint(path);
  write_gguf_checkpoint(again, checkpoint.config, *checkpoint.tensors, {p.type, "test", {}});
  expect_same_tensors(path, again);
}

INSTANTIATE_TEST_SUITE_P(Files, HybridGgufTypes, ::testing::ValuesIn(type_cases()),
                         [](const auto& info) { return info.param.name; });

// The file at `path` with the tensors `pick` selects re-encoded as `type` from their values.
std::string retyped(const std::string& path, const std::string& out,
                    const std::function<bool(const std::string&)>& pick, uint32_t type) {
  const GgufFile file(path);
  GgufWriter writer;
  for (const auto& [key, value] : file.metadata()) writer.set(key, value);
  for (const GgufTensorInfo& t : file.tensors()) {
    if (!pick(t.name)) {
      writer.add_tensor(t.name, t.ne, t.type, std::vector<uint8_t>(t.data, t.data + t.byte_size));
      continue;
    }
    std::vector<float> values(static_cast<size_t>(t.element_count()));
    dequantize_row(*gguf_engine_dtype(t.type), t.data, t.element_count(), values.data());
    const DType dtype = *gguf_engine_dtype(type);
    const size_t row_bytes = dtype_row_bytes(dtype, t.ne[0]);
    std::vector<uint8_t> bytes(row_bytes * static_cast<size_t>(t.element_count() / t.ne[0]));
    for (int64_t r = 0; r < t.element_count() / t.ne[0]; ++r)
      quantize_row(dtype, values.data() + r * t.ne[0], t.ne[0], bytes.data() + r * row_bytes);
    writer.add_tensor(t.name, t.ne, type, std::move(bytes));
  }
  writer.write(out);
  return out;
}

TEST(HybridGguf, HalvesOfDifferentTypesAreJoinedInF32) {
  // A file whose ffn_gate is Q8_0 and ffn_up Q4_0 (llama-quantize's recipes may mix them) runs as
  // the same values stored in f32.
  MakeModelOptions o;
  o.config = granite_for_gguf();
  const std::string dir = test::write_model(o, "gguf_hybrid_mixed_halves");
  const std::string q8 = write_gguf(dir, GgufFileType::Q8_0);
  const auto is_up = [](const std::string& name) { return name.ends_with("ffn_up.weight"); };
  const std::string mixed = retyped(q8, dir + "/mixed.gguf", is_up, kGgmlQ4_0);
  const auto is_half = [](const std::string& name) {
    return name.ends_with("ffn_up.weight") || name.ends_with("ffn_gate.weight");
  };
  const std::string widened = retyped(mixed, dir + "/widened.gguf", is_half, kGgmlF32);
  EXPECT_EQ(GgufFile(mixed).find_tensor("blk.0.ffn_gate.weight")->type, kGgmlQ8_0);
  EXPECT_EQ(GgufFile(mixed).find_tensor("blk.0.ffn_up.weight")->type, kGgmlQ4_0);
  const auto tokens = test::random_tokens(9, 131, 6);
  EXPECT_TRUE(test::same_bits(logits(*Model::load(mixed), tokens), logits(*Model::load(widened), tokens)));
}

TEST(HybridGguf, TheTensorsAreNamedAndShapedAsLlamaCppsConverterWritesThem) {
  MakeModelOptions o;
  o.config = granite_for_gguf();
  const std::string dir = test::write_model(o, "gguf_hybrid_names");
  const GgufFile file(write_gguf(dir, GgufFileType::F32));
  EXPECT_EQ(file.string_value("general.architecture"), "granitehybrid");
  const GgufValue* kv = file.find("granitehybrid.attention.head_count_kv");
  ASSERT_NE(kv, nullptr);
  EXPECT_EQ(kv->integers, (std::vector<int64_t>{2, 0, 0, 2}));
  EXPECT_EQ(file.bool_if_present("granitehybrid.rope.scaling.finetuned"), false);
  EXPECT_EQ(file.float_value("granitehybrid.residual_scale"), 0.22f);
  // The fused [gate; up] matrix is ffn_gate then ffn_up, each {d_model, width}.
  const TensorSet folder = TensorSet::open_dir(dir);
  const StoredTensor& fused = *folder.find("model.layers.1.shared_mlp.input_linear.weight");
  for (const auto& [name, half] : {std::pair{"blk.1.ffn_gate.weight", 0}, {"blk.1.ffn_up.weight", 1}}) {
    const GgufTensorInfo* t = file.find_tensor(name);
    ASSERT_NE(t, nullptr) << name;
    EXPECT_EQ(t->ne, (std::vector<int64_t>{64, 64}));
    EXPECT_EQ(std::memcmp(t->data, fused.data + half * t->byte_size, t->byte_size), 0) << name;
  }
  // q's rows of each head in llama.cpp's order: row 2 i + h is the folder's row h * hd / 2 + i.
  const StoredTensor& q = *folder.find("model.layers.0.self_attn.q_proj.weight");
  const GgufTensorInfo* gq = file.find_tensor("blk.0.attn_q.weight");
  ASSERT_NE(gq, nullptr);
  const size_t row = 64 * sizeof(float);
  const int64_t hd = 16;
  for (int64_t head = 0; head < 4; ++head)
    for (int64_t i = 0; i < hd / 2; ++i)
      for (int64_t h = 0; h < 2; ++h)
        EXPECT_EQ(std::memcmp(gq->data + (head * hd + 2 * i + h) * row,
                              q.data + (head * hd + h * hd / 2 + i) * row, row),
                  0);
  for (const char* absent :
       {"blk.0.ssm_in.weight", "blk.1.attn_q.weight", "output.weight", "blk.0.ffn_norm.weight"})
    EXPECT_EQ(file.find_tensor(absent) == nullptr, std::string(absent) != "blk.0.ffn_norm.weight") << absent;
}

TEST(HybridGguf, WhatLlamaCppsFilesCannotHoldIsNotWritten) {
  ModelConfig biased = granite_for_gguf();
  biased.ssm.use_bias = true;
  ModelConfig odd_heads = nemotron_for_gguf();
  odd_heads.hybrid.attention = {4, 1, 7, 1.0 / std::sqrt(7.0), false};
  const std::vector<std::pair<ModelConfig, std::string>> cases = {{biased, "no ssm_in or ssm_out bias"},
                                                                  {odd_heads, "an even head size"},
                                                                  {granite_for_gguf(), "dt limit"}};
  for (size_t i = 0; i < cases.size(); ++i) {
    MakeModelOptions o;
    o.config = cases[i].first;
    const std::string dir = test::write_model(o, "gguf_hybrid_refused_" + std::to_string(i));
    if (i == 2) {
      // A time_step_limit, which Granite's config may carry and GGUF has no key for.
      std::string config = read_text_file(dir + "/config.json");
      config.insert(config.find('{') + 1, "\"time_step_limit\": [0.0, 0.5],");
      test::write_bytes(dir + "/config.json", config);
    }
    const std::string message = test::error_of([&] { write_gguf(dir, GgufFileType::F32); });
    EXPECT_NE(message.find(cases[i].second), std::string::npos) << message;
  }
}

TEST(HybridGguf, NemotronFilesCarryPerLayerArraysAndHeadSize) {
  MakeModelOptions o;
  o.config = nemotron_for_gguf();
  const std::string dir = test::write_model(o, "gguf_nemotron_keys");
  const GgufFile file(write_gguf(dir, GgufFileType::F32));
  EXPECT_EQ(file.string_value("general.architecture"), "nemotron_h");
  EXPECT_EQ(file.find("nemotron_h.feed_forward_length")->integers,
            (std::vector<int64_t>{0, 64, 0, 0, 64, 0}));
  EXPECT_EQ(file.find("nemotron_h.attention.head_count_kv")->integers,
            (std::vector<int64_t>{0, 0, 1, 0, 0, 1}));
  EXPECT_EQ(file.unsigned_value("nemotron_h.attention.key_length"), 8u);
  EXPECT_EQ(file.unsigned_value("nemotron_h.ssm.inner_size"), 96u);
  EXPECT_EQ(file.unsigned_value("nemotron_h.ssm.time_step_rank"), 6u);
  EXPECT_NE(file.find("nemotron_h.attention.layer_norm_epsilon"), nullptr);  // llama.cpp requires it
  EXPECT_NE(file.find_tensor("output.weight"), nullptr);
  EXPECT_NE(file.find_tensor("blk.1.ffn_up.bias"), nullptr);
  EXPECT_EQ(file.find_tensor("blk.1.ffn_norm.weight"), nullptr);
  EXPECT_EQ(file.find_tensor("blk.1.ffn_gate.weight"), nullptr);
  // The default score scale, 1 / sqrt(key_length), is left to llama.cpp; another one is written.
  EXPECT_EQ(file.find("nemotron_h.attention.scale"), nullptr);
  ModelConfig scaled = load_model_config(dir);
  scaled.hybrid.attention.scale = 0.2;
  const std::string path = dir + "/scaled.gguf";
  write_gguf_checkpoint(path, scaled, TensorSet::open_dir(dir), {GgufFileType::F32, "", {}});
  EXPECT_EQ(GgufFile(path).float_value("nemotron_h.attention.scale"), 0.2f);
  EXPECT_EQ(static_cast<float>(open_gguf_checkpoint(path).config.hybrid.attention.scale), 0.2f);
}

}  // namespace
}  // namespace mb
