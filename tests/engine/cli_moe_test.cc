// SPDX-License-Identifier: MIT
// make-model's mixture-of-experts hybrids, and the all-attention RoPE Granite (--rope-theta), end
// to end: the flags, the config.json transformers reads, prefill and decode steps of the made
// folder giving the same bits through `logits`, generate, run and bench on each, and one-line
// refusals of inconsistent expert and RoPE flags (serve: tests/server/serve_test.cc).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <algorithm>

#include "cli_test_support.h"
#include "common/test_util.h"
#include "io/mapped_file.h"
#include "io/npy.h"

namespace mb {
namespace {

using test::run_cli;

TEST(CliMoe, MakeModelWritesMixtureOfExpertsHybridsThatLogitsRunExactly) {
  const std::string dir = test::make_temp_dir("cli_moe");
  const std::string common = " --d-model 40 --vocab 301 --d-state 16 --headdim 16 --seed 4";
  const std::vector<std::pair<std::string, std::string>> made = {
      {"granite",
       "--arch granite-hybrid --pattern 'M*' --heads 4 --kv-heads 2 --mlp-width 36 --experts 5 "
       "--top-k 2 --expert-width 20"},
      {"nemotron",
       "--arch nemotron-h --pattern 'ME*E' --heads 4 --kv-heads 1 --head-dim 8 --experts 7 "
       "--top-k 3 --expert-width 24 --shared-width 30 --routed-scaling-factor 2.5"},
      {"granite_rope", "--arch granite-hybrid --pattern '***' --heads 4 --kv-heads 1 --rope-theta 10000000"}};
  for (const auto& [name, flags] : made) {
    SCOPED_TRACE(name);
    const std::string model = dir + "/" + name;
    const test::CliOutput out = run_cli("make-model --out " + model + " " + flags + common);
    ASSERT_EQ(out.status, 0) << out.err;
    const nlohmann::json config = nlohmann::json::parse(read_text_file(model + "/config.json"));
    if (name == "granite") {
      EXPECT_EQ(config["num_local_experts"], 5);
      EXPECT_EQ(config["num_experts_per_tok"], 2);
      EXPECT_EQ(config["intermediate_size"], 20);
      EXPECT_EQ(config["shared_intermediate_size"], 36);
    } else if (name == "granite_rope") {
      EXPECT_EQ(config["position_embedding_type"], "rope");
      EXPECT_EQ(config["rope_theta"], 1e7);
      EXPECT_EQ(config["layer_types"], nlohmann::json({"attention", "attention", "attention"}));
    } else {
      EXPECT_EQ(config["hybrid_override_pattern"], "ME*E");
      EXPECT_EQ(config["n_routed_experts"], 7);
      EXPECT_EQ(config["num_experts_per_tok"], 3);
      EXPECT_EQ(config["moe_intermediate_size"], 24);
      EXPECT_EQ(config["moe_shared_expert_intermediate_size"], 30);
      EXPECT_EQ(config["norm_topk_prob"], true);
    }
    const std::string base =
        "logits -m " + model + " --tokens 5,6,7,8,9,10,11,12,13 --threads 2 --all-positions --out ";
    ASSERT_EQ(run_cli(base + dir + "/" + name + "_prefill.npy").status, 0);
    const test::CliOutput steps = run_cli(base + dir + "/" + name + "_steps.npy --mode step");
    ASSERT_EQ(steps.status, 0) << steps.err;
    std::vector<int64_t> shape;
    const auto prefill = read_npy_f32(dir + "/" + name + "_prefill.npy", shape);
    EXPECT_EQ(shape, (std::vector<int64_t>{9, 301}));
    EXPECT_TRUE(test::same_bits(prefill, read_npy_f32(dir + "/" + name + "_steps.npy", shape)));
    // The other commands a user runs on a checkpoint.
    const std::string m = " -m " + model + " ";
    const test::CliOutput generated = run_cli("generate" + m + "--tokens 1,2,3 -n 6 --ignore-eos");
    ASSERT_EQ(generated.status, 0) << generated.err;
    EXPECT_FALSE(generated.out.empty());
    const test::CliOutput run = run_cli("run" + m + "-p 'Once upon a time' -n 8 --seed 4 --ignore-eos");
    ASSERT_EQ(run.status, 0) << run.err;
    EXPECT_EQ(run.out.rfind("Once upon a time", 0), 0u) << run.out;
    const test::CliOutput bench = run_cli("bench" + m + "--prompt-len 8 --gen-len 2 --repeats 1 --json");
    ASSERT_EQ(bench.status, 0) << bench.err;
    EXPECT_TRUE(nlohmann::json::parse(bench.out, nullptr, false).is_object()) << bench.out;
  }
}

TEST(CliMoe, InconsistentExpertFlagsAreOneLineErrors) {
  const std::string dir = test::make_temp_dir("cli_moe_flags");
  const std::string make = "make-model --out " + dir + "/made --d-model 32 ";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {make + "--arch nemotron-h --pattern 'M*E'", "--pattern holds E layers: give their --experts"},
      {make + "--arch nemotron-h --pattern 'M*-' --experts 4", "--experts needs E layers in --pattern"},
      {make + "--arch granite-hybrid --pattern ME", "--pattern holds 'E': expected M or *"},
      {make + "--arch granite-hybrid --experts 4 --shared-width 8", "--shared-width is nemotron-h's"},
      {make + "--arch granite-hybrid --experts 4 --top-k 5", "--top-k must be in [0, 4]"},
      {make + "--arch granite-hybrid --experts -1", "--experts must be in [0, 4096]"},
      {make + "--arch granite-hybrid --top-k 2", "need --experts"},
      {make + "--arch nemotron-h --pattern ME --experts 4 --routed-scaling-factor 0",
       "--routed-scaling-factor"},
      {make + "--arch nemotron-h --rope-theta 10000", "--rope-theta is granite-hybrid's"},
      {make + "--arch granite-hybrid --heads 32 --rope-theta 10000", "even head size"},
      {"make-model --out " + dir +
           "/made.gguf --format gguf --arch granite-hybrid --pattern '**' "
           "--rope-theta 10000",
       "cannot be written as GGUF"},
  };
  for (const auto& [arguments, fragment] : cases) {
    const test::CliOutput out = run_cli(arguments);
    EXPECT_NE(out.status, 0) << arguments;
    EXPECT_NE(out.err.find(fragment), std::string::npos) << arguments << "\n" << out.err;
    EXPECT_EQ(std::count(out.err.begin(), out.err.end(), '\n'), 1) << arguments << "\n" << out.err;
  }
}

}  // namespace
}  // namespace mb
