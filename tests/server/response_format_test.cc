// SPDX-License-Identifier: MIT
// response_format and llama-server's json_schema (server/response_format.h) through
// parse_api_request: each form fills ApiRequest::grammar with the converter's GBNF (the schema in
// the client's key order), "text" and absence leave it empty, and every bad form is a 400 naming
// the field and the problem.
#include <gtest/gtest.h>

#include <string>

#include "engine/grammar/json_schema.h"
#include "server/openai_api.h"

namespace mb::server {
namespace {

ApiRequest format_request(const std::string& extra, ApiKind kind = ApiKind::Chat) {
  const std::string body = (kind == ApiKind::Chat ? R"({"messages":[{"role":"user","content":"hi"}])"
                                                  : R"({"prompt":"hi")") +
                           (extra.empty() ? "" : "," + extra) + "}";
  return parse_api_request(kind, body, ApiDefaults{}, 7);
}

// The message of the 400 that `extra` provokes, or "" when the request parses.
std::string format_refusal(const std::string& extra) {
  try {
    format_request(extra);
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status, 400) << e.what();
    return e.what();
  }
  return "";
}

const char* const kFormatSchema =
    R"({"type":"object","properties":{"zz":{"type":"integer"},"aa":{"type":"boolean"}},"required":["zz","aa"],"additionalProperties":false})";

TEST(ResponseFormat, EachFormFillsTheGrammar) {
  EXPECT_FALSE(format_request("").grammar);
  EXPECT_FALSE(format_request(R"("response_format":{"type":"text"})").grammar);
  EXPECT_FALSE(format_request(R"("response_format":null)").grammar);
  EXPECT_EQ(format_request(R"("response_format":{"type":"json_object"})").grammar, json_object_gbnf());
  const std::string expected = json_schema_text_to_gbnf(kFormatSchema);
  EXPECT_EQ(format_request(std::string(R"("response_format":{"type":"json_schema","json_schema":{"name":"x","strict":true,"schema":)") +
                           kFormatSchema + "}}")
                .grammar,
            expected);
  // The client's key order survives (zz before aa), though nlohmann::json sorts keys.
  EXPECT_LT(expected.find("zz"), expected.find("aa"));
  EXPECT_EQ(format_request(std::string(R"("json_schema":)") + kFormatSchema).grammar, expected);
  EXPECT_EQ(format_request(std::string(R"("json_schema":)") + kFormatSchema, ApiKind::Completion).grammar, expected);
  EXPECT_EQ(format_request(std::string(R"("response_format":{"type":"json_object","schema":)") + kFormatSchema + "}")
                .grammar,
            expected);
  // Without a schema any JSON value will do, as in llama-server.
  EXPECT_EQ(format_request(R"("response_format":{"type":"json_schema","json_schema":{"name":"x"}})").grammar,
            json_schema_text_to_gbnf("{}"));
}

TEST(ResponseFormat, BadFormsAreRefusedByName) {
  struct Case {
    const char* extra;
    const char* expected;
  };
  const Case cases[] = {
      {R"("response_format":"json")", "response_format must be an object"},
      {R"("response_format":{})", "response_format.type must be"},
      {R"("response_format":{"type":"yaml"})", "response_format.type must be \"text\", \"json_object\" or \"json_schema\", got \"yaml\""},
      {R"("response_format":{"type":"json_schema"})", "response_format.json_schema must be an object"},
      {R"("response_format":{"type":"json_schema","json_schema":{"name":3,"schema":{}}})",
       "response_format.json_schema.name must be a string"},
      {R"("response_format":{"type":"json_schema","json_schema":{"strict":"yes","schema":{}}})",
       "response_format.json_schema.strict must be a boolean"},
      {R"("response_format":{"type":"json_schema","json_schema":{"schema":{"type":"string","pattern":"a+"}}})",
       "response_format.json_schema.schema: JSON schema #: pattern is not supported"},
      {R"("response_format":{"type":"json_schema","json_schema":{"schema":{"properties":{"a":{"minimum":1}}}}})",
       "JSON schema #/properties/a: minimum is not supported"},
      {R"("json_schema":{"type":"nothing"})", "json_schema: JSON schema #/type: unknown type \"nothing\""},
      {R"("json_schema":{},"response_format":{"type":"json_object"})", "response_format and json_schema cannot both be given"},
      {R"("grammar":"root ::= \"a\"","response_format":{"type":"json_object"})",
       "response_format and grammar cannot both be given"},
      {R"("grammar":"root ::= \"a\"","json_schema":{})", "json_schema and grammar cannot both be given"},
  };
  for (const Case& c : cases) {
    const std::string message = format_refusal(c.extra);
    EXPECT_NE(message.find(c.expected), std::string::npos) << c.extra << "\n  gave: " << message;
  }
  // "text" beside a grammar constrains nothing twice, nor does an empty grammar: accepted.
  EXPECT_EQ(format_refusal(R"("grammar":"","response_format":{"type":"json_object"})"), "");
  EXPECT_EQ(format_refusal(R"("grammar":"root ::= \"a\"","response_format":{"type":"text"})"), "");
}

}  // namespace
}  // namespace mb::server
