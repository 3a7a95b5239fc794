// SPDX-License-Identifier: MIT
// JSON Schema -> GBNF: the grammar behind response_format {"type": "json_schema"}, llama-server's
// json_schema field and the CLI's --json-schema. The grammar engine (grammar branch) then masks
// every token that would leave the grammar, so the output always parses and validates.
//
// Supported (OpenAI's strict subset and a little more, as llama.cpp's json-schema-to-grammar):
// type (object, array, string, number, integer, boolean, null, or a list of them), enum, const,
// properties (in the order written), required, additionalProperties (false; true, absent or a
// schema allow further string-keyed members after the listed ones), items, minItems/maxItems,
// minLength/maxLength, anyOf/oneOf (oneOf taken as anyOf: its alternatives should not overlap),
// nullable, $ref to "#", "#/$defs/NAME" or "#/definitions/NAME" (recursion allowed), and the
// string formats date, time, date-time and uuid. Other formats are annotations in JSON Schema and
// are plain strings here. Keywords that carry no assertion (title, description, default,
// examples, $schema, $id, $comment...) are ignored, as is any keyword JSON Schema does not define.
//
// Every assertion keyword outside the subset (pattern, minimum, not, if/then/else, allOf,
// patternProperties, uniqueItems: true...) is refused by name, never ignored: a grammar that
// dropped it would let through output the schema forbids. Errors are mb::Error naming the problem
// and the JSON pointer of the sub-schema ("JSON schema #/properties/age: ...").
//
// Whitespace between tokens is bounded (nothing, one space, or a newline and up to 20 spaces or
// tabs, as llama.cpp allows), so a model cannot spend its whole budget on blanks.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace mb {

// The bounds on a schema and on the grammar made from it.
struct JsonSchemaLimits {
  static constexpr size_t kMaxTextBytes = size_t{1} << 20;   // json_schema_text_to_gbnf's input
  static constexpr int kMaxDepth = 64;                       // nested arrays/objects of the text
  static constexpr int64_t kMaxRepetition = 1000;            // minItems, maxItems, min/maxLength
  static constexpr size_t kMaxGrammarBytes = size_t{4} << 20;  // the GBNF written
  static constexpr size_t kMaxRules = 50000;
};

// The GBNF for `schema`; its start rule is `root`. Throws mb::Error as described above.
// nlohmann::json sorts object keys, so properties come out in alphabetical order from this
// overload; the ordered_json one (and json_schema_text_to_gbnf) keep the schema's own order.
std::string json_schema_to_gbnf(const nlohmann::json& schema);
std::string json_schema_to_gbnf(const nlohmann::ordered_json& schema);

// Parses `text` (bounded: size, depth) keeping the key order, then converts it. `source` names
// the text in errors ("the JSON schema", "--json-schema-file x.json").
std::string json_schema_text_to_gbnf(std::string_view text, const std::string& source = "the JSON schema");

// The GBNF for any JSON object (response_format {"type": "json_object"}).
std::string json_object_gbnf();

}  // namespace mb
