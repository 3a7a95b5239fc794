// SPDX-License-Identifier: MIT
// make-model --arch bamba end to end: the declared family's example with --set overrides, the
// config.json transformers' BambaConfig reads, prefill and decode steps through `logits` giving the
// same bits on the folder and on its GGUF file (llama.cpp's granitehybrid with RoPE), and the
// other commands a user runs on it.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "cli_test_support.h"
#include "common/test_util.h"
#include "io/gguf.h"
#include "io/mapped_file.h"
#include "io/npy.h"

namespace mb {
namespace {

using test::run_cli;

std::vector<float> bamba_cli_logits(const std::string& model, const std::string& out,
                                    const std::string& mode) {
  const test::CliOutput run = run_cli("logits -m " + model + " --tokens 5,6,7,8,9,10,11,12,13 --threads 2 " +
                                      "--all-positions --out " + out + mode);
  EXPECT_EQ(run.status, 0) << run.err;
  std::vector<int64_t> shape;
  return read_npy_f32(out, shape);
}

TEST(CliBamba, MakeModelWritesABambaFolderAndGgufThatRunExactly) {
  const std::string dir = test::make_temp_dir("cli_bamba");
  const std::string folder = dir + "/bamba", gguf = dir + "/bamba.gguf";
  const std::string flags =
      " --arch bamba --d-model 64 --n-layer 4 --vocab 301 --seed 5 --set "
      "'attn_layer_indices=[0,3]' --set mamba_d_state=32 --set rope_theta=500000";
  test::CliOutput made = run_cli("make-model --out " + folder + flags);
  ASSERT_EQ(made.status, 0) << made.err;
  const nlohmann::json config = nlohmann::json::parse(read_text_file(folder + "/config.json"));
  EXPECT_EQ(config["model_type"], "bamba");
  EXPECT_EQ(config["architectures"], nlohmann::json({"BambaForCausalLM"}));
  EXPECT_EQ(config["attn_layer_indices"], nlohmann::json({0, 3}));
  EXPECT_EQ(config["mamba_d_state"], 32);
  EXPECT_EQ(config["rope_theta"], 500000.0);
  EXPECT_EQ(config["partial_rotary_factor"], 0.5);
  EXPECT_EQ(config["attn_rotary_emb"], 8);  // half of the 16-channel heads
  made = run_cli("make-model --format gguf --out " + gguf + flags);
  ASSERT_EQ(made.status, 0) << made.err;
  EXPECT_EQ(GgufFile(gguf).bool_if_present("granitehybrid.rope.scaling.finetuned"), true);

  for (const std::string& model : {folder, gguf}) {
    SCOPED_TRACE(model);
    const auto prefill = bamba_cli_logits(model, dir + "/prefill.npy", "");
    EXPECT_EQ(prefill.size(), 9u * 301u);
    EXPECT_TRUE(test::same_bits(prefill, bamba_cli_logits(model, dir + "/steps.npy", " --mode step")));
    const std::string m = " -m " + model + " ";
    const test::CliOutput generated = run_cli("generate" + m + "--tokens 1,2,3 -n 6 --ignore-eos");
    ASSERT_EQ(generated.status, 0) << generated.err;
    const test::CliOutput bench = run_cli("bench" + m + "--prompt-len 8 --gen-len 2 --repeats 1 --json");
    ASSERT_EQ(bench.status, 0) << bench.err;
    EXPECT_TRUE(nlohmann::json::parse(bench.out, nullptr, false).is_object()) << bench.out;
  }
  const test::CliOutput run =
      run_cli("run -m " + folder + " -p 'Once upon a time' -n 8 --seed 4 --ignore-eos");
  ASSERT_EQ(run.status, 0) << run.err;
  EXPECT_EQ(run.out.rfind("Once upon a time", 0), 0u) << run.out;

  // A key Bamba does not declare, and a value its check refuses, are one-line errors naming them.
  const test::CliOutput unknown = run_cli("make-model --out " + dir + "/bad --arch bamba --set n_experts=4");
  EXPECT_NE(unknown.status, 0);
  EXPECT_NE(unknown.err.find("n_experts"), std::string::npos) << unknown.err;
  const test::CliOutput groups =
      run_cli("make-model --out " + dir + "/bad --arch bamba --set mamba_n_groups=2");
  EXPECT_NE(groups.status, 0);
  EXPECT_NE(groups.err.find("mamba_n_groups"), std::string::npos) << groups.err;
}

}  // namespace
}  // namespace mb
