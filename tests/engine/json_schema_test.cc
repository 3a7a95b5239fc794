// SPDX-License-Identifier: MIT
// json_schema_to_gbnf's own rules: what each keyword writes, the schema's key order, and every
// refusal by name with its JSON pointer. Whether the grammars accept and refuse the right texts is
// json_schema_grammar_test.cc's (it runs them through the grammar engine), and the 1,000 seeded
// generations are json_schema_generate_test.cc's.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "common/json_schema_validator.h"
#include "core/error.h"
#include "engine/grammar/json_schema.h"

namespace mb {
namespace {

std::string schema_gbnf(const std::string& text) { return json_schema_text_to_gbnf(text); }

// The message of the mb::Error converting `text` throws, or "" when it converts.
std::string schema_refusal(const std::string& text) {
  try {
    json_schema_text_to_gbnf(text);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

std::string schema_rule(const std::string& gbnf, const std::string& name) {
  const size_t at = gbnf.find(name + " ::= ");
  if (at == std::string::npos) return "";
  return gbnf.substr(at, gbnf.find('\n', at) - at);
}

TEST(JsonSchema, PropertiesComeInTheSchemasOrder) {
  const std::string gbnf = schema_gbnf(
      R"({"type":"object","properties":{"zeta":{"type":"integer"},"alpha":{"type":"string"}},"required":["zeta","alpha"],"additionalProperties":false})");
  const std::string root = schema_rule(gbnf, "root-1");
  ASSERT_NE(root.find("zeta"), std::string::npos) << gbnf;
  EXPECT_LT(root.find("zeta"), root.find("alpha")) << root;
  // nlohmann::json sorts keys: that overload gives alphabetical order, still a valid grammar.
  const std::string sorted = json_schema_to_gbnf(nlohmann::json::parse(
      R"({"type":"object","properties":{"zeta":{"type":"integer"},"alpha":{"type":"string"}},"required":["zeta","alpha"]})"));
  const std::string sorted_root = schema_rule(sorted, "root-1");
  EXPECT_LT(sorted_root.find("alpha"), sorted_root.find("zeta")) << sorted_root;
}

TEST(JsonSchema, EachKeywordWritesItsRule) {
  EXPECT_NE(schema_gbnf(R"({"type":"integer"})").find("root ::= integer"), std::string::npos);
  EXPECT_NE(schema_gbnf(R"({"type":"number"})").find("root ::= number"), std::string::npos);
  EXPECT_NE(schema_gbnf(R"({"type":"boolean"})").find("root ::= boolean"), std::string::npos);
  EXPECT_NE(schema_gbnf(R"({"type":"null"})").find("root ::= null"), std::string::npos);
  EXPECT_NE(schema_gbnf(R"({"type":"string"})").find("root ::= string"), std::string::npos);
  EXPECT_NE(schema_gbnf(R"({})").find("root ::= value"), std::string::npos);
  EXPECT_NE(schema_gbnf("true").find("root ::= value"), std::string::npos);
  EXPECT_NE(schema_gbnf(R"({"type":["integer","null"]})").find("integer | null"), std::string::npos);
  EXPECT_NE(schema_gbnf(R"({"const":"a\"b"})").find(R"(root ::= "\"a\\\"b\"" space)"), std::string::npos);
  EXPECT_NE(schema_gbnf(R"({"enum":[1,"x",null]})").find(R"("1" space | "\"x\"" space | "null" space)"),
            std::string::npos);
  EXPECT_NE(schema_gbnf(R"({"type":"string","minLength":2,"maxLength":5})").find("char{2,5}"), std::string::npos);
  EXPECT_NE(schema_gbnf(R"({"type":"string","minLength":3})").find("char{3,}"), std::string::npos);
  EXPECT_NE(schema_gbnf(R"({"type":"array","items":{"type":"integer"},"minItems":2,"maxItems":4})")
                .find(R"(integer ( "," space integer ){1,3})"),
            std::string::npos);
  EXPECT_NE(schema_gbnf(R"({"type":"array","maxItems":0})").find(R"("[" space "]" space)"), std::string::npos);
  EXPECT_NE(schema_gbnf(R"({"type":"string","format":"date"})").find("root ::= date-string"), std::string::npos);
  EXPECT_NE(schema_gbnf(R"({"type":"string","format":"date-time"})").find("date \"T\" time"), std::string::npos);
  EXPECT_NE(schema_gbnf(R"({"type":"string","format":"time"})").find("root ::= time-string"), std::string::npos);
  EXPECT_NE(schema_gbnf(R"({"type":"string","format":"uuid"})").find("hex{8}"), std::string::npos);
  // Other formats are annotations: plain strings.
  EXPECT_NE(schema_gbnf(R"({"type":"string","format":"email"})").find("root ::= string"), std::string::npos);
  EXPECT_NE(schema_gbnf(R"({"type":"integer","nullable":true})").find("( integer | null )"), std::string::npos);
  EXPECT_NE(schema_gbnf(R"({"anyOf":[{"type":"integer"},{"type":"boolean"}]})").find("integer | boolean"),
            std::string::npos);
  EXPECT_NE(schema_gbnf(R"({"oneOf":[{"type":"integer"},{"type":"null"}]})").find("integer | null"),
            std::string::npos);
  // Annotations are ignored.
  EXPECT_NE(schema_gbnf(R"({"type":"integer","title":"t","description":"d","default":1,"examples":[2],"$schema":"x"})")
                .find("root ::= integer"),
            std::string::npos);
  EXPECT_NE(json_object_gbnf().find("root ::= object"), std::string::npos);
}

TEST(JsonSchema, WhitespaceIsBounded) {
  const std::string gbnf = schema_gbnf(R"({"type":"object"})");
  EXPECT_EQ(schema_rule(gbnf, "space"), R"(space ::= ( " " | "\n" [ \t]{0,20} )?)");
}

TEST(JsonSchema, ObjectsListRequiredThenOptionalThenExtraMembers) {
  const std::string strict = schema_gbnf(
      R"({"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"integer"}},"required":["b"],"additionalProperties":false})");
  EXPECT_NE(strict.find(R"("{" space "\"b\"" space ":" space integer ( "," space "\"a\"" space ":" space integer )? "}" space)"),
            std::string::npos)
      << strict;
  EXPECT_EQ(strict.find("additional"), std::string::npos) << strict;
  // Absent additionalProperties: further members after the listed ones, keys none of theirs.
  const std::string open = schema_gbnf(R"({"type":"object","properties":{"a":{"type":"integer"}}})");
  EXPECT_NE(open.find("root-additional-kv ::= root-additional-key \":\" space value"), std::string::npos) << open;
  EXPECT_NE(open.find("( \",\" space root-additional-kv )*"), std::string::npos) << open;
  // additionalProperties as a schema types the extra values.
  const std::string typed =
      schema_gbnf(R"({"type":"object","properties":{"a":{"type":"integer"}},"additionalProperties":{"type":"boolean"}})");
  EXPECT_NE(typed.find("root-additional-key \":\" space boolean"), std::string::npos) << typed;
}

TEST(JsonSchema, ReferencesBecomeOneRuleEachAndMayRecurse) {
  const std::string gbnf = schema_gbnf(
      R"({"$defs":{"node":{"type":"object","properties":{"kids":{"type":"array","items":{"$ref":"#/$defs/node"}}},"additionalProperties":false}},"$ref":"#/$defs/node"})");
  EXPECT_NE(gbnf.find("root ::= ref-node\n"), std::string::npos) << gbnf;
  EXPECT_NE(gbnf.find("( ref-node ( \",\" space ref-node )* )?"), std::string::npos) << gbnf;
  EXPECT_NE(schema_gbnf(R"({"definitions":{"x":{"type":"integer"}},"$ref":"#/definitions/x"})").find("ref-x ::= integer"),
            std::string::npos);
  // "#" is the whole schema.
  EXPECT_NE(schema_gbnf(R"({"type":"array","items":{"$ref":"#"}})").find("( root ( \",\" space root )* )?"),
            std::string::npos);
}

TEST(JsonSchema, RefusalsNameTheKeywordAndThePointer) {
  struct Case {
    const char* schema;
    const char* expected;
  };
  const Case cases[] = {
      {R"({"type":"string","pattern":"^a$"})", "JSON schema #: pattern is not supported"},
      {R"({"type":"integer","minimum":0})", "#: minimum is not supported"},
      {R"({"type":"integer","maximum":0})", "#: maximum is not supported"},
      {R"({"type":"number","exclusiveMinimum":0})", "exclusiveMinimum is not supported"},
      {R"({"type":"number","multipleOf":2})", "multipleOf is not supported"},
      {R"({"not":{"type":"null"}})", "#: not is not supported"},
      {R"({"if":{},"then":{},"else":{}})", "#: if is not supported"},
      {R"({"allOf":[{"type":"integer"}]})", "allOf is not supported"},
      {R"({"type":"object","patternProperties":{"a":{}}})", "patternProperties is not supported"},
      {R"({"type":"object","propertyNames":{"maxLength":2}})", "propertyNames is not supported"},
      {R"({"type":"object","minProperties":1})", "minProperties is not supported"},
      {R"({"type":"object","dependentRequired":{}})", "dependentRequired is not supported"},
      {R"({"type":"array","contains":{}})", "contains is not supported"},
      {R"({"type":"array","uniqueItems":true})", "uniqueItems is not supported"},
      {R"({"type":"array","prefixItems":[{}]})", "prefixItems is not supported"},
      {R"({"type":"array","items":[{}]})", "#/items: a list of schemas (a tuple) is not supported"},
      {R"({"type":"object","unevaluatedProperties":false})", "unevaluatedProperties is not supported"},
      {R"({"type":"object","properties":{"a b":{"type":"string","pattern":"x"}}})",
       "JSON schema #/properties/a b: pattern is not supported"},
      {R"({"type":"object","properties":{"x/y":{"anyOf":[{"type":"integer"},{"not":{}}]}}})",
       "#/properties/x~1y/anyOf/1: not is not supported"},
      {R"({"$ref":"http://example.com/s.json"})", "#/$ref: only references inside the schema"},
      {R"({"$ref":"#/$defs/missing"})", "#/$ref: the reference #/$defs/missing names nothing in the schema"},
      {R"({"$ref":"#"})", "reaches itself without an object or array between"},
      {R"({"$defs":{"a":{"$ref":"#/$defs/b"},"b":{"anyOf":[{"$ref":"#/$defs/a"}]}},"$ref":"#/$defs/a"})",
       "#/$defs/b/anyOf/0/$ref: the reference \"#/$defs/a\" reaches itself"},
      {R"({"$ref":"#/$defs/a","type":"integer","$defs":{"a":{}}})", "#: type beside $ref is not supported"},
      {R"({"anyOf":[{"type":"integer"}],"type":"integer"})", "#: type beside anyOf is not supported"},
      {R"({"anyOf":[]})", "#/anyOf: must be a non-empty list of schemas"},
      {R"({"enum":[]})", "#/enum: must be a non-empty list"},
      {R"({"type":"integer","enum":["a"]})", "#/enum: no value has the schema's type"},
      {R"({"type":"integer","const":"a"})", "does not have the schema's type"},
      {R"({"type":"float"})", "#/type: unknown type \"float\""},
      {R"({"type":[]})", "#/type: must be a type name or a non-empty list"},
      {"false", "#: the schema false admits no value"},
      {"[1]", "#: a schema must be an object or a boolean"},
      {R"({"type":"object","properties":{"a":7}})", "#/properties/a: a schema must be an object or a boolean"},
      {R"({"type":"object","required":["b"],"properties":{}})", "#/required: \"b\" is required but not in properties"},
      {R"({"type":"string","maxLength":-1})", "#/maxLength: must be a non-negative integer"},
      {R"({"type":"string","minLength":1.5})", "#/minLength: must be a non-negative integer"},
      {R"({"type":"string","minLength":3,"maxLength":2})", "#: maxLength is less than minLength"},
      {R"({"type":"array","minItems":3,"maxItems":2})", "#: maxItems is less than minItems"},
      {R"({"type":"array","maxItems":1000000})", "#/maxItems: is 1000000, more than the 1000 supported"},
      {R"({"type":"string","format":"uuid","maxLength":3})", "minLength or maxLength beside format uuid"},
      {R"({"type":"integer","nullable":"yes"})", "#/nullable: must be a boolean"},
  };
  for (const Case& c : cases) {
    const std::string message = schema_refusal(c.schema);
    EXPECT_NE(message.find(c.expected), std::string::npos) << c.schema << "\n  gave: " << message;
  }
}

TEST(JsonSchema, TheTextAndTheGrammarAreBounded) {
  EXPECT_NE(schema_refusal(std::string(JsonSchemaLimits::kMaxTextBytes + 1, ' ')).find("more than the"),
            std::string::npos);
  std::string deep;
  for (int i = 0; i < 80; ++i) deep += R"({"type":"array","items":)";
  deep += "{}";
  for (int i = 0; i < 80; ++i) deep += "}";
  EXPECT_NE(schema_refusal(deep).find("nest"), std::string::npos) << schema_refusal(deep);
  EXPECT_NE(schema_refusal("{").find("is not valid JSON"), std::string::npos);
  // A schema whose grammar would pass the size bound: many long enum values.
  nlohmann::json big = {{"enum", nlohmann::json::array()}};
  for (int i = 0; i < 2000; ++i) big["enum"].push_back(std::string(160, 'a') + std::to_string(i));
  EXPECT_NE(schema_refusal(big.dump()).find("makes a grammar of more than"), std::string::npos);
  // Deep nesting through the sorted overload is refused before nlohmann's recursion.
  nlohmann::json nested = nlohmann::json::object();
  for (int i = 0; i < 100; ++i) nested = nlohmann::json{{"items", nested}};
  EXPECT_THROW(json_schema_to_gbnf(nested), Error);
}

TEST(JsonSchema, TheTestValidatorChecksTheSubset) {
  const nlohmann::json schema = nlohmann::json::parse(
      R"({"$defs":{"n":{"type":["integer","null"]}},"type":"object","properties":{"a":{"$ref":"#/$defs/n"},
          "b":{"type":"array","items":{"enum":["x","y"]},"maxItems":2},"c":{"type":"string","format":"date","maxLength":10},
          "d":{"oneOf":[{"type":"integer"},{"type":"number"}]}},"required":["a"],"additionalProperties":false})");
  using test::json_schema_violation;
  EXPECT_EQ(json_schema_violation(nlohmann::json::parse(R"({"a":null,"b":["x"],"c":"2024-01-31","d":1.5})"), schema), "");
  EXPECT_NE(json_schema_violation(nlohmann::json::parse(R"({"b":[]})"), schema), "");
  EXPECT_NE(json_schema_violation(nlohmann::json::parse(R"({"a":1.5})"), schema), "");
  EXPECT_NE(json_schema_violation(nlohmann::json::parse(R"({"a":1,"b":["x","y","x"]})"), schema), "");
  EXPECT_NE(json_schema_violation(nlohmann::json::parse(R"({"a":1,"b":["z"]})"), schema), "");
  EXPECT_NE(json_schema_violation(nlohmann::json::parse(R"({"a":1,"c":"2024-13-01"})"), schema), "");
  EXPECT_NE(json_schema_violation(nlohmann::json::parse(R"({"a":1,"e":1})"), schema), "");
  EXPECT_NE(json_schema_violation(nlohmann::json::parse(R"({"a":1,"d":1})"), schema), "");  // both oneOf
}

}  // namespace
}  // namespace mb
