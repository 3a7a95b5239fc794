// SPDX-License-Identifier: MIT
// LFM2 and LFM2-MoE GGUF files (llama.cpp's lfm2 and lfm2moe): the golden folder written as an f32
// file gives llama.cpp's logits; every file type holds the folder's config and weights (the logits
// bit for bit against the folder loaded in the file's dtype); a re-written file keeps every byte;
// the tensors and keys are named as llama.cpp's converter names them; malformed metadata is
// refused naming the key.
#include <gtest/gtest.h>

#include <cstring>

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

std::string lfm2_write_gguf(const std::string& dir, GgufFileType type, const std::string& name = "model") {
  const std::string path = dir + "/" + name + ".gguf";
  write_gguf_checkpoint(path, load_model_config(dir), TensorSet::open_dir(dir), {type, "test", {}});
  return path;
}

std::vector<float> lfm2_logits(const Model& model, const std::vector<int32_t>& tokens) {
  SequenceState state = model.new_state();
  return test::prefill(model, ComputeContext{1, best_isa()}, tokens, state, {OutputKind::LogitsAll, 0});
}

void expect_same_lfm2_config(const ModelConfig& got, const ModelConfig& want) {
  EXPECT_EQ(got.family, want.family);
  EXPECT_EQ(got.d_model, want.d_model);
  EXPECT_EQ(got.n_layer, want.n_layer);
  EXPECT_EQ(got.vocab_size, want.vocab_rows);
  EXPECT_EQ(got.norm_eps, want.norm_eps);
  EXPECT_EQ(got.tie_embeddings, want.tie_embeddings);
  EXPECT_EQ(got.hybrid.pattern, want.hybrid.pattern);
  EXPECT_EQ(got.hybrid.attention.n_heads, want.hybrid.attention.n_heads);
  EXPECT_EQ(got.hybrid.attention.n_kv_heads, want.hybrid.attention.n_kv_heads);
  EXPECT_EQ(got.hybrid.attention.head_dim, want.hybrid.attention.head_dim);
  EXPECT_EQ(static_cast<float>(got.hybrid.attention.rope_theta),
            static_cast<float>(want.hybrid.attention.rope_theta));
  EXPECT_EQ(got.hybrid.mlp.width, want.hybrid.mlp.width);
  EXPECT_EQ(got.lfm2.conv_kernel, want.lfm2.conv_kernel);
  EXPECT_EQ(got.lfm2.n_dense_layers, want.lfm2.n_dense_layers);
  EXPECT_EQ(got.lfm2.expert_bias, want.lfm2.expert_bias);
  const MoeConfig &a = got.hybrid.moe, &b = want.hybrid.moe;
  EXPECT_EQ(a.n_experts, b.n_experts);
  EXPECT_EQ(a.top_k, b.top_k);
  EXPECT_EQ(a.width, b.width);
  EXPECT_EQ(a.scoring, b.scoring);
  EXPECT_EQ(a.normalize, b.normalize);
  EXPECT_EQ(static_cast<float>(a.scale), static_cast<float>(b.scale));
}

