// SPDX-License-Identifier: MIT
// The command-line tool end to end: make-model, logits (both modes, bit-identical files),
// generate, tokenize, run, and one-line errors with a non-zero exit for bad input.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <array>
#include <cctype>
#include <cstdio>
#include <filesystem>
#include <memory>

#include "cli_test_support.h"
#include "common/test_util.h"
#include "core/error.h"
#include "core/isa_flag.h"
#include "io/gguf.h"
#include "io/mapped_file.h"
#include "io/npy.h"

namespace mb {
namespace {

using Output = test::CliOutput;
using test::run_cli;

const std::string& cli_model() {
  static const std::string dir = [] {
    const std::string d = test::make_temp_dir("cli_model") + "/model";
    const Output made = run_cli("make-model --out " + d + " --d-model 32 --n-layer 2 --vocab 301 --seed 3");
    EXPECT_EQ(made.status, 0) << made.err;
    return d;
  }();
  return dir;
}

TEST(Cli, LogitsFilesHaveTheRealVocabularyAndBothModesAgreeBitForBit) {
  const std::string dir = test::make_temp_dir("cli_logits");
  const std::string base =
      "logits -m " + cli_model() + " --tokens 5,6,7,8,9 --all-positions --threads 2 --out ";
  ASSERT_EQ(run_cli(base + dir + "/prefill.npy").status, 0);
  ASSERT_EQ(run_cli(base + dir + "/step.npy --mode step").status, 0);
  ASSERT_EQ(run_cli(base + dir + "/chunked.npy --chunk 2").status, 0);
  std::vector<int64_t> shape;
  const auto prefill = read_npy_f32(dir + "/prefill.npy", shape);
  EXPECT_EQ(shape, (std::vector<int64_t>{5, 301}));  // the config's vocab_size, not the padded 304 rows
  EXPECT_TRUE(test::same_bits(prefill, read_npy_f32(dir + "/step.npy", shape)));
  EXPECT_TRUE(test::same_bits(prefill, read_npy_f32(dir + "/chunked.npy", shape)));
  ASSERT_EQ(run_cli("logits -m " + cli_model() + " --tokens 5,6,7 --out " + dir + "/last.npy").status, 0);
  read_npy_f32(dir + "/last.npy", shape);
  EXPECT_EQ(shape, (std::vector<int64_t>{1, 301}));
}

TEST(Cli, GeneratePrintsTheRequestedNumberOfIds) {
  const Output out = run_cli("generate -m " + cli_model() + " --tokens 1,2,3 -n 16 --ignore-eos");
  ASSERT_EQ(out.status, 0) << out.err;
  int count = 0;
  for (const char* p = out.out.c_str(); *p;) {
    char* end = nullptr;
    const long id = std::strtol(p, &end, 10);
    if (end == p) break;
    EXPECT_GE(id, 0);
    EXPECT_LT(id, 301);
    ++count;
    p = end;
  }
  EXPECT_EQ(count, 16) << out.out;
}

TEST(Cli, BadInputsGiveOneLineErrorsAndNonZeroExit) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"generate -m " + cli_model() + " --tokens 1,2,301 -n 4", "outside the vocabulary"},
      {"generate -m " + cli_model() + " --tokens 1,x,3 -n 4", "'x' is not a token id"},
      {"generate -m " + cli_model() + " --tokens -5 -n 4", "outside the vocabulary"},
      {"generate -m /nonexistent/model --tokens 1 -n 4", "model folder '/nonexistent/model' does not exist"},
      {"logits -m " + cli_model() + " --tokens 1 --out /tmp/x.npy --mode fast", "--mode"},
      {"logits -m " + cli_model() + " --tokens 1 --out /tmp/x.npy --dtype int4", "unknown dtype"},
      {"run -m " + cli_model() + " -p hi --temp -1", "--temp"},
      {"run -m " + cli_model() + " -p hi --state-in /nonexistent.state", "cannot open"},
      {"logits -m " + cli_model() + " --tokens 1 --out /tmp/x.npy --device gpu", "unknown device 'gpu'"},
      {"generate -m " + cli_model() + " --tokens 1 -n 2 --device vulkan:x", "unknown device 'vulkan:x'"},
      // Out of range with the backend, or no backend at all: either way the device is named.
      {"bench -m " + cli_model() + " --prompt-len 2 --gen-len 1 --device vulkan:99", "device 'vulkan:99'"},
  };
  for (const auto& [arguments, fragment] : cases) {
    const Output out = run_cli(arguments);
    EXPECT_NE(out.status, 0) << arguments;
    EXPECT_NE(out.err.find(fragment), std::string::npos) << arguments << "\n" << out.err;
    EXPECT_EQ(std::count(out.err.begin(), out.err.end(), '\n'), 1) << arguments << "\n" << out.err;
  }
}

