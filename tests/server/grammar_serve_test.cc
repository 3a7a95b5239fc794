// SPDX-License-Identifier: MIT
// The "grammar" field through `mambacpp serve` over loopback: completions and chat answers match
// their grammar (non-streamed and streamed), end with finish_reason "stop", and a bad grammar is
// a 400 in OpenAI's shape naming the problem.
#include <gtest/gtest.h>
#include <httplib.h>

#include <nlohmann/json.hpp>
#include <string>

#include "server_process.h"

namespace mb {
namespace {

using nlohmann::json;

json grammar_serve_post(httplib::Client& client, const std::string& path, const json& body,
                        int status = 200) {
  const auto res = client.Post(path.c_str(), body.dump(), "application/json");
  EXPECT_TRUE(res) << path;
  if (!res) return json();
  EXPECT_EQ(res->status, status) << body.dump() << " -> " << res->body;
  return json::parse(res->body, nullptr, false);
}

TEST(ServeGrammar, AnswersMatchTheGrammarAndABadOneIsA400) {
  test::ServerProcess server(test::server_test_model(), "-t 1");
  ASSERT_GT(server.port(), 0);
  httplib::Client client("127.0.0.1", server.port());
  client.set_read_timeout(120, 0);
  for (int seed = 0; seed < 6; ++seed) {
    const json r = grammar_serve_post(client, "/v1/completions",
                                      {{"prompt", "Is it?"},
                                       {"max_tokens", 16},
                                       {"temperature", 1.0},
                                       {"seed", seed},
                                       {"grammar", R"(root ::= "yes" | "no")"}});
    const std::string text = r["choices"][0]["text"];
    EXPECT_TRUE(text == "yes" || text == "no") << r.dump();
    EXPECT_EQ(r["choices"][0]["finish_reason"], "stop") << r.dump();
  }
  const json chat = grammar_serve_post(client, "/v1/chat/completions",
                                       {{"messages", {{{"role", "user"}, {"content", "A number?"}}}},
                                        {"max_tokens", 16},
                                        {"grammar", "root ::= [1-9] [0-9]{0,2}"}});
  const std::string digits = chat["choices"][0]["message"]["content"];
  ASSERT_FALSE(digits.empty());
  ASSERT_LE(digits.size(), 3u);
  for (char c : digits) EXPECT_TRUE(c >= '0' && c <= '9') << digits;

  // Streamed: the pieces join to an answer of the grammar.
  std::string events;
  httplib::Headers headers;
  const json stream_body = {
      {"prompt", "Is it?"}, {"max_tokens", 16}, {"stream", true}, {"grammar", R"(root ::= "yes" | "no")"}};
  const auto res = client.Post("/v1/completions", headers, stream_body.dump(), "application/json");
  ASSERT_TRUE(res);
  std::string joined;
  size_t at = 0;
  while ((at = res->body.find("data: {", at)) != std::string::npos) {
    const size_t end = res->body.find("\n\n", at);
    const json chunk = json::parse(res->body.substr(at + 6, end - at - 6), nullptr, false);
    if (chunk.contains("choices") && !chunk["choices"].empty())
      joined += chunk["choices"][0].value("text", "");
    at = end;
  }
  EXPECT_TRUE(joined == "yes" || joined == "no") << res->body;

  const json bad = grammar_serve_post(client, "/v1/completions",
                                      {{"prompt", "x"}, {"grammar", "root ::= \"a\" | b"}}, 400);
  EXPECT_EQ(bad["error"]["code"], "invalid_grammar") << bad.dump();
  EXPECT_NE(bad["error"]["message"].get<std::string>().find("line 1, column 16: undefined rule 'b'"),
            std::string::npos)
      << bad.dump();
  const json wrong =
      grammar_serve_post(client, "/v1/chat/completions",
                         {{"messages", {{{"role", "user"}, {"content", "x"}}}}, {"grammar", {1}}}, 400);
  EXPECT_NE(wrong["error"]["message"].get<std::string>().find("grammar must be a string"), std::string::npos);
  // The server keeps serving.
  grammar_serve_post(client, "/v1/completions", {{"prompt", "hi"}, {"max_tokens", 2}});
}

}  // namespace
}  // namespace mb
