// SPDX-License-Identifier: MIT
// GGUF files of the mixture-of-experts hybrids (llama.cpp's granitehybrid with experts and
// nemotron_h_moe; model/gguf_hybrid.h) against the Hugging Face folders they are written from:
// every file type holds the folder's config and weights (the logits bit for bit where A = -1
// exactly, as in gguf_hybrid_test.cc); the expert tensors are named, shaped and laid out as
// llama.cpp's converter writes them (Granite's [gate; up] experts split, Nemotron-H's per-expert
// matrices stacked, the router in f32); a re-written file keeps every byte; a Q4_K_M file's types
// are llama-quantize's and its values the f32 file's quantized; the exactness contract holds on a
// Q4_K_M file; what llama.cpp's files cannot hold is not written.
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

std::string moe_write_gguf(const std::string& dir, GgufFileType type, const std::string& name = "model") {
  const std::string path = dir + "/" + name + ".gguf";
  write_gguf_checkpoint(path, load_model_config(dir), TensorSet::open_dir(dir), {type, "test", {}});
  return path;
}

std::vector<float> moe_logits(const Model& model, const std::vector<int32_t>& tokens) {
  SequenceState state = model.new_state();
  return test::prefill(model, ComputeContext{1, best_isa()}, tokens, state, {OutputKind::LogitsAll});
}