// d_model 32: rows of 32 and 64 are whole Q8_0 blocks (Q4_K falls back to Q8_0 for them).
TEST(Cli, QuantizedDtypesLoadAndQuantAccuracyReportsTheirDistance) {
  const Output same = run_cli("quant-accuracy -m " + cli_model() + " --dtype f32 --positions 20 --json");
  ASSERT_EQ(same.status, 0) << same.err;
  const auto exact = nlohmann::json::parse(same.out);
  EXPECT_EQ(exact["max_logit_diff"].get<double>(), 0.0);
  EXPECT_EQ(exact["top1_agreement"].get<double>(), 1.0);
  const Output q8 = run_cli("quant-accuracy -m " + cli_model() + " --dtype q8_0 --positions 20 --json");
  ASSERT_EQ(q8.status, 0) << q8.err;
  const auto report = nlohmann::json::parse(q8.out);
  EXPECT_EQ(report["dtype"], "q8_0");
  EXPECT_GT(report["max_logit_diff"].get<double>(), 0.0);
  EXPECT_LT(report["max_logit_diff"].get<double>(), 0.5);
  EXPECT_GE(report["mean_kl"].get<double>(), 0.0);
  EXPECT_GE(report["top1_agreement"].get<double>(), 0.5);
  const Output bench = run_cli("bench -m " + cli_model() +
                               " --dtype q4_0 --prompt-len 8 --gen-len 2 --repeats 1 --json --profile");
  ASSERT_EQ(bench.status, 0) << bench.err;
  const auto figures = nlohmann::json::parse(bench.out);
  EXPECT_EQ(figures["dtype"], "q4_0");
  EXPECT_GT(figures["weight_bytes_per_token"].get<double>(), 0.0);
  // A Mamba-1 model: its phases and its two state parts per layer, under their names.
  for (const char* phase : {"embed", "in_proj gemm", "selective scan+gate", "lm_head gemm"})
    EXPECT_TRUE(figures["prefill_phases"].contains(phase)) << phase << " in " << bench.out;
  EXPECT_NE(figures["state_layout"].get<std::string>().find("conv ["), std::string::npos) << bench.out;
  EXPECT_NE(figures["state_layout"].get<std::string>().find(" + ssm ["), std::string::npos) << bench.out;
  // --isa runs a narrower kernel set than the CPU's best, and says which ran.
  const Output scalar =
      run_cli("bench -m " + cli_model() + " --prompt-len 4 --gen-len 1 --repeats 1 --json --isa SCALAR");
  ASSERT_EQ(scalar.status, 0) << scalar.err;
  EXPECT_EQ(nlohmann::json::parse(scalar.out)["isa"], "scalar") << scalar.out;
  const Output refused = run_cli("make-model --out " + test::make_temp_dir("cli_q") + "/m --dtype q4_0");
  EXPECT_NE(refused.status, 0);
  EXPECT_NE(refused.err.find("quantize at load"), std::string::npos) << refused.err;
}

