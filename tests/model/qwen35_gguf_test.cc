// SPDX-License-Identifier: MIT
// Qwen3.5 GGUF files (llama.cpp's qwen35): the golden folder written as an f32 file gives llama.cpp's
// logits; the value heads are written in the converter's tiled order (the op then reads key head
// h % nk) and the norms as 1 + w, A as -exp(A_log); every file type holds the same weights as the f32
// file loaded in that dtype (bit for bit), and with as many key heads as value heads (nothing
// reordered) the folder's own bits; a re-written file keeps every byte; the MTP block the converter
// appends is skipped; malformed metadata is refused naming the key.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <nlohmann/json.hpp>

#include "common/model_fixture.h"
#include "common/test_util.h"
#include "core/error.h"
#include "io/gguf.h"
#include "io/npy.h"
#include "model/family.h"
#include "model/gguf_checkpoint.h"
#include "model/gguf_tensor_names.h"

namespace mb {
namespace qwen35_gguf_test {
namespace {

using nlohmann::json;

std::string write_gguf(const std::string& dir, GgufFileType type, const std::string& name = "model") {
  const std::string path = dir + "/" + name + ".gguf";
  write_gguf_checkpoint(path, load_model_config(dir), TensorSet::open_dir(dir), {type, "test", {}});
  return path;
}

std::vector<float> logits_of(const Model& model, const std::vector<int32_t>& tokens) {
  SequenceState state = model.new_state();
  return test::prefill(model, ComputeContext{1, best_isa()}, tokens, state, {OutputKind::LogitsAll, 0});
}

// make-model's example with `nk` key heads and 4 value heads of 16, attention every 4th layer.
ModelConfig config_for_gguf(int64_t nk) {
  json hf = family_by_name("qwen3.5")->example(64, 4, 131);
  hf["linear_num_key_heads"] = nk;
  return parse_model_config(hf, "qwen3.5 gguf test");
}

void expect_same_bytes(const std::string& a_path, const std::string& b_path) {
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

TEST(Qwen35Gguf, OurF32FileOfTheGoldenGivesLlamaCppsLogits) {
  const std::string golden = std::string(MB_TEST_DATA_DIR) + "/goldens/qwen3.5-dense";
  const std::string dir = test::make_temp_dir("gguf_golden_qwen35");
  const std::string path = dir + "/model.gguf";
  write_gguf_checkpoint(path, load_model_config(golden), TensorSet::open_dir(golden),
                        {GgufFileType::F32, "qwen3.5-dense", {}});
  const auto gguf = Model::load(path);
  EXPECT_TRUE(gguf->config().qwen35.tiled_heads);
  EXPECT_EQ(gguf->config().n_layer, 8);
  std::vector<int64_t> shape;
  const std::vector<float> want = read_npy_f32(golden + "/logits.npy", shape);
  std::vector<int32_t> tokens;
  for (std::string text = read_text_file(golden + "/tokens.txt"); !text.empty();) {
    const size_t end = text.find_first_of(" ,\n");
    if (end != 0) tokens.push_back(std::stoi(text.substr(0, end)));
    text = end == std::string::npos ? "" : text.substr(end + 1);
  }
  ASSERT_EQ(static_cast<int64_t>(tokens.size()), shape[0]);
  const std::vector<float> got = logits_of(*gguf, tokens);
  ASSERT_EQ(got.size(), want.size());
  // The golden README's tolerance (llama.cpp's L2 norm differs from HF's, which we follow).
  EXPECT_LE(test::max_abs_diff(got, want), 2e-5 * test::max_abs(want));
  SequenceState stepped = gguf->new_state();
  EXPECT_TRUE(test::same_bits(test::step_logits(*gguf, ComputeContext{1, best_isa()}, tokens, stepped), got));
}

struct Qwen35TypeCase {
  std::string name;
  GgufFileType type;
  DType make_dtype;
  std::optional<DType> load_dtype;
};

class Qwen35GgufTypes : public ::testing::TestWithParam<Qwen35TypeCase> {};

TEST_P(Qwen35GgufTypes, TheFileHoldsTheF32FilesWeightsInItsType) {
  const Qwen35TypeCase& p = GetParam();
  for (const int64_t nk : {2, 4}) {
    SCOPED_TRACE("key heads " + std::to_string(nk));
    MakeModelOptions o;
    o.config = config_for_gguf(nk);
    o.dtype = p.make_dtype;
    o.seed = 71;
    const std::string dir = test::write_model(o, "gguf_qwen35_" + p.name + std::to_string(nk));
    const std::string path = write_gguf(dir, p.type);
    LoadOptions load;
    load.weight_dtype = p.load_dtype;
    const auto gguf = Model::load(path);
    const auto f32 = Model::load(write_gguf(dir, GgufFileType::F32, "f32"), load);
    const auto tokens = test::random_tokens(11, 131, 5);
    const std::vector<float> got = logits_of(*gguf, tokens);
    EXPECT_TRUE(test::same_bits(got, logits_of(*f32, tokens)));
    if (nk == 4) {
      // Nothing reordered: the folder's bits.
      const auto folder = Model::load(dir, load);
      EXPECT_TRUE(test::same_bits(got, logits_of(*folder, tokens)));
    }
    const std::string again = dir + "/again.gguf";
    const GgufCheckpoint checkpoint = open_gguf_checkpoint(path);
    write_gguf_checkpoint(again, checkpoint.config, *checkpoint.tensors, {p.type, "test", {}});
    expect_same_bytes(path, again);
  }
}

INSTANTIATE_TEST_SUITE_P(
    Files, Qwen35GgufTypes,
    ::testing::Values(Qwen35TypeCase{"f32", GgufFileType::F32, DType::F32, std::nullopt},
                      Qwen35TypeCase{"bf16", GgufFileType::BF16, DType::BF16, DType::BF16},
                      Qwen35TypeCase{"q8_0", GgufFileType::Q8_0, DType::F32, DType::Q8_0},
                      Qwen35TypeCase{"q4_0", GgufFileType::Q4_0, DType::F32, DType::Q4_0}),
    [](const auto& info) { return info.param.name; });

TEST(Qwen35Gguf, TheTensorsAndKeysAreWrittenAsLlamaCppsConverterWritesThem) {
  MakeModelOptions o;
  o.config = config_for_gguf(2);
  const std::string dir = test::write_model(o, "gguf_qwen35_names");
  const GgufFile file(write_gguf(dir, GgufFileType::F32));
  EXPECT_EQ(file.string_value("general.architecture"), "qwen35");
  EXPECT_EQ(file.unsigned_value("qwen35.block_count"), 4u);
  EXPECT_EQ(file.unsigned_value("qwen35.nextn_predict_layers"), 0u);
  EXPECT_EQ(file.unsigned_value("qwen35.full_attention_interval"), 4u);
  EXPECT_EQ(file.unsigned_value("qwen35.ssm.group_count"), 2u);
  EXPECT_EQ(file.unsigned_value("qwen35.ssm.time_step_rank"), 4u);
  EXPECT_EQ(file.unsigned_value("qwen35.ssm.state_size"), 16u);
  EXPECT_EQ(file.unsigned_value("qwen35.ssm.inner_size"), 64u);
  EXPECT_EQ(file.unsigned_value("qwen35.ssm.conv_kernel"), 4u);
  EXPECT_EQ(file.unsigned_value("qwen35.rope.dimension_count"), 4u);
  EXPECT_EQ(file.unsigned_value("qwen35.attention.key_length"), 16u);
  const GgufTensorInfo* conv = file.find_tensor("blk.0.ssm_conv1d.weight");
  ASSERT_NE(conv, nullptr);
  EXPECT_EQ(conv->ne, (std::vector<int64_t>{4, 128}));
  for (const char* name :
       {"blk.0.attn_qkv.weight", "blk.0.attn_gate.weight", "blk.0.ssm_beta.weight", "blk.0.ssm_alpha.weight",
        "blk.0.ssm_dt.bias", "blk.0.ssm_a", "blk.0.ssm_norm.weight", "blk.0.ssm_out.weight",
        "blk.0.post_attention_norm.weight", "blk.3.attn_q.weight", "blk.3.attn_q_norm.weight",
        "blk.3.attn_output.weight", "output_norm.weight", "output.weight"})
    EXPECT_NE(file.find_tensor(name), nullptr) << name;
  // Norms as 1 + w (the gated norm's plain w as it is); A = -exp(A_log); value heads tiled: new
  // head j nk + g holds grouped head g r + j (nk 2, r 2: 0, 2, 1, 3).
  const TensorSet folder = TensorSet::open_dir(dir);
  const auto floats = [](const void* data, size_t i) { return reinterpret_cast<const float*>(data)[i]; };
  const StoredTensor& norm = *folder.find("model.layers.0.input_layernorm.weight");
  EXPECT_EQ(floats(file.find_tensor("blk.0.attn_norm.weight")->data, 5), 1.0f + floats(norm.data, 5));
  const StoredTensor& gate_norm = *folder.find("model.layers.0.linear_attn.norm.weight");
  EXPECT_EQ(floats(file.find_tensor("blk.0.ssm_norm.weight")->data, 5), floats(gate_norm.data, 5));
  const StoredTensor& a_log = *folder.find("model.layers.0.linear_attn.A_log");
  const StoredTensor& dt_bias = *folder.find("model.layers.0.linear_attn.dt_bias");
  const int64_t order[] = {0, 2, 1, 3};
  for (int64_t h = 0; h < 4; ++h) {
    EXPECT_EQ(floats(file.find_tensor("blk.0.ssm_a")->data, h),
              static_cast<float>(-std::exp(static_cast<double>(floats(a_log.data, order[h])))));
    EXPECT_EQ(floats(file.find_tensor("blk.0.ssm_dt.bias")->data, h), floats(dt_bias.data, order[h]));
  }
  // The out_proj columns of value head 1 are the folder's head 2's.
  const StoredTensor& out = *folder.find("model.layers.0.linear_attn.out_proj.weight");
  EXPECT_EQ(std::memcmp(reinterpret_cast<const float*>(file.find_tensor("blk.0.ssm_out.weight")->data) + 16,
                        reinterpret_cast<const float*>(out.data) + 32, 16 * sizeof(float)),
            0);
}

// A copy of `path` with metadata `key` replaced (or removed, for nullopt), and with `extra`
// tensors (name, source tensor) appended.
std::string qwen35_with(const std::string& path, const std::string& key, std::optional<GgufValue> value,
                        const std::string& tag,
                        const std::vector<std::pair<std::string, std::string>>& extra = {}) {
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
  for (const auto& [name, source] : extra) {
    const GgufTensorInfo& t = *file.find_tensor(source);
    writer.add_tensor(name, t.ne, t.type, std::vector<uint8_t>(t.data, t.data + t.byte_size));
  }
  const std::string out = path + "." + tag + ".edited.gguf";
  writer.write(out);
  return out;
}

TEST(Qwen35Gguf, TheMtpBlockTheConverterAppendsIsSkipped) {
  MakeModelOptions o;
  o.config = config_for_gguf(2);
  const std::string dir = test::write_model(o, "gguf_qwen35_mtp");
  const std::string good = write_gguf(dir, GgufFileType::F32);
  // Block 4 of 5: an attention layer's tensors and the MTP head's own, as llama.cpp's converter
  // writes them (block_count 5, nextn_predict_layers 1).
  const std::string with_mtp =
      qwen35_with(qwen35_with(good, "qwen35.block_count", GgufValue::u32(5), "blocks"),
                  "qwen35.nextn_predict_layers", GgufValue::u32(1), "mtp",
                  {{"blk.4.attn_q.weight", "blk.3.attn_q.weight"},
                   {"blk.4.attn_norm.weight", "blk.3.attn_norm.weight"},
                   {"blk.4.nextn.enorm.weight", "output_norm.weight"},
                   {"blk.4.nextn.eh_proj.weight", "blk.3.attn_output.weight"}});
  const auto a = Model::load(good);
  const auto b = Model::load(with_mtp);
  EXPECT_EQ(b->config().n_layer, 4);
  const auto tokens = test::random_tokens(9, 131, 6);
  EXPECT_TRUE(test::same_bits(logits_of(*a, tokens), logits_of(*b, tokens)));
}

TEST(Qwen35Gguf, MalformedMetadataIsRefusedNamingTheKey) {
  MakeModelOptions o;
  o.config = config_for_gguf(2);
  const std::string dir = test::write_model(o, "gguf_qwen35_malformed");
  const std::string good = write_gguf(dir, GgufFileType::F32);
  ASSERT_NO_THROW(Model::load(good));
  const std::vector<std::tuple<std::string, std::optional<GgufValue>, std::string>> cases = {
      {"qwen35.ssm.inner_size", GgufValue::u32(63), "qwen35.ssm.inner_size"},
      {"qwen35.ssm.inner_size", std::nullopt, "qwen35.ssm.inner_size"},
      {"qwen35.rope.dimension_count", GgufValue::u32(3), "qwen35.rope.dimension_count"},
      {"qwen35.nextn_predict_layers", GgufValue::u32(4), "qwen35.nextn_predict_layers"},
      {"qwen35.attention.value_length", GgufValue::u32(8), "qwen35.attention.value_length"},
      {"qwen35.ssm.group_count", GgufValue::u32(3), "linear_num_key_heads"},
      {"qwen35.attention.head_count", std::nullopt, "num_attention_heads"},
      // Every layer full attention by the interval: the GDN layers' tensors are then not the model's.
      {"qwen35.full_attention_interval", GgufValue::u32(1), "tensor 'blk.0."},
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    const auto& [key, value, expected] = cases[i];
    const std::string path = qwen35_with(good, key, value, std::to_string(i));
    const std::string message = test::error_of([&] { Model::load(path); });
    EXPECT_NE(message.find(expected), std::string::npos) << key << ": " << message;
  }
}

}  // namespace
}  // namespace qwen35_gguf_test
}  // namespace mb