void moe_expect_same_tensors(const std::string& a_path, const std::string& b_path) {
  const GgufFile a(a_path), b(b_path);
  ASSERT_EQ(a.tensors().size(), b.tensors().size());
  for (size_t i = 0; i < a.tensors().size(); ++i) {
    const GgufTensorInfo &x = a.tensors()[i], &y = b.tensors()[i];
    EXPECT_EQ(x.name, y.name);
    EXPECT_EQ(x.ne, y.ne);
    EXPECT_EQ(x.type, y.type) << x.name;
    ASSERT_EQ(x.byte_size, y.byte_size) << x.name;
    EXPECT_EQ(std::memcmp(x.data, y.data, x.byte_size), 0) << x.name;
  }
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

// Granite with 5 SwiGLU experts of 32 (top 2) beside a shared MLP of 64 in every layer, rows of
// 64 (whole Q8_0 and Q4_0 blocks).
ModelConfig granite_moe() {
  ModelConfig c = test::granite_moe_config("*MM*", 5, 2, 32, 64);
  c.hybrid.mlp.width = 64;
  return c;
}

// Nemotron-H 'E' layers of 6 ReLU^2 experts of 32 (top 3) and a shared expert of 64, rows of 64;
// no MLP layers (llama.cpp's nemotron_h_moe has none), whose width the config repeats as the
// experts' as the published configs do.
ModelConfig nemotron_moe() {
  ModelConfig c = test::nemotron_moe_config("ME*EM", 6, 3, 32, 64);
  c.hybrid.moe.shared_width = 64;
  c.hybrid.mlp.width = 32;
  return c;
}

// Nemotron-3-Super's LatentMoE on those layers: experts 32 wide in and out, between
// ffn_latent_down and ffn_latent_up.
ModelConfig nemotron_latent() {
  ModelConfig c = nemotron_moe();
  c.hybrid.moe.latent = 32;
  return c;
}

// ---------------------------------------------------------------------------------------------
// Every file type.

struct MoeTypeCase {
  std::string name;
  ModelConfig config;
  GgufFileType type;
};

std::vector<MoeTypeCase> moe_type_cases() {
  std::vector<MoeTypeCase> cases;
  for (const auto& [arch, config] : {std::pair{"granite", granite_moe()},
                                     {"nemotron", nemotron_moe()},
                                     {"nemotron_latent", nemotron_latent()}})
    for (const auto& [type_name, type] : {std::pair{"f32", GgufFileType::F32},
                                          {"f16", GgufFileType::F16},
                                          {"bf16", GgufFileType::BF16},
                                          {"q8_0", GgufFileType::Q8_0},
                                          {"q4_0", GgufFileType::Q4_0}})
      cases.push_back({std::string(arch) + "_" + type_name, config, type});
  return cases;
}

class MoeGgufTypes : public ::testing::TestWithParam<MoeTypeCase> {};

TEST_P(MoeGgufTypes, TheFileHoldsTheFoldersConfigAndWeights) {
  const MoeTypeCase& p = GetParam();
  // Float files are compared with a folder stored in their dtype, quantized ones with an f32
  // folder loaded in theirs: the same bytes either way (the router in f32 in both).
  const std::optional<DType> load_dtype = p.type == GgufFileType::Q8_0   ? std::optional(DType::Q8_0)
                                          : p.type == GgufFileType::Q4_0 ? std::optional(DType::Q4_0)
                                                                         : std::nullopt;
  MakeModelOptions o;
  o.config = p.config;
  o.dtype = p.type == GgufFileType::F16    ? DType::F16
            : p.type == GgufFileType::BF16 ? DType::BF16
                                           : DType::F32;
  o.seed = 37;
  const std::string dir = test::write_model(o, "gguf_moe_" + p.name);
  test::zero_a_log(dir);
  const std::string path = moe_write_gguf(dir, p.type);
  LoadOptions load;
  load.weight_dtype = load_dtype;
  const auto folder = Model::load(dir, load);
  const auto gguf = Model::load(path);
  const ModelConfig &got = gguf->config(), &want = folder->config();
  EXPECT_EQ(got.family, want.family);
  EXPECT_EQ(got.hybrid.pattern, want.hybrid.pattern);
  EXPECT_EQ(got.hybrid.mlp.width, want.hybrid.mlp.width);
  const MoeConfig &a = got.hybrid.moe, &b = want.hybrid.moe;
  EXPECT_EQ(a.n_experts, b.n_experts);
  EXPECT_EQ(a.top_k, b.top_k);
  EXPECT_EQ(a.width, b.width);
  EXPECT_EQ(a.shared_width, b.shared_width);
  EXPECT_EQ(a.scoring, b.scoring);
  EXPECT_EQ(a.normalize, b.normalize);
  EXPECT_EQ(static_cast<float>(a.scale), static_cast<float>(b.scale));
  EXPECT_EQ(a.latent, b.latent);
  if (load_dtype) {
    EXPECT_EQ(gguf->matrix_dtype(), *load_dtype);
  }
  const auto tokens = test::random_tokens(13, p.config.vocab_size, 5);
  EXPECT_TRUE(test::same_bits(moe_logits(*gguf, tokens), moe_logits(*folder, tokens)));
  // Split and stacked experts are written back as they were read.
  const std::string again = dir + "/again.gguf";
  const GgufCheckpoint checkpoint = open_gguf_checkpoint(path);
  write_gguf_checkpoint(again, checkpoint.config, *checkpoint.tensors, {p.type, "test", {}});
  moe_expect_same_tensors(path, again);
}

INSTANTIATE_TEST_SUITE_P(Files, MoeGgufTypes, ::testing::ValuesIn(moe_type_cases()),
                         [](const auto& info) { return info.param.name; });

// ---------------------------------------------------------------------------------------------
// Names, dims and layout.

TEST(MoeGguf, GraniteExpertsAreSplitIntoGateAndUpAsTheConverterWritesThem) {
  MakeModelOptions o;
  o.config = granite_moe();
  const std::string dir = test::write_model(o, "gguf_moe_granite_names");
  const GgufFile file(moe_write_gguf(dir, GgufFileType::Q8_0));
  EXPECT_EQ(file.string_value("general.architecture"), "granitehybrid");
  EXPECT_EQ(file.unsigned_value("granitehybrid.expert_count"), 5u);
  EXPECT_EQ(file.unsigned_value("granitehybrid.expert_used_count"), 2u);
  // llama.cpp's n_ff is the experts' width; the shared MLP's has its own key.
  EXPECT_EQ(file.unsigned_value("granitehybrid.feed_forward_length"), 32u);
  EXPECT_EQ(file.unsigned_value("granitehybrid.expert_shared_feed_forward_length"), 64u);
  const std::map<std::string, std::pair<std::vector<int64_t>, uint32_t>> want = {
      {"blk.1.ffn_norm.weight", {{64}, kGgmlF32}},
      {"blk.1.ffn_gate_inp.weight", {{64, 5}, kGgmlF32}},  // the router, never quantized
      {"blk.1.ffn_gate_exps.weight", {{64, 32, 5}, kGgmlQ8_0}},
      {"blk.1.ffn_up_exps.weight", {{64, 32, 5}, kGgmlQ8_0}},
      {"blk.1.ffn_down_exps.weight", {{32, 64, 5}, kGgmlQ8_0}},
      {"blk.1.ffn_gate_shexp.weight", {{64, 64}, kGgmlQ8_0}},
      {"blk.1.ffn_up_shexp.weight", {{64, 64}, kGgmlQ8_0}},
      {"blk.1.ffn_down_shexp.weight", {{64, 64}, kGgmlQ8_0}}};
  for (const auto& [name, dims_type] : want) {
    const GgufTensorInfo* t = file.find_tensor(name);
    ASSERT_NE(t, nullptr) << name;
    EXPECT_EQ(t->ne, dims_type.first) << name;
    EXPECT_EQ(t->type, dims_type.second) << name;
  }
  for (const char* absent : {"blk.1.ffn_gate.weight", "blk.1.ffn_up.weight", "blk.1.ffn_down.weight"})
    EXPECT_EQ(file.find_tensor(absent), nullptr) << absent;
  // Expert e's 32 gate rows, then its 32 up rows, of input_linear [5, 64, 64]: ffn_gate_exps holds
  // every expert's gate rows, ffn_up_exps their up rows (f32 file, so the bytes compare).
  const GgufFile f32(moe_write_gguf(dir, GgufFileType::F32, "f32"));
  const TensorSet folder = TensorSet::open_dir(dir);
  const StoredTensor& fused = *folder.find("model.layers.2.block_sparse_moe.input_linear.weight");
  const size_t half = 32 * 64 * sizeof(float);
  for (const auto& [name, h] : {std::pair{"blk.2.ffn_gate_exps.weight", 0}, {"blk.2.ffn_up_exps.weight", 1}})
    for (int64_t e = 0; e < 5; ++e)
      EXPECT_EQ(std::memcmp(f32.find_tensor(name)->data + e * half, fused.data + (2 * e + h) * half, half), 0)
          << name << " expert " << e;
}

TEST(MoeGguf, NemotronExpertsAreStackedIntoNemotronHMoeTensors) {
  MakeModelOptions o;
  o.config = nemotron_moe();
  const std::string dir = test::write_model(o, "gguf_moe_nemotron_names");
  const GgufFile file(moe_write_gguf(dir, GgufFileType::F32));
  EXPECT_EQ(file.string_value("general.architecture"), "nemotron_h_moe");
  EXPECT_EQ(file.find("nemotron_h_moe.feed_forward_length")->integers,
            (std::vector<int64_t>{0, 32, 0, 32, 0}));
  EXPECT_EQ(file.find("nemotron_h_moe.attention.head_count_kv")->integers,
            (std::vector<int64_t>{0, 0, 1, 0, 0}));
  EXPECT_EQ(file.unsigned_value("nemotron_h_moe.expert_count"), 6u);
  EXPECT_EQ(file.unsigned_value("nemotron_h_moe.expert_used_count"), 3u);
  EXPECT_EQ(file.unsigned_value("nemotron_h_moe.expert_feed_forward_length"), 32u);
  EXPECT_EQ(file.unsigned_value("nemotron_h_moe.expert_shared_feed_forward_length"), 64u);
  EXPECT_EQ(file.unsigned_value("nemotron_h_moe.expert_shared_count"), 1u);
  EXPECT_EQ(file.bool_if_present("nemotron_h_moe.expert_weights_norm"), true);
  EXPECT_EQ(file.float_value("nemotron_h_moe.expert_weights_scale"), 2.5);
  EXPECT_EQ(file.unsigned_value("nemotron_h_moe.expert_group_count"), 1u);
  const std::map<std::string, std::vector<int64_t>> want = {
      {"blk.3.ffn_gate_inp.weight", {64, 6}},    {"blk.3.exp_probs_b.bias", {6}},
      {"blk.3.ffn_up_exps.weight", {64, 32, 6}}, {"blk.3.ffn_down_exps.weight", {32, 64, 6}},
      {"blk.3.ffn_up_shexp.weight", {64, 64}},   {"blk.3.ffn_down_shexp.weight", {64, 64}}};
  for (const auto& [name, dims] : want) {
    const GgufTensorInfo* t = file.find_tensor(name);
    ASSERT_NE(t, nullptr) << name;
    EXPECT_EQ(t->ne, dims) << name;
  }
  EXPECT_EQ(file.find_tensor("blk.3.ffn_norm.weight"), nullptr);
  EXPECT_EQ(file.find_tensor("blk.3.ffn_gate_exps.weight"), nullptr);
  // Expert e's matrix is slice e of the stacked tensor.
  const TensorSet folder = TensorSet::open_dir(dir);
  for (const char* kind : {"up", "down"}) {
    const GgufTensorInfo* stacked = file.find_tensor(std::string("blk.3.ffn_") + kind + "_exps.weight");
    for (int64_t e = 0; e < 6; ++e) {
      const StoredTensor& one =
          *folder.find("backbone.layers.3.mixer.experts." + std::to_string(e) + "." + kind + "_proj.weight");
      EXPECT_EQ(std::memcmp(stacked->data + e * one.byte_size, one.data, one.byte_size), 0) << kind << e;
    }
  }
}

// A LatentMoE file: moe_latent_size, the experts' dims in the latent width, and the projections
// under llama.cpp's names ({n_embd, moe_n_embd} down, {moe_n_embd, n_embd} up).
TEST(MoeGguf, NemotronLatentProjectionsAreWrittenUnderLlamaCppsNames) {
  MakeModelOptions o;
  o.config = nemotron_latent();
  const std::string dir = test::write_model(o, "gguf_moe_nemotron_latent_names");
  const GgufFile file(moe_write_gguf(dir, GgufFileType::F32));
  EXPECT_EQ(file.unsigned_value("nemotron_h_moe.moe_latent_size"), 32u);
  const std::map<std::string, std::vector<int64_t>> want = {{"blk.3.ffn_latent_down.weight", {64, 32}},
                                                            {"blk.3.ffn_latent_up.weight", {32, 64}},
                                                            {"blk.3.ffn_up_exps.weight", {32, 32, 6}},
                                                            {"blk.3.ffn_down_exps.weight", {32, 32, 6}},
                                                            {"blk.3.ffn_up_shexp.weight", {64, 64}}};
  for (const auto& [name, dims] : want) {
    const GgufTensorInfo* t = file.find_tensor(name);
    ASSERT_NE(t, nullptr) << name;
    EXPECT_EQ(t->ne, dims) << name;
  }
  EXPECT_EQ(file.find_tensor("blk.0.ffn_latent_down.weight"), nullptr);  // a Mamba layer
}

TEST(MoeGguf, WhatNemotronHMoeFilesCannotHoldIsNotWritten) {
  ModelConfig with_mlp = nemotron_moe();
  with_mlp.hybrid.pattern = "ME*-";
  with_mlp.n_layer = 4;
  ModelConfig biased = nemotron_moe();
  biased.hybrid.mlp.bias = true;
  const std::vector<std::pair<ModelConfig, std::string>> cases = {
      {with_mlp, "both MLP ('-') and mixture-of-experts ('E') layers"}, {biased, "no ffn_up_shexp"}};
  for (size_t i = 0; i < cases.size(); ++i) {
    MakeModelOptions o;
    o.config = cases[i].first;
    const std::string dir = test::write_model(o, "gguf_moe_refused_" + std::to_string(i));
    const std::string message = test::error_of([&] { moe_write_gguf(dir, GgufFileType::F32); });
    EXPECT_NE(message.find(cases[i].second), std::string::npos) << message;
  }
}

// ---------------------------------------------------------------------------------------------
// Q4_K_M: llama-quantize's types, the f32 file's values, and the exactness contract.

// Rows of 256 (whole Q4_K blocks) for every matrix whose rows are d_model or an expert's width.
ModelConfig granite_q4km(const std::string& pattern, int64_t experts, int64_t width) {
  ModelConfig c = test::granite_moe_config(pattern, experts, 2, width, 256);
  c.vocab_size = 300;
  c.ssm.d_inner = 512;
  c.ssm.headdim = 64;
  c.hybrid.attention = {4, 2, 64, 0.015625, false};
  c.hybrid.mlp.width = 256;
  return c;
}

ModelConfig nemotron_q4km(const std::string& pattern) {
  ModelConfig c = test::nemotron_moe_config(pattern, 3, 2, 256, 256);
  c.vocab_size = 300;
  c.ssm.d_inner = 256;
  c.ssm.headdim = 32;
  c.ssm.ngroups = 4;
  c.hybrid.attention = {4, 2, 64, 0.125, false};
  c.hybrid.mlp.width = 256;
  c.hybrid.moe.shared_width = 256;
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
    o.config = name == "granite"          ? granite_q4km("*MM*M*", 2, 256)
               : name == "granite_small"  ? granite_q4km("*M", 3, 256)
               : name == "granite_eight"  ? granite_q4km("*M*", 8, 32)
               : name == "nemotron_small" ? nemotron_q4km("E*ME")
                                          : nemotron_q4km("ME*EMEE*E");
    o.seed = 43;
    const std::string dir = test::write_model(o, "gguf_moe_q4km_" + name);
    const ModelConfig config = load_model_config(dir);
    const TensorSet tensors = TensorSet::open_dir(dir);
    Files f{dir + "/f32.gguf", dir + "/q4km.gguf"};
    write_gguf_checkpoint(f.f32, config, tensors, {GgufFileType::F32, "", {}});
    write_gguf_checkpoint(f.q4km, config, tensors, {GgufFileType::Q4_K_M, "", {}});
    it = files.emplace(name, f).first;
  }
  return it->second;
}

