// SPDX-License-Identifier: MIT
// The request fields that ask for JSON output: OpenAI's response_format ({"type": "text"},
// {"type": "json_object"}, {"type": "json_schema", "json_schema": {"name", "schema", "strict"}})
// and llama-server's top-level json_schema. Each becomes a GBNF grammar (engine/grammar/
// json_schema.h) that the grammar engine enforces, the same path as the request's own `grammar`.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

namespace mb::server {

// The GBNF `body` asks for through response_format or json_schema, or nullopt where it asks for
// none (absent, null or {"type": "text"}). `body_text` is the body as sent: the schema is read
// from it again keeping its key order, which nlohmann::json loses, so properties come out in the
// order the client wrote them. Throws ApiError (400) for a malformed field, a schema the
// converter refuses (naming the problem and the sub-schema), both fields at once, or either
// beside a `grammar`.
std::optional<std::string> read_response_format(std::string_view body_text, const nlohmann::json& body);

}  // namespace mb::server
