// SPDX-License-Identifier: MIT
// Zamba2's GGUF files (our own layout: llama.cpp has no Zamba2; README "Zamba2 GGUF files")
// against the folders they are written from: every file type holds the folder's config and
// weights (the logits bit for bit where A = -1 exactly, as gguf_hybrid_test.cc checks the other
// hybrids; quantized files equal to the folder loaded in that type), the shared blocks' tensors
// are written once, a re-written file keeps every byte, and malformed metadata is refused naming
// the key.
#include <gtest/gtest.h>

#include <cstring>

#include "common/model_fixture.h"
#include "common/test_util.h"
#include "common/zamba2_config.h"
#include "core/error.h"
#include "io/gguf.h"
#include "model/gguf_checkpoint.h"
#include "model/gguf_tensor_names.h"
#include "ops/quant.h"

namespace mb {
namespace {

std::string zamba2_gguf(const std::string& dir, GgufFileType type, const std::string& name = "model") {
  const std::string path = dir + "/" + name + ".gguf";
  write_gguf_checkpoint(path, load_model_config(dir), TensorSet::open_dir(dir), {type, "test", {}});
  return path;
}

std::vector<float> zamba2_logits(const Model& model, const std::vector<int32_t>& tokens) {
  SequenceState state = model.new_state();
  return test::prefill(model, ComputeContext{1, best_isa()}, tokens, state, {OutputKind::LogitsAll, 0});
}

// Two shared blocks used in turn, attention adapters and RoPE; sizes multiples of 32, so the
// quantized types apply to the matrices (the rank-8 adapters' up products stay as the folder
// loads them).
ModelConfig zamba2_gguf_config() {
  return test::zamba2_config({{"layers_block_type", {"mamba", "hybrid", "mamba", "hybrid", "hybrid"}}}, 64, 5,
                             131);
}

struct Zamba2GgufCase {
  std::string name;
  GgufFileType type;
  DType folder_dtype;
  std::optional<DType> load_dtype;
};

class Zamba2GgufTypes : public ::testing::TestWithParam<Zamba2GgufCase> {};

TEST_P(Zamba2GgufTypes, TheFileHoldsTheFoldersConfigAndWeights) {
  const Zamba2GgufCase& p = GetParam();
  MakeModelOptions o;
  o.config = zamba2_gguf_config();
  o.dtype = p.folder_dtype;
  o.seed = 41;
  const std::string dir = test::write_model(o, "zamba2_gguf_" + p.name);
  test::zero_a_log(dir);
  const std::string path = zamba2_gguf(dir, p.type);
  LoadOptions load;
  load.weight_dtype = p.load_dtype;
  const auto folder = Model::load(dir, load);
  const auto gguf = Model::load(path);
  const ModelConfig &got = gguf->config(), &want = folder->config();
  EXPECT_EQ(got.family, ModelFamily::Zamba2);
  EXPECT_EQ(got.zamba2.hybrid_layers, want.zamba2.hybrid_layers);
  EXPECT_EQ(got.zamba2.mem_blocks, want.zamba2.mem_blocks);
  EXPECT_EQ(got.zamba2.head_dim, want.zamba2.head_dim);
  EXPECT_EQ(got.zamba2.adapter_rank, want.zamba2.adapter_rank);
  EXPECT_EQ(got.zamba2.attention_adapter, want.zamba2.attention_adapter);
  EXPECT_EQ(got.zamba2.mem_rope, want.zamba2.mem_rope);
  EXPECT_EQ(got.ssm.headdim, want.ssm.headdim);
  EXPECT_EQ(got.norm_eps, want.norm_eps);
  if (p.load_dtype) {
    EXPECT_EQ(gguf->matrix_dtype(), *p.load_dtype);
  }
  const auto tokens = test::random_tokens(13, o.config.vocab_size, 5);
  EXPECT_TRUE(test::same_bits(zamba2_logits(*gguf, tokens), zamba2_logits(*folder, tokens)));
  // Written back as read.
  const std::string again = dir + "/again.gguf";
  const GgufCheckpoint checkpoint = open_gguf_checkpoint(path);
  write_gguf_checkpoint(again, checkpoint.config, *checkpoint.tensors, {p.type, "test", {}});
  const GgufFile a(path), b(again);
  ASSERT_EQ(a.tensors().size(), b.tensors().size());
  for (size_t i = 0; i < a.tensors().size(); ++i) {
    EXPECT_EQ(a.tensors()[i].name, b.tensors()[i].name);
    EXPECT_EQ(a.tensors()[i].type, b.tensors()[i].type) << a.tensors()[i].name;
    ASSERT_EQ(a.tensors()[i].byte_size, b.tensors()[i].byte_size) << a.tensors()[i].name;
    EXPECT_EQ(0, std::memcmp(a.tensors()[i].data, b.tensors()[i].data, a.tensors()[i].byte_size))
        << a.tensors()[i].name;
  }
}

INSTANTIATE_TEST_SUITE_P(
    Files, Zamba2GgufTypes,
    ::testing::Values(Zamba2GgufCase{"f32", GgufFileType::F32, DType::F32, std::nullopt},
                      Zamba2GgufCase{"f16", GgufFileType::F16, DType::F16, std::nullopt},
                      Zamba2GgufCase{"bf16", GgufFileType::BF16, DType::BF16, std::nullopt},
                      Zamba2GgufCase{"q8_0", GgufFileType::Q8_0, DType::F32, DType::Q8_0},
                      Zamba2GgufCase{"q4_0", GgufFileType::Q4_0, DType::F32, DType::Q4_0}),
    [](const auto& info) { return info.param.name; });

// Q4_K_M: rows of 256 (whole Q4_K blocks) wherever a matrix reads d_model, the MLP width or the
// Mamba width; each tensor in the type gguf_export.cc's recipe gives it (the rank-8 adapters' up
// products cannot be Q4_K) and holding exactly the f32 file's values quantized to that type; the
// exactness contract on the model loaded from it.
TEST(Zamba2Gguf, Q4KMFilesHoldTheF32FilesValuesQuantizedAndStayExact) {
  MakeModelOptions o;
  o.config = test::zamba2_config({{"layers_block_type", {"mamba", "hybrid", "hybrid"}},
                                  {"intermediate_size", 256},
                                  {"n_mamba_heads", 8}},
                                 256, 3, 300);
  o.seed = 44;
  const std::string dir = test::write_model(o, "zamba2_gguf_q4km");
  const std::string f32_path = zamba2_gguf(dir, GgufFileType::F32, "f32");
  const std::string q4km_path = zamba2_gguf(dir, GgufFileType::Q4_K_M, "q4km");
  const GgufFile f32(f32_path), q4km(q4km_path);
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
  const auto model = Model::load(q4km_path);
  test::expect_prefill_equals_steps_for_every_length(*model, 12);
  test::expect_threads_rounds_and_isas_change_no_bit(*model, test::random_tokens(20, 300, 4), {0, 7});
}

TEST(Zamba2Gguf, SharedBlocksAreWrittenOnceUnderTheirFirstUse) {
  MakeModelOptions o;
  o.config = zamba2_gguf_config();
  o.seed = 42;
  const std::string dir = test::write_model(o, "zamba2_gguf_names");
  const GgufFile file(zamba2_gguf(dir, GgufFileType::F32));
  EXPECT_EQ(file.string_value("general.architecture"), "zamba2");
  const GgufValue* ids = file.find("zamba2.hybrid_layer_ids");
  ASSERT_NE(ids, nullptr);
  EXPECT_EQ(ids->integers, (std::vector<int64_t>{1, 3, 4}));
  EXPECT_EQ(file.unsigned_value("zamba2.shared_block_count"), 2u);
  // Block 0 (uses 0 and 2: layers 1 and 4) under layer 1, block 1 under layer 3.
  EXPECT_NE(file.find_tensor("blk.1.shared_attn_q.weight"), nullptr);
  EXPECT_NE(file.find_tensor("blk.3.shared_attn_q.weight"), nullptr);
  EXPECT_EQ(file.find_tensor("blk.4.shared_attn_q.weight"), nullptr);
  // Each use's adapters and linear under its own layer.
  EXPECT_NE(file.find_tensor("blk.4.attn_q_lora_a.weight"), nullptr);
  EXPECT_NE(file.find_tensor("blk.4.ffn_gate_up_lora_b.weight"), nullptr);
  EXPECT_NE(file.find_tensor("blk.4.hybrid_linear.weight"), nullptr);
  EXPECT_NE(file.find_tensor("blk.4.ssm_in.weight"), nullptr);
}

// The file at `path` with metadata `key` set to `value` (or removed when value is null).
std::string zamba2_with_metadata(const std::string& path, const std::string& out, const std::string& key,
                                 const std::optional<GgufValue>& value) {
  const GgufFile file(path);
  GgufWriter writer;
  for (const auto& [k, v] : file.metadata())
    if (k != key) writer.set(k, v);
  if (value) writer.set(key, *value);
  for (const GgufTensorInfo& t : file.tensors())
    writer.add_tensor(t.name, t.ne, t.type, std::vector<uint8_t>(t.data, t.data + t.byte_size));
  writer.write(out);
  return out;
}

TEST(Zamba2Gguf, MalformedMetadataIsRefusedNamingTheKey) {
  MakeModelOptions o;
  o.config = zamba2_gguf_config();
  o.seed = 43;
  const std::string dir = test::write_model(o, "zamba2_gguf_bad");
  const std::string good = zamba2_gguf(dir, GgufFileType::F32);
  // A value the sizes refuse is named by the config key it stands for, as in a folder.
  const auto refused = [&](const std::string& key, const std::optional<GgufValue>& value,
                           const std::string& named = "") {
    const std::string path = zamba2_with_metadata(good, dir + "/bad.gguf", key, value);
    const std::string message = test::error_of([&] { Model::load(path); });
    EXPECT_NE(message.find(named.empty() ? key : named), std::string::npos) << key << ": " << message;
  };
  refused("zamba2.hybrid_layer_ids", std::nullopt);
  refused("zamba2.hybrid_layer_ids", GgufValue::integer_array(GgufType::Uint32, {3, 1}));
  refused("zamba2.hybrid_layer_ids", GgufValue::integer_array(GgufType::Uint32, {1, 5}));
  refused("zamba2.hybrid_layer_ids", GgufValue::u32(1));
  refused("zamba2.attention.head_count_kv", GgufValue::u32(2), "num_key_value_heads");
  refused("zamba2.attention.head_count", GgufValue::string("four"));
  refused("zamba2.ssm.time_step_rank", GgufValue::u32(7), "n_mamba_heads");

  // A second copy of a shared block's tensor under another layer is no tensor of the model.
  const GgufFile file(good);
  GgufWriter writer;
  for (const auto& [k, v] : file.metadata()) writer.set(k, v);
  for (const GgufTensorInfo& t : file.tensors()) {
    const std::vector<uint8_t> bytes(t.data, t.data + t.byte_size);
    writer.add_tensor(t.name, t.ne, t.type, bytes);
    if (t.name == "blk.1.shared_attn_q.weight")
      writer.add_tensor("blk.2.shared_attn_q.weight", t.ne, t.type, bytes);
  }
  writer.write(dir + "/extra.gguf");
  const std::string message = test::error_of([&] { Model::load(dir + "/extra.gguf"); });
  EXPECT_NE(message.find("blk.2.shared_attn_q.weight"), std::string::npos) << message;
}

}  // namespace
}  // namespace mb