TEST(MoeGgufQ4KM, GraniteExpertTensorTypesAreLlamaQuantizesChoices) {
  const GgufFile file(files_for("granite").q4km);
  EXPECT_EQ(file.unsigned_value("general.file_type"), 15u);
  auto types = types_of(file);
  EXPECT_EQ(types["token_embd.weight"], kGgmlQ6_K);  // tied: the LM head
  const std::string pattern = "*MM*M*";
  int attention = 0;
  for (int l = 0; l < 6; ++l) {
    const std::string b = "blk." + std::to_string(l) + ".";
    SCOPED_TRACE(b);
    EXPECT_EQ(types[b + "ffn_norm.weight"], kGgmlF32);
    EXPECT_EQ(types[b + "ffn_gate_inp.weight"], kGgmlF32);
    for (const char* q4 :
         {"ffn_gate_exps.weight", "ffn_up_exps.weight", "ffn_gate_shexp.weight", "ffn_up_shexp.weight"})
      EXPECT_EQ(types[b + q4], kGgmlQ4_K) << q4;
    // With more than one expert llama-quantize takes an ffn_down tensor's layer from its name, over
    // block_count: the routed and the shared experts' alike.
    const uint32_t down = more_bits(l, 6) ? kGgmlQ6_K : kGgmlQ4_K;
    EXPECT_EQ(types[b + "ffn_down_exps.weight"], down);
    EXPECT_EQ(types[b + "ffn_down_shexp.weight"], down);
    if (pattern[l] == '*') {
      EXPECT_EQ(types[b + "attn_k.weight"], kGgmlQ4_K);
      EXPECT_EQ(types[b + "attn_output.weight"], kGgmlQ4_K);
      EXPECT_EQ(types[b + "attn_v.weight"], more_bits(attention++, 3) ? kGgmlQ6_K : kGgmlQ4_K);
    }
  }
}

