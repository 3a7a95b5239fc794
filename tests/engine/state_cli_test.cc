// SPDX-License-Identifier: MIT
// The CLI's refusals of issue 41 (hardening round 3): text that is not UTF-8 in a chat, and
// flags and files that are empty or malformed, each reported as one clear line instead of an
// exception's text or a crash.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <string>

#include "cli_test_support.h"
#include "common/test_util.h"
#include "core/error.h"
#include "tokenizer/tokenizer.h"

namespace mb {
namespace {

using test::CliOutput;
using test::run_cli;

// A tiny Mamba-1 model with a byte-level tokenizer, made once per test binary.
const std::string& refusal_model() {
  static const std::string dir = [] {
    const std::string out = test::make_temp_dir("state_cli_model") + "/model";
    const CliOutput made =
        run_cli("make-model --out " + out + " --arch mamba1 --d-model 32 --n-layer 1 --vocab 301 --seed 3");
    EXPECT_EQ(made.status, 0) << made.err;
    return out;
  }();
  return dir;
}

// One invalid byte in a message is reported, the message dropped, and the conversation goes on: the
// next message is answered as if the bad one had never been typed.
TEST(StateCli, ChatRefusesAMessageThatIsNotUtf8AndGoesOn) {
  const std::string flags = "chat -m " + refusal_model() + " -n 4 --seed 2 --ignore-eos -t 1";
  const CliOutput mixed = run_cli(flags, "printf 'caf\\351 au lait\\nHello there\\n' | ");
  EXPECT_NE(mixed.status, 0);
  EXPECT_NE(mixed.err.find("error: the message is not valid UTF-8 (byte 0xe9 at offset 3)"),
            std::string::npos)
      << mixed.err;
  EXPECT_NE(mixed.err.find("1 message(s) got no reply"), std::string::npos) << mixed.err;
  EXPECT_EQ(mixed.err.find("json.exception"), std::string::npos) << mixed.err;
  const CliOutput clean = run_cli(flags, "printf 'Hello there\\n' | ");
  ASSERT_EQ(clean.status, 0) << clean.err;
  EXPECT_EQ(mixed.out, clean.out);

  const CliOutput system = run_cli(flags + " --system \"$(printf 'Be \\377brief')\"", "printf 'hi\\n' | ");
  EXPECT_NE(system.status, 0);
  // The last line, after the chat's note on the template it uses.
  const std::string refusal = "error: the system message is not valid UTF-8 (byte 0xff at offset 3)\n";
  ASSERT_GE(system.err.size(), refusal.size()) << system.err;
  EXPECT_EQ(system.err.substr(system.err.size() - refusal.size()), refusal) << system.err;
  EXPECT_EQ(system.err.find("json.exception"), std::string::npos) << system.err;
}

// An empty value for a flag that names something was read as the default (`--dtype ''`), as no stop
// string, or as a file named ''. Each is refused by name before anything runs.
TEST(StateCli, EmptyNamesAreRefusedUpFront) {
  const std::string m = " -m " + refusal_model() + " ";
  const std::string dir = test::make_temp_dir("state_cli_empty");
  const struct {
    std::string arguments, flag;
  } cases[] = {{"logits" + m + "--tokens 1,2 --dtype '' --out " + dir + "/l.npy", "--dtype"},
               {"generate" + m + "--tokens 1,2 -n 2 --stop ''", "--stop"},
               {"run" + m + "-p hi -n 2 --stop ok --stop ''", "--stop"},
               {"logits" + m + "--tokens 1,2 --out ''", "--out"},
               {"generate" + m + "--tokens 1,2 -n 2 --state-out ''", "--state-out"}};
  for (const auto& c : cases) {
    const CliOutput out = run_cli(c.arguments);
    EXPECT_NE(out.status, 0) << c.arguments;
    EXPECT_EQ(out.err.rfind("error: ", 0), 0u) << c.arguments << "\n" << out.err;
    EXPECT_NE(out.err.find(c.flag), std::string::npos) << c.arguments << "\n" << out.err;
    EXPECT_NE(out.err.find("an empty value"), std::string::npos) << c.arguments << "\n" << out.err;
    EXPECT_EQ(std::count(out.err.begin(), out.err.end(), '\n'), 1) << c.arguments << "\n" << out.err;
  }
  EXPECT_FALSE(std::filesystem::exists(dir + "/l.npy"));
}

// Two tokens with one id, in the vocabulary or among the added tokens, make a tokenizer that
// decodes that id as either: refused naming both.
TEST(StateCli, ATokenizerWithTwoTokensOfOneIdIsRefused) {
  const auto expect_refused = [](const std::string& text, const std::string& fragment) {
    try {
      Tokenizer::from_json_string(text, "tokenizer.json");
      ADD_FAILURE() << "accepted: " << text;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
    }
  };
  const std::string model = R"("model": {"type": "BPE", "merges": [], "vocab": {"a": 0, "b": 1, "c": 1}})";
  expect_refused("{" + model + "}", "tokens 'b' and 'c' both have id 1");
  const std::string fine = R"("model": {"type": "BPE", "merges": [], "vocab": {"a": 0, "b": 1, "c": 2}})";
  EXPECT_NO_THROW(Tokenizer::from_json_string("{" + fine + "}", "tokenizer.json"));
  expect_refused(
      "{" + fine + R"(, "added_tokens": [{"id": 3, "content": "<x>"}, {"id": 3, "content": "<y>"}]})",
      "'<y>' has id 3, which added token '<x>' already has");
}

}  // namespace
}  // namespace mb
