// SPDX-License-Identifier: MIT
// Reading the agent APIs' request bodies (server/responses_api.h, server/messages_api.h): both
// parse into nlohmann::ordered_json (to keep the client's key order, see server/chat_request.h)
// and report every mistyped or missing field as a 400 naming its path, with the same helpers.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "core/json_text.h"
#include "server/openai_api.h"

namespace mb::server::agent_json {

using ojson = nlohmann::ordered_json;

// A short, printable excerpt of `value` for an error message (core/json_text.h's rules).
inline std::string excerpt_of(const ojson& value) {
  return json_excerpt(nlohmann::json::parse(value.dump(-1, ' ', false, ojson::error_handler_t::replace)));
}

// "<where> must be <expected>, got <excerpt>" as a 400.
inline ApiError wrong_value(const std::string& where, const char* expected, const ojson& value) {
  return invalid_request(where + " must be " + expected + ", got " + excerpt_of(value));
}

// The field's value, or null when absent or null (both APIs treat an explicit null as not given).
inline const ojson* member(const ojson& object, const char* name) {
  const auto it = object.find(name);
  if (it == object.end() || it->is_null()) return nullptr;
  return &*it;
}

// A required string field; a 400 naming `where.name` when it is missing or not a string.
inline const std::string& string_member(const ojson& object, const char* name, const std::string& where) {
  const ojson* value = member(object, name);
  if (!value) throw invalid_request(where + "." + name + " is required");
  if (!value->is_string()) throw wrong_value(where + "." + name, "a string", *value);
  return value->get_ref<const std::string&>();
}

}  // namespace mb::server::agent_json