TEST(MoeGgufQ4KM, NemotronTakesFfnDownLayersFromTheNames) {
  const GgufFile file(files_for("nemotron").q4km);
  auto types = types_of(file);
  EXPECT_EQ(types["output.weight"], kGgmlQ6_K);
  // E layers 1, 3, 5, 6, 8 of 9: use_more_bits(layer, 9) holds for 3, 6 and 8. Counting the
  // ffn_down tensors instead (as a dense file does) would give layers 1 and 6 other types.
  const std::string pattern = "ME*EMEE*E";
  for (int l = 0; l < 9; ++l) {
    if (pattern[l] != 'E') continue;
    const std::string b = "blk." + std::to_string(l) + ".";
    const uint32_t down = more_bits(l, 9) ? kGgmlQ6_K : kGgmlQ4_K;
    EXPECT_EQ(types[b + "ffn_down_exps.weight"], down) << b;
    EXPECT_EQ(types[b + "ffn_down_shexp.weight"], down) << b;
    EXPECT_EQ(types[b + "ffn_up_exps.weight"], kGgmlQ4_K) << b;
    EXPECT_EQ(types[b + "ffn_up_shexp.weight"], kGgmlQ4_K) << b;
    EXPECT_EQ(types[b + "ffn_gate_inp.weight"], kGgmlF32) << b;
    EXPECT_EQ(types[b + "exp_probs_b.bias"], kGgmlF32) << b;
  }
  // Layer 1's ffn_down tensors are the file's first: counted, use_more_bits(0, 9) would hold.
  EXPECT_TRUE(more_bits(0, 9));
  EXPECT_FALSE(more_bits(1, 9));
}