TEST(Cli, EveryNumericFlagIsCheckedUnderTheNameTheUserTyped) {
  const std::string dir = test::make_temp_dir("cli_flags");
  const std::string gen = "generate -m " + cli_model() + " --tokens 1,2 ";
  const std::string run = "run -m " + cli_model() + " -p hi ";
  const std::string logits = "logits -m " + cli_model() + " --tokens 1,2 --out " + dir + "/l.npy ";
  const std::string bench = "bench -m " + cli_model() + " ";
  const std::string make = "make-model --out " + dir + "/made ";
  const std::vector<std::pair<std::string, std::string>> cases = {
      // A thread count this large used to crash inside the OpenMP runtime.
      {gen + "-t 100000", "-t/--threads must be in [0, 1024] (0 = all cores), got 100000"},
      {gen + "--threads -1", "-t/--threads must be in [0, 1024]"},
      {gen + "-n -3", "-n/--n-predict must be >= 0, got -3"},
      {run + "--n-predict -1", "-n/--n-predict must be >= 0, got -1"},
      {gen + "--temp nan", "--temp must be finite and >= 0, got nan"},
      {run + "--temp inf", "--temp must be finite and >= 0, got inf"},
      {run + "--temp -1", "--temp must be finite and >= 0, got -1"},
      {run + "--top-k -2", "--top-k must be >= 0"},
      {run + "--top-p 0", "--top-p must be in (0, 1]"},
      {run + "--top-p 1.5", "--top-p must be in (0, 1]"},
      {run + "--min-p -0.1", "--min-p must be in [0, 1]"},
      {run + "--min-p nan", "--min-p must be in [0, 1]"},
      {run + "--repeat-penalty 0", "--repeat-penalty must be finite and > 0"},
      {run + "--repeat-last-n -2", "--repeat-last-n must be >= -1"},
      {run + "--presence-penalty 2.5", "--presence-penalty must be in [-2, 2] (0 disables it), got 2.5"},
      {gen + "--frequency-penalty -3", "--frequency-penalty must be in [-2, 2] (0 disables it), got -3"},
      {run + "--seed -5", "--seed must be >= -1 (-1 = random), got -5"},
      {logits + "--chunk -1", "--chunk must be >= 0"},
      {logits + "--ssd-chunk -4", "--ssd-chunk must be in [0, 65536]"},
      {logits + "-t 5000", "-t/--threads must be in [0, 1024]"},
      {bench + "--prompt-len 0", "--prompt-len must be in [1, "},
      {bench + "--prompt-len 1000000000", "--prompt-len must be in [1, 16777216], got 1000000000"},
      {bench + "--gen-len -1", "--gen-len must be in [1, "},
      {bench + "--repeats 0", "--repeats must be in [1, 1000], got 0"},
      {bench + "--chunk -1", "--chunk must be >= 0"},
      {bench + "--step-tokens -1", "--step-tokens must be >= 0"},
      {bench + "--ssd-chunk -1", "--ssd-chunk must be in [0, 65536]"},
      {bench + "-t 2000", "-t/--threads must be in [0, 1024]"},
      {bench + "--isa sse9", "--isa must be auto, avx512, avx2, neon or scalar, got 'sse9'"},
      // make-model: a given size is checked, never replaced by a default.
      {make + "--d-model 0", "--d-model must be in [1, 65536], got 0"},
      {make + "--n-layer -1", "--n-layer must be in [1, 4096], got -1"},
      {make + "--vocab 0", "--vocab must be in [1, 16777216], got 0"},
      {make + "--d-state 0", "--d-state must be in [1, 256], got 0"},
      {make + "--d-state 512", "--d-state must be in [1, 256], got 512"},
      {make + "--d-conv 0", "--d-conv must be in [1, 16], got 0"},
      {make + "--expand 0", "--expand must be in [1, 64], got 0"},
      {make + "--dt-rank 0", "--dt-rank must be in [1, 65536], got 0"},
      {make + "--dt-rank -3", "--dt-rank must be in [1, 65536], got -3"},
      {make + "--arch mamba2 --headdim 0", "--headdim must be in [1, "},
      {make + "--arch mamba2 --ngroups 0", "--ngroups must be in [1, "},
      {make + "--arch mamba3 --chunk-size 0", "--chunk-size must be in [1, "},
      {make + "--arch mamba3 --rope-fraction nan", "--rope-fraction must be 0.5 or 1.0, got nan"},
      {make + "--shards 0", "--shards must be in [1, 4096], got 0"},
      {make + "--input-dim -1", "--input-dim must be in [0, "},
      {make + "--seed -1", "--seed must be >= 0, got -1"},
      {make + "--d-model 65536 --vocab 1000000", "--d-model 65536, --vocab 1000000"},
      // Values CLI11 cannot convert are one line too.
      {gen + "--temp abc", "--temp"},
  };
  for (const auto& [arguments, fragment] : cases) {
    const Output out = run_cli(arguments);
    EXPECT_NE(out.status, 0) << arguments;
    EXPECT_NE(out.err.find(fragment), std::string::npos) << arguments << "\n" << out.err;
    EXPECT_EQ(out.err.rfind("error: ", 0), 0u) << arguments << "\n" << out.err;
    EXPECT_EQ(std::count(out.err.begin(), out.err.end(), '\n'), 1) << arguments << "\n" << out.err;
  }
  // Nothing was written by a refused make-model.
  EXPECT_FALSE(std::filesystem::exists(dir + "/made"));
}

TEST(Cli, VersionAndTheSharedPromptFlags) {
  const Output version = run_cli("--version");
  ASSERT_EQ(version.status, 0) << version.err;
  EXPECT_EQ(version.out.rfind("mambacpp ", 0), 0u) << version.out;
  EXPECT_TRUE(std::isdigit(static_cast<unsigned char>(version.out[9]))) << version.out;

  const std::string dir = test::make_temp_dir("cli_prompt_flags");
  write_file_atomically(dir + "/prompt.txt", "Once upon a time");
  const Output by_text = run_cli("tokenize -m " + cli_model() + " -p 'Once upon a time'");
  ASSERT_EQ(by_text.status, 0) << by_text.err;
  for (const std::string flag : {"-f", "--file"}) {
    const Output by_file = run_cli("tokenize -m " + cli_model() + " " + flag + " " + dir + "/prompt.txt");
    EXPECT_EQ(by_file.out, by_text.out) << flag << " " << by_file.err;
  }
  const std::string run = "run -m " + cli_model() + " -n 6 --seed 2 --ignore-eos ";
  const Output run_text = run_cli(run + "--prompt 'Once upon a time'");
  ASSERT_EQ(run_text.status, 0) << run_text.err;
  // --prompt-file is the older spelling of -f/--file and keeps working.
  for (const std::string flag : {"-f", "--file", "--prompt-file"}) {
    const Output run_file = run_cli(run + flag + " " + dir + "/prompt.txt");
    EXPECT_EQ(run_file.out, run_text.out) << flag << " " << run_file.err;
  }
}

