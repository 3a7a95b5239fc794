// SPDX-License-Identifier: MIT
#include "server/response_format.h"

#include "core/json_text.h"
#include "engine/grammar/json_schema.h"
#include "server/openai_api.h"

namespace mb::server {
namespace {

using nlohmann::json;
using nlohmann::ordered_json;

const json* present(const json& object, const char* name) {
  const auto it = object.find(name);
  return it == object.end() || it->is_null() ? nullptr : &*it;
}

// The sub-schema at `path` of the body, read again from its text in the client's key order. The
// body already passed parse_request_body's bounds, so this second parse is of a bounded text.
ordered_json ordered_at(std::string_view body_text, const std::vector<const char*>& path) {
  ordered_json node = ordered_json::parse(body_text);
  for (const char* key : path) {
    ordered_json next = std::move(node.at(key));
    node = std::move(next);
  }
  return node;
}

std::string convert(const ordered_json& schema, const std::string& field) {
  try {
    return json_schema_to_gbnf(schema);
  } catch (const Error& e) {
    throw invalid_request(field + ": " + e.what(), "invalid_json_schema");
  }
}

std::optional<std::string> read_format_object(std::string_view body_text, const json& format) {
  if (!format.is_object())
    throw invalid_request("response_format must be an object, got " + json_excerpt(format));
  const json* type = present(format, "type");
  if (!type || !type->is_string())
    throw invalid_request("response_format.type must be \"text\", \"json_object\" or \"json_schema\"");
  const std::string name = type->get<std::string>();
  if (name == "text") return std::nullopt;
  if (name == "json_object") {
    // llama-server's older form carries a schema here too.
    if (present(format, "schema")) return convert(ordered_at(body_text, {"response_format", "schema"}), "response_format.schema");
    return json_object_gbnf();
  }
  if (name != "json_schema")
    throw invalid_request("response_format.type must be \"text\", \"json_object\" or \"json_schema\", got " +
                          json_excerpt(*type));
  const json* wrapper = present(format, "json_schema");
  if (!wrapper || !wrapper->is_object())
    throw invalid_request("response_format.json_schema must be an object with the schema, got " +
                          (wrapper ? json_excerpt(*wrapper) : std::string("nothing")));
  if (const json* n = present(*wrapper, "name"); n && !n->is_string())
    throw invalid_request("response_format.json_schema.name must be a string, got " + json_excerpt(*n));
  if (const json* strict = present(*wrapper, "strict"); strict && !strict->is_boolean())
    throw invalid_request("response_format.json_schema.strict must be a boolean, got " + json_excerpt(*strict));
  // Without a schema any JSON value will do, as in llama-server.
  if (!present(*wrapper, "schema")) return convert(ordered_json::object(), "response_format.json_schema.schema");
  return convert(ordered_at(body_text, {"response_format", "json_schema", "schema"}),
                 "response_format.json_schema.schema");
}

}  // namespace

std::optional<std::string> read_response_format(std::string_view body_text, const json& body) {
  std::optional<std::string> grammar;
  const json* format = present(body, "response_format");
  if (format) grammar = read_format_object(body_text, *format);
  if (present(body, "json_schema")) {
    if (grammar) throw invalid_request("response_format and json_schema cannot both be given");
    grammar = convert(ordered_at(body_text, {"json_schema"}), "json_schema");
  }
  // An empty grammar asks for nothing (as the grammar field's reader takes it).
  const json* gbnf = present(body, "grammar");
  if (grammar && gbnf && !(gbnf->is_string() && gbnf->get_ref<const std::string&>().empty()))
    throw invalid_request(std::string(format ? "response_format" : "json_schema") +
                          " and grammar cannot both be given (each constrains the output)");
  return grammar;
}

}  // namespace mb::server
