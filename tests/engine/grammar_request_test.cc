// SPDX-License-Identifier: MIT
// The "grammar" request field (server/request_constraint.h, through prepare_api_request as the
// server and the Python package call it) and the CLI's --grammar / --grammar-file. The field's
// 400s name the problem; the CLI's outputs match the grammar.
#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "cli_test_support.h"
#include "common/test_util.h"
#include "core/error.h"
#include "engine/grammar/grammar_constraint.h"
#include "io/file_io.h"
#include "server/openai_api.h"
#include "server/request_constraint.h"

namespace mb {
namespace {

const Tokenizer& grammar_request_tokenizer() {
  static const Tokenizer tokenizer = [] {
    const std::string path = test::make_temp_dir("grammar_request_tokenizer") + "/tokenizer.json";
    write_byte_level_tokenizer_json(path, 300);
    return Tokenizer::from_json_file(path);
  }();
  return tokenizer;
}

server::ApiRequest prepare_with_grammar(const std::string& body,
                                        server::ApiKind kind = server::ApiKind::Completion) {
  const auto trie = std::make_shared<const TokenTrie>(grammar_request_tokenizer());
  return server::prepare_api_request(kind, body, grammar_request_tokenizer(), server::ServedChatTemplate{},
                                     server::ApiDefaults{}, 1, "m", trie);
}

TEST(GrammarRequest, TheFieldBecomesTheRequestsConstraint) {
  const server::ApiRequest r =
      prepare_with_grammar(R"({"prompt": "Q", "grammar": "root ::= \"yes\" | \"no\""})");
  ASSERT_TRUE(r.grammar.has_value());
  ASSERT_NE(r.serve.constraint, nullptr);
  EXPECT_FALSE(r.serve.constraint->may_end());
  const server::ApiRequest chat = prepare_with_grammar(
      R"({"messages": [{"role": "user", "content": "Q"}], "grammar": "root ::= [0-9]+"})",
      server::ApiKind::Chat);
  EXPECT_NE(chat.serve.constraint, nullptr);
  // Without the field, or with an empty one (llama-server's "no grammar"), there is none; nor
  // does a caller without a trie need one when no grammar is asked for.
  EXPECT_EQ(prepare_with_grammar(R"({"prompt": "Q"})").serve.constraint, nullptr);
  EXPECT_EQ(prepare_with_grammar(R"({"prompt": "Q", "grammar": ""})").serve.constraint, nullptr);
  EXPECT_EQ(prepare_with_grammar(R"({"prompt": "Q", "grammar": null})").serve.constraint, nullptr);
  // Without the caller's trie it is built for the request.
  const server::ApiRequest own = server::prepare_api_request(
      server::ApiKind::Completion, R"({"prompt": "Q", "grammar": "root ::= \"a\""})",
      grammar_request_tokenizer(), server::ServedChatTemplate{}, server::ApiDefaults{}, 1, "m");
  EXPECT_NE(own.serve.constraint, nullptr);
}

TEST(GrammarRequest, ABadGrammarIsA400NamingTheProblem) {
  const auto refusal = [](const std::string& body) -> std::pair<int, std::string> {
    try {
      prepare_with_grammar(body);
    } catch (const server::ApiError& e) {
      return {e.status, e.what()};
    }
    return {0, ""};
  };
  auto [status, message] = refusal(R"({"prompt": "Q", "grammar": "root ::= answer"})");
  EXPECT_EQ(status, 400);
  EXPECT_NE(message.find("grammar: grammar line 1, column 10: undefined rule 'answer'"), std::string::npos)
      << message;
  std::tie(status, message) = refusal(R"({"prompt": "Q", "grammar": "start ::= \"a\""})");
  EXPECT_EQ(status, 400);
  EXPECT_NE(message.find("no 'root' rule"), std::string::npos) << message;
  std::tie(status, message) = refusal(R"({"prompt": "Q", "grammar": 7})");
  EXPECT_EQ(status, 400);
  EXPECT_NE(message.find("grammar must be a string (GBNF)"), std::string::npos) << message;
}

// ---- The CLI ----

const std::string& grammar_cli_model() {
  static const std::string dir = [] {
    const std::string d = test::make_temp_dir("grammar_cli") + "/m";
    const test::CliOutput made =
        test::run_cli("make-model --out " + d + " --d-model 32 --n-layer 2 --vocab 300 --seed 4");
    EXPECT_EQ(made.status, 0) << made.err;
    return d;
  }();
  return dir;
}

TEST(GrammarCli, RunAndGenerateOutputsMatchTheGrammar) {
  const std::string& model = grammar_cli_model();
  for (int seed = 0; seed < 4; ++seed) {
    const test::CliOutput out =
        test::run_cli("run -m " + model + " -p Answer: -n 20 --temp 1 --seed " + std::to_string(seed) +
                      " --grammar 'root ::= \"yes\" | \"no\"'");
    ASSERT_EQ(out.status, 0) << out.err;
    EXPECT_TRUE(out.out == "Answer:yes\n" || out.out == "Answer:no\n") << out.out;
    EXPECT_NE(out.err.find("stop: eos"), std::string::npos) << out.err;
  }
  const std::string file = test::make_temp_dir("grammar_cli_file") + "/digits.gbnf";
  write_file_atomically(file, std::string("# three digits\nroot ::= [0-9]{3}\n"));
  const test::CliOutput digits =
      test::run_cli("run -m " + model + " -p n= -n 20 --temp 1 --grammar-file " + file);
  ASSERT_EQ(digits.status, 0) << digits.err;
  ASSERT_EQ(digits.out.size(), std::string("n=123\n").size()) << digits.out;
  for (size_t i = 2; i < 5; ++i) EXPECT_TRUE(digits.out[i] >= '0' && digits.out[i] <= '9') << digits.out;
  // generate (ids): the same constraint through the checkpoint's tokenizer.
  const test::CliOutput ids =
      test::run_cli("generate -m " + model + " --tokens 1,2,3 -n 20 --grammar 'root ::= \"a\"'");
  ASSERT_EQ(ids.status, 0) << ids.err;
  const std::vector<int32_t> a = Tokenizer::from_model_dir(model).encode("a");
  ASSERT_EQ(a.size(), 1u);
  EXPECT_EQ(ids.out, std::to_string(a[0]) + "\n");
}

TEST(GrammarCli, BadGrammarsAndFilesAreRefusedByFlag) {
  const std::string& model = grammar_cli_model();
  const test::CliOutput bad = test::run_cli("run -m " + model + " -p x --grammar 'root ::= (\"a\"'");
  EXPECT_NE(bad.status, 0);
  EXPECT_NE(bad.err.find("--grammar: grammar line 1, column 10: unbalanced parentheses"), std::string::npos)
      << bad.err;
  const test::CliOutput missing =
      test::run_cli("run -m " + model + " -p x --grammar-file /nonexistent/g.gbnf");
  EXPECT_NE(missing.status, 0);
  EXPECT_NE(missing.err.find("/nonexistent/g.gbnf"), std::string::npos) << missing.err;
  const test::CliOutput both =
      test::run_cli("run -m " + model + " -p x --grammar 'root ::= \"a\"' --grammar-file /tmp/x.gbnf");
  EXPECT_NE(both.status, 0);
  const test::CliOutput chat = test::run_cli("run -m " + model + " -p x --chat --grammar 'root ::= \"a\"'");
  EXPECT_NE(chat.status, 0);
  EXPECT_NE(chat.err.find("do not apply to --chat"), std::string::npos) << chat.err;
}

}  // namespace
}  // namespace mb