TEST(Cli, TokenizeRoundTripsAndRunStreamsText) {
  const Output ids = run_cli("tokenize -m " + cli_model() + " -p 'hello world'");
  ASSERT_EQ(ids.status, 0) << ids.err;
  std::string list = ids.out.substr(0, ids.out.find('\n'));
  std::replace(list.begin(), list.end(), ' ', ',');
  const Output text = run_cli("tokenize -m " + cli_model() + " --decode " + list);
  EXPECT_EQ(text.out, "hello world\n");
  const Output run = run_cli("run -m " + cli_model() + " -p 'Once upon a time' -n 12 --seed 4 --ignore-eos");
  ASSERT_EQ(run.status, 0) << run.err;
  EXPECT_EQ(run.out.rfind("Once upon a time", 0), 0u) << run.out;
  EXPECT_NE(run.err.find("prefill:"), std::string::npos) << run.err;
  EXPECT_NE(run.err.find("decode:"), std::string::npos) << run.err;
  // The same seed gives the same text.
  EXPECT_EQ(run_cli("run -m " + cli_model() + " -p 'Once upon a time' -n 12 --seed 4 --ignore-eos").out,
            run.out);
}

// `chat` answers each input line (a trailing backslash continues a message), resumes every turn
// after the first from the cache, stops at /exit, and names a bad flag.
TEST(Cli, ChatAnswersEachMessageAndResumesTheConversation) {
  const std::string input = "printf 'Hello there\\nHow are\\\\\\nyou?\\n/exit\\nnot read\\n' | ";
  const Output chat = run_cli(
      "chat -m " + cli_model() + " -n 4 --seed 2 --ignore-eos --stats -t 1 --system 'Be brief.'", input);
  ASSERT_EQ(chat.status, 0) << chat.err;
  std::vector<long long> prompt, resumed;
  for (size_t at = chat.err.find("[turn "); at != std::string::npos; at = chat.err.find("[turn ", at + 1)) {
    long long turn = 0, p = 0, r = 0;
    ASSERT_EQ(
        std::sscanf(chat.err.c_str() + at, "[turn %lld: prompt %lld tokens, %lld resumed", &turn, &p, &r), 3)
        << chat.err;
    prompt.push_back(p);
    resumed.push_back(r);
  }
  // "How are\" continues onto "you?", and "not read" comes after /exit.
  ASSERT_EQ(prompt.size(), 2u) << chat.err;
  EXPECT_EQ(resumed[0], 0);
  EXPECT_GE(resumed[1], prompt[0]);
  // Two threads answer the same text.
  const Output same =
      run_cli("chat -m " + cli_model() + " -n 4 --seed 2 --ignore-eos -t 2 --system 'Be brief.'", input);
  EXPECT_EQ(same.out, chat.out);
  const Output bad = run_cli("chat -m " + cli_model() + " -n -1", "printf 'hi\\n' | ");
  EXPECT_NE(bad.status, 0);
  EXPECT_NE(bad.err.find("-n/--n-predict"), std::string::npos) << bad.err;
  const Output full = run_cli("chat -m " + cli_model() + " -c 8", "printf 'a rather long message\\n' | ");
  EXPECT_NE(full.status, 0);
  EXPECT_NE(full.err.find("context size"), std::string::npos) << full.err;
}

TEST(Cli, StateFilesContinueAConversation) {
  const std::string dir = test::make_temp_dir("cli_state");
  const std::string m = " -m " + cli_model() + " --temp 0 ";
  ASSERT_EQ(
      run_cli("generate" + m + "--tokens 4,5,6 -n 5 --ignore-eos --state-out " + dir + "/a.state").status, 0);
  const Output continued =
      run_cli("generate" + m + "--tokens 7,8 -n 6 --ignore-eos --state-in " + dir + "/a.state");
  ASSERT_EQ(continued.status, 0) << continued.err;
  const Output first = run_cli("generate" + m + "--tokens 4,5,6 -n 5 --ignore-eos");
  std::string ids = first.out.substr(0, first.out.find('\n'));
  std::replace(ids.begin(), ids.end(), ' ', ',');
  const Output whole = run_cli("generate" + m + "--tokens 4,5,6," + ids + ",7,8 -n 6 --ignore-eos");
  EXPECT_EQ(continued.out, whole.out);
}