TEST(MoeGgufQ4KM, EightExpertsGetLlamaQuantizesAttentionBump) {
  // llama-quantize: with exactly 8 experts attn_v and attn_k are Q8_0, attn_output Q5_K (Q6_K
  // here, the engine having no Q5_K).
  auto types = types_of(GgufFile(files_for("granite_eight").q4km));
  for (const char* b : {"blk.0.", "blk.2."}) {
    EXPECT_EQ(types[std::string(b) + "attn_v.weight"], kGgmlQ8_0) << b;
    EXPECT_EQ(types[std::string(b) + "attn_k.weight"], kGgmlQ8_0) << b;
    EXPECT_EQ(types[std::string(b) + "attn_q.weight"], kGgmlQ4_K) << b;
    EXPECT_EQ(types[std::string(b) + "attn_output.weight"], kGgmlQ6_K) << b;
  }
  // Experts of 32: their down rows are not whole Q4_K blocks, so Q8_0 (as the load-time
  // quantization falls back); llama-quantize would pick Q5_0.
  EXPECT_EQ(types["blk.1.ffn_down_exps.weight"], kGgmlQ8_0);
  EXPECT_EQ(types["blk.1.ffn_up_exps.weight"], kGgmlQ4_K);
}

class MoeGgufQ4KMValues : public ::testing::TestWithParam<std::string> {};

