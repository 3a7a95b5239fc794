// SPDX-License-Identifier: MIT
// What a llama.cpp user types out of habit: a mistyped command or flag gets the closest real one,
// llama.cpp's common flags work where they mean something here (-ngl, -c for run, --jinja) and are
// refused with the reason where they do not (--mlock, -fa), and a model path that is not there is
// reported as missing.
#include <gtest/gtest.h>

#include <cstdio>

#include "cli_test_support.h"
#include "common/test_util.h"

namespace mb {
namespace {

using test::run_cli;

const std::string& habits_model() {
  static const std::string dir = [] {
    const std::string d = test::make_temp_dir("cli_habits_model") + "/model";
    const test::CliOutput made =
        run_cli("make-model --out " + d + " --d-model 32 --n-layer 2 --vocab 301 --seed 3");
    EXPECT_EQ(made.status, 0) << made.err;
    return d;
  }();
  return dir;
}

TEST(CliHabits, AMistypedCommandOrFlagGetsTheClosestOne) {
  const test::CliOutput command = run_cli("chta -m " + habits_model());
  EXPECT_NE(command.status, 0);
  EXPECT_NE(command.err.find("'chta' is not a command; did you mean 'chat'?"), std::string::npos)
      << command.err;
  const test::CliOutput flag = run_cli("run -m " + habits_model() + " -p hi --tmep 0.5");
  EXPECT_NE(flag.status, 0);
  EXPECT_NE(flag.err.find("'--tmep' is not an option of 'run'; did you mean '--temp'?"), std::string::npos)
      << flag.err;
  EXPECT_NE(run_cli("generate -m " + habits_model() + " --tokens 1 --n-predcit 3").err.find("'--n-predict'"),
            std::string::npos);
  // Nothing close: no guess, still the error.
  const test::CliOutput far = run_cli("run -m " + habits_model() + " -p hi --zzzzzzzzzz");
  EXPECT_NE(far.status, 0);
  EXPECT_NE(far.err.find("'--zzzzzzzzzz' is not an option of 'run'"), std::string::npos) << far.err;
  EXPECT_EQ(far.err.find("did you mean"), std::string::npos) << far.err;
}

TEST(CliHabits, LlamaCppFlagsWorkOrAreRefusedWithTheReason) {
  const std::string m = " -m " + habits_model() + " ";
  for (const std::string flag : {"--mlock", "-fa", "--flash-attn", "--no-mmap"}) {
    const test::CliOutput refused = run_cli("run" + m + "-p hi " + flag);
    EXPECT_NE(refused.status, 0) << flag;
    EXPECT_NE(refused.err.find("error: " + flag + " is not supported: "), std::string::npos) << refused.err;
  }
  // A prompt that reads like a flag is text.
  EXPECT_EQ(run_cli("run" + m + "-n 1 -p --mlock").status, 0);
  EXPECT_EQ(run_cli("run" + m + "-p hi -n 2 --jinja").status, 0);
  const test::CliOutput cpu = run_cli("generate" + m + "--tokens 1,2 -n 2 -ngl 0");
  ASSERT_EQ(cpu.status, 0) << cpu.err;
  EXPECT_EQ(cpu.err.find("GPU"), std::string::npos) << cpu.err;
  // -ngl above 0 selects the GPU and says so (the load then fails where there is none).
  const test::CliOutput gpu = run_cli("generate" + m + "--tokens 1,2 -n 2 -ngl 99");
  EXPECT_NE(gpu.err.find("-ngl 99: running on the GPU (--device vulkan)"), std::string::npos) << gpu.err;
  EXPECT_NE(run_cli("generate" + m + "--tokens 1 -ngl -1").err.find("-ngl/--n-gpu-layers must be"),
            std::string::npos);
}

// llama-cli's -c: the prompt and the generated tokens share the context.
TEST(CliHabits, RunTakesAContextSize) {
  const std::string m = " -m " + habits_model() + " ";
  const test::CliOutput run = run_cli("run" + m + "-p 'Once upon a time' -n 50 -c 20 --ignore-eos --seed 1");
  ASSERT_EQ(run.status, 0) << run.err;
  long long prompt = 0, generated = 0;
  const size_t at = run.err.find("prompt tokens: ");
  ASSERT_NE(at, std::string::npos) << run.err;
  ASSERT_EQ(std::sscanf(run.err.c_str() + at, "prompt tokens: %lld", &prompt), 1);
  const size_t count_at = run.err.find(" tokens, stop: ");
  ASSERT_NE(count_at, std::string::npos) << run.err;
  ASSERT_EQ(std::sscanf(run.err.c_str() + run.err.rfind('(', count_at) + 1, "%lld", &generated), 1)
      << run.err;
  EXPECT_GT(prompt, 0);
  EXPECT_EQ(prompt + generated, 20) << run.err;
  const test::CliOutput full = run_cli("run" + m + "-p 'Once upon a time' -c 2");
  EXPECT_NE(full.status, 0);
  EXPECT_NE(full.err.find("context size (-c) is 2"), std::string::npos) << full.err;
}

TEST(CliHabits, AMissingModelIsReportedAsMissing) {
  const std::string dir = test::make_temp_dir("cli_habits_missing");
  const test::CliOutput folder = run_cli("run -m " + dir + "/no-such-model -p hi");
  EXPECT_NE(folder.status, 0);
  EXPECT_NE(folder.err.find("model folder '" + dir + "/no-such-model' does not exist"), std::string::npos)
      << folder.err;
  const test::CliOutput file = run_cli("chat -m " + dir + "/model.gguf", "printf 'hi\\n' | ");
  EXPECT_NE(file.status, 0);
  EXPECT_NE(file.err.find("model file '" + dir + "/model.gguf' does not exist"), std::string::npos)
      << file.err;
  // A folder that is there but holds no model still says what it lacks.
  EXPECT_NE(run_cli("run -m " + dir + " -p hi").err.find("has no config.json"), std::string::npos);
}

}  // namespace
}  // namespace mb
