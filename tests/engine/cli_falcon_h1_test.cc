// SPDX-License-Identifier: MIT
// Falcon-H1 through the CLI, end to end: make-model --arch falcon-h1 with --set over its declared
// keys, the config.json transformers reads, prefill and decode steps giving the same bits through
// `logits` on the folder and on its quantized GGUF file, generate, run and bench, and one-line
// refusals of keys it does not have or values it cannot run.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <algorithm>

#include "cli_test_support.h"
#include "common/test_util.h"
#include "io/file_io.h"
#include "io/npy.h"

namespace mb {
namespace {

using test::run_cli;

TEST(CliFalconH1, MakeModelSetQuantizeAndEveryCommandRunExactly) {
  const std::string dir = test::make_temp_dir("cli_falcon_h1");
  const std::string model = dir + "/folder";
  const test::CliOutput made =
      run_cli("make-model --arch falcon-h1 --out " + model +
              " --d-model 48 --n-layer 2 --vocab 301 --seed 5 --set mamba_norm_before_gate=true"
              " --set key_multiplier=0.25 --set 'ssm_multipliers=[0.5,1.5,0.75,1.25,2]'");
  ASSERT_EQ(made.status, 0) << made.err;
  const nlohmann::json config = nlohmann::json::parse(read_text_file(model + "/config.json"));
  EXPECT_EQ(config["model_type"], "falcon_h1");
  EXPECT_EQ(config["architectures"], nlohmann::json({"FalconH1ForCausalLM"}));
  EXPECT_EQ(config["mamba_norm_before_gate"], true);
  EXPECT_EQ(config["key_multiplier"], 0.25);
  EXPECT_EQ(config["ssm_multipliers"], nlohmann::json({0.5, 1.5, 0.75, 1.25, 2.0}));
  EXPECT_EQ(config["hidden_size"], 48);

  const test::CliOutput quantized = run_cli("quantize --type q8_0 " + model + " " + dir + "/model.gguf");
  ASSERT_EQ(quantized.status, 0) << quantized.err;
  for (const std::string& m : {model, dir + "/model.gguf"}) {
    SCOPED_TRACE(m);
    const std::string base =
        "logits -m " + m + " --tokens 5,6,7,8,9,10,11,12,13 --threads 2 --all-positions --out ";
    ASSERT_EQ(run_cli(base + dir + "/prefill.npy").status, 0);
    const test::CliOutput steps = run_cli(base + dir + "/steps.npy --mode step");
    ASSERT_EQ(steps.status, 0) << steps.err;
    std::vector<int64_t> shape;
    const auto prefill = read_npy_f32(dir + "/prefill.npy", shape);
    EXPECT_EQ(shape, (std::vector<int64_t>{9, 301}));
    EXPECT_TRUE(test::same_bits(prefill, read_npy_f32(dir + "/steps.npy", shape)));
    const std::string flag = " -m " + m + " ";
    const test::CliOutput generated = run_cli("generate" + flag + "--tokens 1,2,3 -n 6 --ignore-eos");
    ASSERT_EQ(generated.status, 0) << generated.err;
    EXPECT_FALSE(generated.out.empty());
    const test::CliOutput run = run_cli("run" + flag + "-p 'Once upon a time' -n 8 --seed 4 --ignore-eos");
    ASSERT_EQ(run.status, 0) << run.err;
    EXPECT_EQ(run.out.rfind("Once upon a time", 0), 0u) << run.out;
    const test::CliOutput bench = run_cli("bench" + flag + "--prompt-len 8 --gen-len 2 --repeats 1 --json");
    ASSERT_EQ(bench.status, 0) << bench.err;
    EXPECT_TRUE(nlohmann::json::parse(bench.out, nullptr, false).is_object()) << bench.out;
  }
}

TEST(CliFalconH1, BadKeysAndValuesAreOneLineErrorsNamingThem) {
  const std::string dir = test::make_temp_dir("cli_falcon_h1_bad");
  const std::string make =
      "make-model --arch falcon-h1 --out " + dir + "/m --d-model 48 --n-layer 2 --vocab 301 ";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {make + "--set layer_types=[1]", "layer_types"},
      {make + "--set 'mlp_multipliers=[1,2,3]'", "mlp_multipliers"},
      {make + "--set hidden_act=gelu", "hidden_act"},
      {make + "--set mamba_n_heads=5", "mamba_n_heads"}};
  for (const auto& [command, named] : cases) {
    const test::CliOutput out = run_cli(command);
    EXPECT_NE(out.status, 0) << command;
    EXPECT_NE(out.err.find(named), std::string::npos) << command << ": " << out.err;
    EXPECT_EQ(std::count(out.err.begin(), out.err.end(), '\n'), 1) << out.err;
  }
}

}  // namespace
}  // namespace mb
