// SPDX-License-Identifier: MIT
// A small JSON Schema validator for tests: the subset json_schema_to_gbnf supports, written from
// the JSON Schema text rather than from the converter, so that the grammar's output is checked
// against what the schema means. oneOf is checked as exactly one (the converter takes it as
// anyOf, so tests give it alternatives that do not overlap).
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace mb::test {

// Empty when `value` is valid under `schema`, else the first violation found, with the JSON
// pointer of the value ("/items/2: 7 is not a string").
std::string json_schema_violation(const nlohmann::json& value, const nlohmann::json& schema);

}  // namespace mb::test
