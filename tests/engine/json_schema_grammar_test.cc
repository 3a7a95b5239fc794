// SPDX-License-Identifier: MIT
// The converter's grammars run through the grammar engine (parse_gbnf and its matcher): they
// accept hand-written valid values (in other whitespace and member subsets than a model would
// pick) and refuse invalid ones, so the converter is checked on texts, not only on what a random
// model happened to write (json_schema_generate_test.cc).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "engine/grammar/gbnf.h"
#include "engine/grammar/grammar_matcher.h"
#include "engine/grammar/json_schema.h"

namespace mb {
namespace {

bool schema_text_matches(const std::string& gbnf, const std::string& text) {
  const Grammar g = parse_gbnf(gbnf);
  GrammarState s = grammar_initial_state(g);
  return grammar_advance_bytes(g, s, text) && grammar_may_end(s);
}

TEST(JsonSchemaGrammar, AcceptsValidTextsAndRefusesInvalidOnes) {
  struct Case {
    const char* schema;
    std::vector<const char*> accepted, refused;  // refused: invalid, or valid in an order the grammar does not write
  };
  const std::vector<Case> cases = {
      {R"({"type":"object","properties":{"b":{"type":"integer"},"a":{"type":"string","maxLength":3}},"required":["b"],"additionalProperties":false})",
       {R"({"b":1})", R"({ "b" : -20 , "a" : "xyz" })", "{\n  \"b\": 0,\n\t\"a\": \"\\u00e9\"\n}", R"({"b":7,"a":"é"})"},
       {R"({"a":"x","b":1})", R"({"b":1,"a":"long"})", R"({"b":1.5})", R"({"b":01})", R"({})", R"({"b":1,"c":2})",
        R"({"b":1,"a":"\ud800"})"}},
      {R"({"type":"object","properties":{"a":{"type":"integer"}}})",
       {R"({"a":1,"extra":[true,null]})", R"({"ab":{},"b":"x"})", R"({})", R"({"x":1})"},
       {R"({"a":1,"a":2})", R"({"x":1,"a":1})"}},
      {R"({"type":"array","items":{"enum":["x",2,null]},"minItems":1,"maxItems":2})",
       {R"(["x"])", R"([2, null])"},
       {R"([])", R"(["x","x","x"])", R"(["y"])"}},
      {R"({"type":"number"})", {"0", "-1.25e-3", "12E+2"}, {"01", "1.", ".5", "+1", "1e999"}},
      {R"({"type":"string","format":"date-time"})", {R"("2024-02-29T23:59:59Z")", R"("2024-12-31T00:00:00.5+05:30")"},
       {R"("2024-13-01T00:00:00Z")", R"("2024-01-01")"}},
      {R"({"type":"string","format":"uuid"})", {R"("123e4567-e89b-12d3-a456-426614174000")"}, {R"("123e4567")"}},
      {R"({"$defs":{"t":{"type":"object","properties":{"k":{"type":"array","items":{"$ref":"#/$defs/t"}}},"required":["k"],"additionalProperties":false}},"$ref":"#/$defs/t"})",
       {R"({"k":[{"k":[]},{"k":[{"k":[]}]}]})"},
       {R"({"k":[{}]})"}},
      {R"({"anyOf":[{"const":1},{"type":"string","minLength":2,"maxLength":2}],"nullable":true})",
       {"1", R"("ab")", "null"},
       {"2", R"("a")"}},
  };
  for (const Case& c : cases) {
    const std::string gbnf = json_schema_text_to_gbnf(c.schema);
    for (const char* text : c.accepted) EXPECT_TRUE(schema_text_matches(gbnf, text)) << c.schema << "\n  " << text;
    for (const char* text : c.refused) EXPECT_FALSE(schema_text_matches(gbnf, text)) << c.schema << "\n  " << text;
  }
}

}  // namespace
}  // namespace mb