TEST(Cli, GgufFilesWorkWithEveryCommand) {
  const std::string dir = test::make_temp_dir("cli_gguf");
  // The folder fixture converted, and the same model made directly as a GGUF file.
  const std::string converted = dir + "/converted.gguf", made = dir + "/made.gguf";
  const Output quantized = run_cli("quantize " + cli_model() + " " + converted + " --type f32");
  ASSERT_EQ(quantized.status, 0) << quantized.err;
  const Output direct =
      run_cli("make-model --format gguf --out " + made + " --d-model 32 --n-layer 2 --vocab 301 --seed 3");
  ASSERT_EQ(direct.status, 0) << direct.err;
  EXPECT_FALSE(std::filesystem::exists(made + ".parts"));
  const Output made_quantized =
      run_cli("make-model --format gguf --dtype q8_0 --out " + dir + "/made_q8.gguf");
  ASSERT_EQ(made_quantized.status, 0) << made_quantized.err;

  const std::string tokens = " --tokens 5,6,7,8,9 --all-positions --out ";
  ASSERT_EQ(run_cli("logits -m " + converted + tokens + dir + "/converted.npy").status, 0);
  ASSERT_EQ(run_cli("logits -m " + made + tokens + dir + "/made.npy").status, 0);
  ASSERT_EQ(run_cli("logits -m " + made + tokens + dir + "/step.npy --mode step").status, 0);
  ASSERT_EQ(run_cli("logits -m " + cli_model() + tokens + dir + "/folder.npy").status, 0);
  std::vector<int64_t> shape;
  const auto from_gguf = read_npy_f32(dir + "/converted.npy", shape);
  EXPECT_EQ(shape, (std::vector<int64_t>{5, 304}));  // GGUF's vocabulary is the embedding's padded rows
  EXPECT_TRUE(test::same_bits(from_gguf, read_npy_f32(dir + "/made.npy", shape)));
  EXPECT_TRUE(test::same_bits(from_gguf, read_npy_f32(dir + "/step.npy", shape)));
  const auto from_folder = read_npy_f32(dir + "/folder.npy", shape);
  std::vector<float> cut;
  for (int t = 0; t < 5; ++t)
    cut.insert(cut.end(), from_gguf.begin() + t * 304, from_gguf.begin() + t * 304 + 301);
  // A is stored rounded to f32 (see model/gguf_checkpoint.h): within rounding of the folder.
  EXPECT_LE(test::max_abs_diff(cut, from_folder), 1e-5 * test::max_abs(from_folder));

  const Output ids = run_cli("tokenize -m " + made + " -p 'hello world'");
  ASSERT_EQ(ids.status, 0) << ids.err;
  EXPECT_EQ(ids.out, run_cli("tokenize -m " + cli_model() + " -p 'hello world'").out);
  std::string list = ids.out.substr(0, ids.out.find('\n'));
  std::replace(list.begin(), list.end(), ' ', ',');
  EXPECT_EQ(run_cli("tokenize -m " + made + " --decode " + list).out, "hello world\n");

  const Output generated = run_cli("generate -m " + made + " --tokens 1,2,3 -n 6 --ignore-eos --stop xyz");
  ASSERT_EQ(generated.status, 0) << generated.err;
  EXPECT_FALSE(generated.out.empty());
  const Output run = run_cli("run -m " + made + " -p 'Once upon a time' -n 8 --seed 4 --ignore-eos");
  ASSERT_EQ(run.status, 0) << run.err;
  EXPECT_EQ(run.out.rfind("Once upon a time", 0), 0u) << run.out;
  const Output bench = run_cli("bench -m " + made + " --prompt-len 8 --gen-len 2 --repeats 1 --json");
  ASSERT_EQ(bench.status, 0) << bench.err;

  for (const std::string type : {"f16", "bf16", "q8_0", "q4_0", "q4_k_m"}) {
    const Output typed = run_cli("quantize " + converted + " " + dir + "/" + type + ".gguf --type " + type);
    ASSERT_EQ(typed.status, 0) << typed.err;
    ASSERT_EQ(run_cli("logits -m " + dir + "/" + type + ".gguf" + tokens + dir + "/" + type + ".npy").status,
              0);
  }

  const std::vector<std::pair<std::string, std::string>> failures = {
      {"quantize " + cli_model() + " " + dir + "/x.gguf --type q3_k", "unknown GGUF type 'q3_k'"},
      {"quantize /nonexistent " + dir + "/x.gguf", "model folder '/nonexistent' does not exist"},
      {"logits -m " + dir + "/folder.npy --tokens 1 --out " + dir + "/x.npy", "not a GGUF file"},
      {"make-model --format gguf --out " + dir + "/s.gguf --shards 2", "--shards must be 1"},
  };
  for (const auto& [command, expected] : failures) {
    const Output out = run_cli(command);
    EXPECT_NE(out.status, 0) << command;
    EXPECT_NE(out.err.find(expected), std::string::npos) << command << ": " << out.err;
  }
}

