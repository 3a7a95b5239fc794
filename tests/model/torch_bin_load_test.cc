// SPDX-License-Identifier: MIT
// A make-model folder written as pytorch_model.bin loads through Model::load and computes
// exactly what the same model written as model.safetensors computes, for both architectures
// and both storage dtypes.
#include <gtest/gtest.h>

#include <filesystem>

#include "common/mamba2_reference.h"
#include "common/mamba3_reference.h"
#include "common/model_fixture.h"
#include "common/test_util.h"
#include "io/mapped_file.h"

namespace mb {
namespace {

void expect_same_logits(MakeModelOptions options, const std::string& tag) {
  options.format = CheckpointFormat::Safetensors;
  const std::string safetensors_dir = test::write_model(options, tag + "_st");
  options.format = CheckpointFormat::TorchBin;
  const std::string bin_dir = test::write_model(options, tag + "_bin");
  ASSERT_TRUE(std::filesystem::exists(bin_dir + "/pytorch_model.bin"));
  ASSERT_FALSE(std::filesystem::exists(bin_dir + "/model.safetensors"));

  const auto from_safetensors = Model::load(safetensors_dir);
  const auto from_bin = Model::load(bin_dir);
  EXPECT_EQ(from_bin->fingerprint(), from_safetensors->fingerprint())
      << "same tensors, names, shapes and bytes";
  const ComputeContext ctx{1, best_isa()};
  const std::vector<int32_t> tokens = test::random_tokens(19, options.config.vocab_size, 7);
  SequenceState a = from_safetensors->new_state();
  SequenceState b = from_bin->new_state();
  const std::vector<float> expected =
      test::prefill(*from_safetensors, ctx, tokens, a, {OutputKind::LogitsAll, 0});
  const std::vector<float> actual = test::prefill(*from_bin, ctx, tokens, b, {OutputKind::LogitsAll, 0});
  ASSERT_EQ(expected.size(), tokens.size() * options.config.vocab_size);
  EXPECT_TRUE(test::same_bits(actual, expected)) << "max |diff| " << test::max_abs_diff(actual, expected);
}

TEST(TorchBinLoad, Mamba1F32LogitsAreBitIdentical) {
  MakeModelOptions o;
  o.config = test::small_config(32, 2, 97);
  o.seed = 11;
  expect_same_logits(o, "bin_m1_f32");
}

TEST(TorchBinLoad, Mamba1Bf16UntiedLogitsAreBitIdentical) {
  MakeModelOptions o;
  o.config = test::small_config(32, 2, 97);
  o.config.tie_embeddings = false;
  o.config.ssm.use_bias = true;
  o.dtype = DType::BF16;
  o.form = ConfigForm::Original;
  o.seed = 12;
  expect_same_logits(o, "bin_m1_bf16");
}

TEST(TorchBinLoad, Mamba3F16LogitsAreBitIdentical) {
  MakeModelOptions o;
  o.config = test::mamba3_config(32, 16, 16, 40);
  o.dtype = DType::F16;
  o.form = ConfigForm::Original;
  o.seed = 13;
  expect_same_logits(o, "bin_m3_f16");
}

// The published state-spaces Mamba-2 checkpoints exist only as pytorch_model.bin.
TEST(TorchBinLoad, Mamba2OriginalLayoutLogitsAreBitIdentical) {
  MakeModelOptions o;
  o.config = test::mamba2_config(32, 16, 16, 2, 40);
  o.form = ConfigForm::Original;
  o.dtype = DType::BF16;
  o.seed = 14;
  expect_same_logits(o, "bin_m2_bf16");
}

// Runs the CLI with `arguments`; returns its exit status and what it printed on stderr.
std::pair<int, std::string> run_cli(const std::string& arguments) {
  const std::string err = test::make_temp_dir("bin_cli") + "/err.txt";
  const std::string command = std::string(MB_CLI_PATH) + " " + arguments + " >/dev/null 2>" + err;
  const int status = std::system(command.c_str());
  return {status, read_text_file(err)};
}

TEST(TorchBinLoad, CliWritesBinWithFormatFlag) {
  const std::string dir = test::make_temp_dir("bin_cli_model");
  const std::string common = " --d-model 32 --n-layer 2 --vocab 301 --seed 5 --dtype bf16";
  ASSERT_EQ(run_cli("make-model --out " + dir + "/bin --format bin" + common).first, 0);
  ASSERT_EQ(run_cli("make-model --out " + dir + "/st" + common).first, 0);
  EXPECT_TRUE(std::filesystem::exists(dir + "/bin/pytorch_model.bin"));
  EXPECT_TRUE(std::filesystem::exists(dir + "/st/model.safetensors"));
  EXPECT_EQ(Model::load(dir + "/bin")->fingerprint(), Model::load(dir + "/st")->fingerprint());

  const auto [bad_status, bad_error] = run_cli("make-model --out " + dir + "/x --format pickle");
  EXPECT_NE(bad_status, 0);
  EXPECT_NE(bad_error.find("--format must be safetensors, bin or gguf"), std::string::npos) << bad_error;
  const auto [shards_status, shards_error] =
      run_cli("make-model --out " + dir + "/y --format bin --shards 2");
  EXPECT_NE(shards_status, 0);
  EXPECT_NE(shards_error.find("--shards > 1"), std::string::npos) << shards_error;
  EXPECT_FALSE(std::filesystem::exists(dir + "/y")) << "a refused make-model must not write anything";
}

}  // namespace
}  // namespace mb