void expect_same_lfm2_tensors(const std::string& a_path, const std::string& b_path) {
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

TEST(Lfm2Gguf, OurF32FileOfTheGoldenGivesLlamaCppsLogitsAndTheFoldersBits) {
  const std::string golden = std::string(MB_TEST_DATA_DIR) + "/goldens/lfm2-dense";
  const std::string dir = test::make_temp_dir("gguf_golden_lfm2");
  const std::string path = dir + "/model.gguf";
  write_gguf_checkpoint(path, load_model_config(golden), TensorSet::open_dir(golden),
                        {GgufFileType::F32, "lfm2-dense", {}});
  const auto folder = Model::load(golden);
  const auto gguf = Model::load(path);
  expect_same_lfm2_config(gguf->config(), folder->config());
  std::vector<int64_t> shape;
  const std::vector<float> want = read_npy_f32(golden + "/logits.npy", shape);
  std::vector<int32_t> tokens;
  for (std::string text = read_text_file(golden + "/tokens.txt"); !text.empty();) {
    const size_t end = text.find_first_of(" ,\n");
    if (end != 0) tokens.push_back(std::stoi(text.substr(0, end)));
    text = end == std::string::npos ? "" : text.substr(end + 1);
  }
  ASSERT_EQ(static_cast<int64_t>(tokens.size()), shape[0]);
  const std::vector<float> got = lfm2_logits(*gguf, tokens);
  ASSERT_EQ(got.size(), want.size());
  EXPECT_LE(test::max_abs_diff(got, want), 1e-5 * test::max_abs(want));
  // The same weights and math: the same bits as the folder.
  EXPECT_TRUE(test::same_bits(got, lfm2_logits(*folder, tokens)));
}

// Sizes whose rows are whole blocks of every quantized type (32).
ModelConfig lfm2_for_gguf(bool moe) {
  ModelConfig c;
  c.family = moe ? ModelFamily::Lfm2Moe : ModelFamily::Lfm2;
  c.arch = Architecture::Mamba2;
  c.d_model = 64;
  c.n_layer = 4;
  c.vocab_size = 131;
  c.tie_embeddings = true;
  c.hybrid.pattern = "C*CC";
  c.hybrid.attention = {4, 2, 16, 0.25, false, 1e6};
  c.hybrid.mlp = {64, Activation::SwiGlu, false};
  c.lfm2.block_ff_dim = 64;
  c.lfm2.auto_adjust_ff_dim = false;
  c.lfm2.multiple_of = 1;
  if (moe) {
    c.lfm2.n_dense_layers = 2;
    c.hybrid.moe = {4, 2, 32, 0, MoeScoring::SigmoidBias, true, 1.0};
  }
  return c;
}

struct Lfm2TypeCase {
  std::string name;
  bool moe;
  GgufFileType type;
};

std::vector<Lfm2TypeCase> lfm2_type_cases() {
  std::vector<Lfm2TypeCase> cases;
  for (const bool moe : {false, true})
    for (const auto& [type_name, type] : {std::pair{"f32", GgufFileType::F32},
                                          {"f16", GgufFileType::F16},
                                          {"bf16", GgufFileType::BF16},
                                          {"q8_0", GgufFileType::Q8_0},
                                          {"q4_0", GgufFileType::Q4_0}})
      cases.push_back({std::string(moe ? "lfm2_moe_" : "lfm2_") + type_name, moe, type});
  return cases;
}

class Lfm2GgufTypes : public ::testing::TestWithParam<Lfm2TypeCase> {};

TEST_P(Lfm2GgufTypes, TheFileHoldsTheFoldersConfigAndWeights) {
  const Lfm2TypeCase& p = GetParam();
  const std::optional<DType> load_dtype = p.type == GgufFileType::Q8_0   ? std::optional(DType::Q8_0)
                                          : p.type == GgufFileType::Q4_0 ? std::optional(DType::Q4_0)
                                                                         : std::nullopt;
  MakeModelOptions o;
  o.config = lfm2_for_gguf(p.moe);
  o.dtype = p.type == GgufFileType::F16    ? DType::F16
            : p.type == GgufFileType::BF16 ? DType::BF16
                                           : DType::F32;
  o.seed = 51;
  const std::string dir = test::write_model(o, "gguf_" + p.name);
  const std::string path = lfm2_write_gguf(dir, p.type);
  LoadOptions load;
  load.weight_dtype = load_dtype;
  const auto folder = Model::load(dir, load);
  const auto gguf = Model::load(path);
  expect_same_lfm2_config(gguf->config(), folder->config());
  if (load_dtype) EXPECT_EQ(gguf->matrix_dtype(), *load_dtype);
  const auto tokens = test::random_tokens(11, 131, 5);
  EXPECT_TRUE(test::same_bits(lfm2_logits(*gguf, tokens), lfm2_logits(*folder, tokens)));
  const std::string again = dir + "/again.gguf";
  const GgufCheckpoint checkpoint = open_gguf_checkpoint(path);
  write_gguf_checkpoint(again, checkpoint.config, *checkpoint.tensors, {p.type, "test", {}});
  expect_same_lfm2_tensors(path, again);
}

INSTANTIATE_TEST_SUITE_P(Files, Lfm2GgufTypes, ::testing::ValuesIn(lfm2_type_cases()),
                         [](const auto& info) { return info.param.name; });

TEST(Lfm2Gguf, TheTensorsAndKeysAreNamedAsLlamaCppsConverterWritesThem) {
  MakeModelOptions o;
  o.config = lfm2_for_gguf(true);
  const std::string dir = test::write_model(o, "gguf_lfm2_names");
  const GgufFile file(lfm2_write_gguf(dir, GgufFileType::F32));
  EXPECT_EQ(file.string_value("general.architecture"), "lfm2moe");
  ASSERT_NE(file.find("lfm2moe.attention.head_count_kv"), nullptr);
  EXPECT_EQ(file.find("lfm2moe.attention.head_count_kv")->integers, (std::vector<int64_t>{0, 2, 0, 0}));
  EXPECT_EQ(file.unsigned_value("lfm2moe.shortconv.l_cache"), 3u);
  EXPECT_EQ(file.unsigned_value("lfm2moe.feed_forward_length"), 64u);
  EXPECT_EQ(file.unsigned_value("lfm2moe.expert_feed_forward_length"), 32u);
  EXPECT_EQ(file.unsigned_value("lfm2moe.leading_dense_block_count"), 2u);
  EXPECT_EQ(file.unsigned_value("lfm2moe.expert_gating_func"), 2u);
  // The short conv's taps squeezed to {L, d}; the final norm under token_embd_norm; tied.
  const GgufTensorInfo* conv = file.find_tensor("blk.0.shortconv.conv.weight");
  ASSERT_NE(conv, nullptr);
  EXPECT_EQ(conv->ne, (std::vector<int64_t>{3, 64}));
  for (const char* name :
       {"blk.0.shortconv.in_proj.weight", "blk.0.shortconv.out_proj.weight", "blk.1.attn_q_norm.weight",
        "blk.1.attn_k_norm.weight", "blk.1.attn_output.weight", "blk.1.ffn_gate.weight",
        "blk.2.ffn_gate_exps.weight", "blk.2.ffn_up_exps.weight", "blk.2.ffn_down_exps.weight",
        "blk.2.ffn_gate_inp.weight", "blk.2.exp_probs_b.bias", "token_embd_norm.weight"})
    EXPECT_NE(file.find_tensor(name), nullptr) << name;
  for (const char* absent : {"output.weight", "output_norm.weight", "blk.2.ffn_gate.weight"})
    EXPECT_EQ(file.find_tensor(absent), nullptr) << absent;
  // q is not reordered (NeoX RoPE).
  const TensorSet folder = TensorSet::open_dir(dir);
  const StoredTensor& q = *folder.find("model.layers.1.self_attn.q_proj.weight");
  const GgufTensorInfo* gq = file.find_tensor("blk.1.attn_q.weight");
  ASSERT_NE(gq, nullptr);
  EXPECT_EQ(std::memcmp(gq->data, q.data, gq->byte_size), 0);
}

// Q4_K_M: rows of 256 (whole Q4_K blocks) wherever a matrix's rows have d_model or an FFN width.
TEST(Lfm2Gguf, Q4KMFilesHoldTheF32FilesValuesQuantizedAndKeepTheExactnessContract) {
  for (const bool moe : {false, true}) {
    SCOPED_TRACE(moe ? "lfm2moe" : "lfm2");
    MakeModelOptions o;
    o.config = lfm2_for_gguf(moe);
    ModelConfig& c = o.config;
    c.d_model = 256;
    c.vocab_size = 300;
    c.hybrid.pattern = "C*C";
    c.n_layer = 3;
    c.hybrid.attention = {4, 2, 64, 0.125, false, 1e6};
    c.hybrid.mlp.width = c.lfm2.block_ff_dim = 256;
    if (moe) {
      c.lfm2.n_dense_layers = 1;
      c.hybrid.moe.width = 256;
    }
    o.seed = 61;
    const std::string dir = test::write_model(o, moe ? "gguf_lfm2moe_q4km" : "gguf_lfm2_q4km");
    const std::string f32_path = lfm2_write_gguf(dir, GgufFileType::F32, "f32");
    const std::string q4km_path = lfm2_write_gguf(dir, GgufFileType::Q4_K_M, "q4km");
    const GgufFile f32(f32_path), q4km(q4km_path);
    EXPECT_EQ(q4km.find_tensor("blk.0.shortconv.conv.weight")->type, kGgmlF32);
    EXPECT_EQ(q4km.find_tensor("blk.0.shortconv.in_proj.weight")->type, kGgmlQ4_K);
    EXPECT_EQ(q4km.find_tensor("token_embd.weight")->type, kGgmlQ6_K);  // tied: the LM head
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
        quantize_row(type, reinterpret_cast<const float*>(a.data) + r * row, row,
                     want.data() + r * row_bytes);
      ASSERT_EQ(want.size(), b.byte_size) << b.name;
      EXPECT_EQ(std::memcmp(want.data(), b.data, b.byte_size), 0) << b.name;
      quantized += dtype_is_quantized(type);
    }
    EXPECT_GT(quantized, 8);
    const auto model = Model::load(q4km_path);
    test::expect_prefill_equals_steps_for_every_length(*model, 20);
    std::vector<std::vector<int32_t>> prompts;
    for (size_t length : {1, 9, 20, 4}) prompts.push_back(test::random_tokens(length, 300, 70 + length));
    test::expect_batch_equals_each_alone(*model, prompts, {OutputKind::LogitsAll}, {0, 5});
  }
}