TEST(Cli, HybridGgufFilesWorkWithEveryCommand) {
  const std::string dir = test::make_temp_dir("cli_hybrid_gguf");
  // Granite made directly as a Q4_K_M file (rows of 256: Q4_K and Q6_K matrices), Nemotron-H as a
  // folder then quantized, both with the byte-level tokenizer make-model writes.
  const std::string granite = dir + "/granite.gguf", nemotron = dir + "/nemotron";
  const Output made = run_cli("make-model --arch granite-hybrid --format gguf --dtype q4_k_m --out " +
                              granite + " --d-model 256 --n-layer 4 --vocab 301 --seed 5");
  ASSERT_EQ(made.status, 0) << made.err;
  ASSERT_EQ(run_cli("make-model --arch nemotron-h --out " + nemotron +
                    " --d-model 64 --n-layer 3 --vocab 301 "
                    "--head-dim 24 --seed 6")
                .status,
            0);
  for (const std::string type : {"f32", "q8_0"}) {
    const Output q =
        run_cli("quantize " + nemotron + " " + dir + "/nemotron_" + type + ".gguf --type " + type);
    ASSERT_EQ(q.status, 0) << q.err;
  }
  const std::string tokens = " --tokens 5,6,7,8,9 --all-positions --out ";
  ASSERT_EQ(run_cli("logits -m " + nemotron + tokens + dir + "/folder.npy").status, 0);
  ASSERT_EQ(run_cli("logits -m " + dir + "/nemotron_f32.gguf" + tokens + dir + "/f32.npy").status, 0);
  std::vector<int64_t> shape;
  const auto from_folder = read_npy_f32(dir + "/folder.npy", shape);
  const auto from_gguf = read_npy_f32(dir + "/f32.npy", shape);
  EXPECT_EQ(shape, (std::vector<int64_t>{5, 301}));
  // A is stored rounded to f32 (see model/gguf_checkpoint.h): within rounding of the folder.
  EXPECT_LE(test::max_abs_diff(from_gguf, from_folder), 1e-5 * test::max_abs(from_folder));

  for (const std::string& model : {granite, dir + "/nemotron_q8_0.gguf"}) {
    SCOPED_TRACE(model);
    const std::string m = " -m " + model + " ";
    ASSERT_EQ(run_cli("logits" + m + tokens + dir + "/p.npy").status, 0);
    ASSERT_EQ(run_cli("logits" + m + tokens + dir + "/s.npy --mode step").status, 0);
    EXPECT_TRUE(test::same_bits(read_npy_f32(dir + "/p.npy", shape), read_npy_f32(dir + "/s.npy", shape)));
    const Output ids = run_cli("tokenize" + m + "-p 'hello world'");
    ASSERT_EQ(ids.status, 0) << ids.err;
    EXPECT_EQ(ids.out, run_cli("tokenize -m " + nemotron + " -p 'hello world'").out);
    const Output generated = run_cli("generate" + m + "--tokens 1,2,3 -n 6 --ignore-eos");
    ASSERT_EQ(generated.status, 0) << generated.err;
    EXPECT_FALSE(generated.out.empty());
    const Output run = run_cli("run" + m + "-p 'Once upon a time' -n 8 --seed 4 --ignore-eos");
    ASSERT_EQ(run.status, 0) << run.err;
    EXPECT_EQ(run.out.rfind("Once upon a time", 0), 0u) << run.out;
    const Output bench = run_cli("bench" + m + "--prompt-len 8 --gen-len 2 --repeats 1 --json");
    ASSERT_EQ(bench.status, 0) << bench.err;
  }
  // Re-quantizing a file to its own type rewrites it byte for byte.
  ASSERT_EQ(run_cli("quantize " + granite + " " + dir + "/again.gguf --type q4_k_m").status, 0);
  EXPECT_EQ(read_text_file(granite), read_text_file(dir + "/again.gguf"));
}

TEST(Cli, MixtureOfExpertsGgufFilesAreMadeQuantizedAndRun) {
  const std::string dir = test::make_temp_dir("cli_moe_gguf");
  // Nemotron-H with E layers made directly as a Q4_K_M nemotron_h_moe file; Granite with experts as
  // a folder then quantized to Q8_0 and f32.
  const std::string nemotron = dir + "/nemotron.gguf", granite = dir + "/granite";
  const Output made = run_cli(
      "make-model --arch nemotron-h --pattern ME*E --experts 4 --top-k 2 "
      "--format gguf --dtype q4_k_m --out " +
      nemotron + " --d-model 256 --vocab 301 --seed 7");
  ASSERT_EQ(made.status, 0) << made.err;
  EXPECT_EQ(GgufFile(nemotron).string_value("general.architecture"), "nemotron_h_moe");
  ASSERT_EQ(run_cli("make-model --arch granite-hybrid --experts 4 --top-k 2 --out " + granite +
                    " --d-model 64 --n-layer 2 --vocab 301 --seed 8")
                .status,
            0);
  for (const std::string type : {"f32", "q8_0"}) {
    const Output q = run_cli("quantize " + granite + " " + dir + "/granite_" + type + ".gguf --type " + type);
    ASSERT_EQ(q.status, 0) << q.err;
  }
  EXPECT_EQ(GgufFile(dir + "/granite_q8_0.gguf").unsigned_value("granitehybrid.expert_count"), 4u);
  const std::string tokens = " --tokens 5,6,7,8,9 --all-positions --out ";
  ASSERT_EQ(run_cli("logits -m " + granite + tokens + dir + "/folder.npy").status, 0);
  ASSERT_EQ(run_cli("logits -m " + dir + "/granite_f32.gguf" + tokens + dir + "/f32.npy").status, 0);
  std::vector<int64_t> shape;
  const auto from_folder = read_npy_f32(dir + "/folder.npy", shape);
  // A is stored rounded to f32 (see model/gguf_checkpoint.h): within rounding of the folder.
  EXPECT_LE(test::max_abs_diff(read_npy_f32(dir + "/f32.npy", shape), from_folder),
            1e-5 * test::max_abs(from_folder));
  for (const std::string& model : {nemotron, dir + "/granite_q8_0.gguf"}) {
    SCOPED_TRACE(model);
    const std::string m = " -m " + model + " ";
    ASSERT_EQ(run_cli("logits" + m + tokens + dir + "/p.npy").status, 0);
    ASSERT_EQ(run_cli("logits" + m + tokens + dir + "/s.npy --mode step").status, 0);
    EXPECT_TRUE(test::same_bits(read_npy_f32(dir + "/p.npy", shape), read_npy_f32(dir + "/s.npy", shape)));
    const Output generated = run_cli("generate" + m + "--tokens 1,2,3 -n 6 --ignore-eos");
    ASSERT_EQ(generated.status, 0) << generated.err;
    EXPECT_FALSE(generated.out.empty());
  }
  // Re-quantizing a file to its own type rewrites it byte for byte.
  ASSERT_EQ(run_cli("quantize " + nemotron + " " + dir + "/again.gguf --type q4_k_m").status, 0);
  EXPECT_EQ(read_text_file(nemotron), read_text_file(dir + "/again.gguf"));
}