TEST_P(MoeGgufQ4KMValues, EveryTensorIsTheF32FilesQuantizedToItsType) {
  const GgufFile f32(files_for(GetParam()).f32), q4km(files_for(GetParam()).q4km);
  ASSERT_EQ(f32.tensors().size(), q4km.tensors().size());
  int experts = 0;
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
    experts += a.ne.size() == 3 && dtype_is_quantized(type);
  }
  EXPECT_GT(experts, 5);
}

TEST_P(MoeGgufQ4KMValues, PrefillEqualsStepsThreadsAndBatchesOnTheQ4KMFile) {
  const GgufFile file(files_for(GetParam() + "_small").q4km);
  int q4_k = 0, q6_k = 0;
  for (const GgufTensorInfo& t : file.tensors()) {
    q4_k += t.ne.size() == 3 && t.type == kGgmlQ4_K;
    q6_k += t.ne.size() == 3 && t.type == kGgmlQ6_K;
  }
  EXPECT_GT(q4_k, 0);
  EXPECT_GT(q6_k, 0);
  const auto model = Model::load(file.path());
  ASSERT_GT(model->config().hybrid.moe.n_experts, 0);
  test::expect_prefill_equals_steps_for_every_length(*model, 21);
  test::expect_threads_rounds_and_isas_change_no_bit(*model, test::random_tokens(40, 300, 4), {0, 1, 7, 32});
  std::vector<std::vector<int32_t>> prompts;
  for (size_t length : {1, 9, 23, 4}) prompts.push_back(test::random_tokens(length, 300, 60 + length));
  test::expect_batch_equals_each_alone(*model, prompts, {OutputKind::LogitsAll}, {0, 5});
}

INSTANTIATE_TEST_SUITE_P(Archs, MoeGgufQ4KMValues, ::testing::Values("granite", "nemotron"));

}  // namespace
}  // namespace mb