// A copy of `path` with metadata `key` replaced (or removed, for nullopt).
std::string lfm2_with_key(const std::string& path, const std::string& key, std::optional<GgufValue> value,
                          const std::string& tag) {
  const GgufFile file(path);
  GgufWriter writer;
  bool seen = false;
  for (const auto& [k, v] : file.metadata()) {
    if (k != key) {
      writer.set(k, v);
    } else {
      seen = true;
      if (value) writer.set(k, *value);
    }
  }
  if (!seen && value) writer.set(key, *value);
  for (const GgufTensorInfo& t : file.tensors())
    writer.add_tensor(t.name, t.ne, t.type, std::vector<uint8_t>(t.data, t.data + t.byte_size));
  const std::string out = path + "." + tag + ".bad.gguf";
  writer.write(out);
  return out;
}

TEST(Lfm2Gguf, MalformedMetadataIsRefusedNamingTheKey) {
  MakeModelOptions o;
  o.config = lfm2_for_gguf(true);
  const std::string dir = test::write_model(o, "gguf_lfm2_malformed");
  const std::string good = lfm2_write_gguf(dir, GgufFileType::F32);
  ASSERT_NO_THROW(Model::load(good));
  const auto i32s = [](std::vector<int64_t> v) {
    return GgufValue::integer_array(GgufType::Int32, std::move(v));
  };
  const std::vector<std::tuple<std::string, std::optional<GgufValue>, std::string>> cases = {
      {"lfm2moe.attention.head_count_kv", std::nullopt, "lfm2moe.attention.head_count_kv"},
      {"lfm2moe.attention.head_count_kv", i32s({0, 2, 0}), "lfm2moe.attention.head_count_kv"},
      {"lfm2moe.attention.head_count_kv", i32s({0, 2, -1, 0}), "lfm2moe.attention.head_count_kv"},
      {"lfm2moe.attention.head_count_kv", i32s({0, 2, 0, 0}), ""},
      // The attention layer's tensors in what the metadata calls a conv layer.
      {"lfm2moe.attention.head_count_kv", i32s({0, 0, 0, 0}),
       "tensor 'blk.1.attn_q.weight' is not part of a lfm2moe model (layer 1 is a short-convolution layer"},
      {"lfm2moe.expert_gating_func", GgufValue::u32(1), "lfm2moe.expert_gating_func"},
      {"lfm2moe.shortconv.l_cache", GgufValue::u32(99), "conv_L_cache"},
      {"lfm2moe.expert_used_count", GgufValue::u32(9), "num_experts_per_tok"},
      {"lfm2moe.attention.head_count", std::nullopt, "num_attention_heads"},
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    const auto& [key, value, expected] = cases[i];
    const std::string path = lfm2_with_key(good, key, value, std::to_string(i));
    if (expected.empty()) {
      EXPECT_NO_THROW(Model::load(path)) << key;
      continue;
    }
    const std::string message = test::error_of([&] { Model::load(path); });
    EXPECT_NE(message.find(expected), std::string::npos) << key << ": " << message;
  }
}

}  // namespace
}  // namespace mb