TEST(Cli, FalconMambaFoldersWorkWithEveryCommand) {
  const std::string dir = test::make_temp_dir("cli_falcon");
  const std::string model = dir + "/falcon";
  // The Mamba-1 fixture's shape and seed: the same weights, so only the mixer norm differs.
  const Output made = run_cli("make-model --arch falcon-mamba --out " + model +
                              " --d-model 32 --n-layer 2 --vocab 301 --seed 3");
  ASSERT_EQ(made.status, 0) << made.err;
  const std::string config = read_text_file(model + "/config.json");
  EXPECT_NE(config.find("\"falcon_mamba\""), std::string::npos) << config;
  EXPECT_NE(config.find("\"FalconMambaForCausalLM\""), std::string::npos) << config;
  EXPECT_NE(config.find("\"mixer_rms_eps\""), std::string::npos) << config;

  const std::string base = "logits -m " + model + " --tokens 5,6,7,8,9 --all-positions --threads 2 --out ";
  ASSERT_EQ(run_cli(base + dir + "/prefill.npy").status, 0);
  ASSERT_EQ(run_cli(base + dir + "/step.npy --mode step").status, 0);
  ASSERT_EQ(
      run_cli("logits -m " + cli_model() + " --tokens 5,6,7,8,9 --all-positions --out " + dir + "/mamba.npy")
          .status,
      0);
  std::vector<int64_t> shape;
  const auto prefill = read_npy_f32(dir + "/prefill.npy", shape);
  EXPECT_EQ(shape, (std::vector<int64_t>{5, 301}));
  EXPECT_TRUE(test::same_bits(prefill, read_npy_f32(dir + "/step.npy", shape)));
  EXPECT_FALSE(test::same_bits(prefill, read_npy_f32(dir + "/mamba.npy", shape)));

  const Output generated = run_cli("generate -m " + model + " --tokens 1,2,3 -n 6 --ignore-eos");
  ASSERT_EQ(generated.status, 0) << generated.err;
  EXPECT_FALSE(generated.out.empty());
  const Output run = run_cli("run -m " + model + " -p 'Once upon a time' -n 8 --seed 4 --ignore-eos");
  ASSERT_EQ(run.status, 0) << run.err;
  EXPECT_EQ(run.out.rfind("Once upon a time", 0), 0u) << run.out;

  // A Mamba-1 state does not continue on FalconMamba, though the sizes match.
  ASSERT_EQ(
      run_cli("generate -m " + cli_model() + " --tokens 4,5 -n 1 --state-out " + dir + "/m.state").status, 0);
  const Output foreign = run_cli("generate -m " + model + " --tokens 6 -n 1 --state-in " + dir + "/m.state");
  EXPECT_NE(foreign.status, 0);
  EXPECT_NE(foreign.err.find("different model"), std::string::npos) << foreign.err;

  const Output original =
      run_cli("make-model --arch falcon-mamba --config-form original --out " + dir + "/o");
  EXPECT_NE(original.status, 0);
  EXPECT_NE(original.err.find("Hugging Face"), std::string::npos) << original.err;
}

TEST(Cli, Mamba2FoldersOfBothLayoutsWorkWithEveryCommand) {
  const std::string dir = test::make_temp_dir("cli_mamba2");
  // The HF layout in safetensors, and the original layout as published: pytorch_model.bin.
  for (const std::string layout : {"hf", "original"}) {
    SCOPED_TRACE(layout);
    const std::string model = dir + "/" + layout;
    const std::string format = layout == "hf" ? "safetensors" : "bin";
    const Output made =
        run_cli("make-model --arch mamba2 --layout " + layout + " --format " + format + " --out " + model +
                " --d-model 32 --n-layer 2 --vocab 301 --d-state 16 --headdim 16 --ngroups 2"
                " --chunk-size 8 --seed 3");
    ASSERT_EQ(made.status, 0) << made.err;
    const std::string config = read_text_file(model + "/config.json");
    EXPECT_NE(config.find(layout == "hf" ? "\"Mamba2ForCausalLM\"" : "\"Mamba2\""), std::string::npos)
        << config;
    EXPECT_TRUE(
        std::filesystem::exists(model + (layout == "hf" ? "/model.safetensors" : "/pytorch_model.bin")));

    // Prefill, decode steps (all positions, and the last one alone) and the chunked form.
    const std::string base =
        "logits -m " + model + " --tokens 5,6,7,8,9,10,11,12,13,14,15,16,17 --threads 2 --out ";
    ASSERT_EQ(run_cli(base + dir + "/prefill.npy --all-positions").status, 0);
    ASSERT_EQ(run_cli(base + dir + "/step.npy --all-positions --mode step").status, 0);
    ASSERT_EQ(run_cli(base + dir + "/last_step.npy --mode step").status, 0);
    ASSERT_EQ(run_cli(base + dir + "/last.npy").status, 0);
    const Output chunked = run_cli(base + dir + "/chunked.npy --all-positions --scan chunked --ssd-chunk 4");
    ASSERT_EQ(chunked.status, 0) << chunked.err;
    std::vector<int64_t> shape;
    const auto prefill = read_npy_f32(dir + "/prefill.npy", shape);
    EXPECT_EQ(shape, (std::vector<int64_t>{13, 301}));
    EXPECT_TRUE(test::same_bits(prefill, read_npy_f32(dir + "/step.npy", shape)));
    const auto last = read_npy_f32(dir + "/last.npy", shape);
    EXPECT_EQ(shape, (std::vector<int64_t>{1, 301}));
    EXPECT_TRUE(test::same_bits(last, read_npy_f32(dir + "/last_step.npy", shape)));
    EXPECT_TRUE(test::same_bits(last, std::vector<float>(prefill.end() - 301, prefill.end())));
    const auto ssd = read_npy_f32(dir + "/chunked.npy", shape);
    EXPECT_LE(test::max_abs_diff(ssd, prefill), 1e-5 * test::max_abs(prefill));

    const Output generated = run_cli("generate -m " + model + " --tokens 1,2,3 -n 6 --ignore-eos");
    ASSERT_EQ(generated.status, 0) << generated.err;
    EXPECT_FALSE(generated.out.empty());
    const Output run = run_cli("run -m " + model + " -p 'Once upon a time' -n 8 --seed 4 --ignore-eos");
    ASSERT_EQ(run.status, 0) << run.err;
    EXPECT_EQ(run.out.rfind("Once upon a time", 0), 0u) << run.out;
    for (const std::string scan : {"sequential", "chunked"}) {
      const Output bench = run_cli(
          "bench -m " + model + " --prompt-len 20 --gen-len 2 --repeats 1 --json --profile --scan " + scan);
      ASSERT_EQ(bench.status, 0) << bench.err;
      EXPECT_NE(bench.out.find("\"scan\":\"" + scan + "\""), std::string::npos) << bench.out;
      // Mamba-2 names its own phases: the SSD scan and the gated norm are separate.
      const auto figures = nlohmann::json::parse(bench.out);
      for (const char* phase : {"ssd scan", "gated rmsnorm", "conv+silu"})
        EXPECT_TRUE(figures["prefill_phases"].contains(phase)) << phase << " in " << bench.out;
    }
  }
  const Output bad_scan = run_cli("logits -m " + dir + "/hf --tokens 1 --out " + dir + "/x.npy --scan fast");
  EXPECT_NE(bad_scan.status, 0);
  EXPECT_NE(bad_scan.err.find("--scan"), std::string::npos) << bad_scan.err;
}

// --isa and MB_ISA: every set this CPU runs is named as isa_name() spells it (any case), the
// others are refused with the CPU's best in the message, and "auto" is the best.
TEST(IsaFlag, NamesEverySupportedSetAndRefusesTheOthers) {
  EXPECT_EQ(parse_isa("auto"), best_isa());
  for (const Isa isa : {Isa::Scalar, Isa::Avx2, Isa::Avx512, Isa::Neon}) {
    if (isa_supported(isa)) {
      EXPECT_EQ(parse_isa(isa_name(isa)), isa);
      continue;
    }
    try {
      parse_isa(isa_name(isa), "MB_ISA");
      ADD_FAILURE() << isa_name(isa) << " was accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("MB_ISA " + std::string(isa_name(isa)) +
                                           ": this CPU does not support it"),
                std::string::npos)
          << e.what();
    }
  }
  EXPECT_THROW(parse_isa(""), Error);
}

}  // namespace
}  // namespace mb
