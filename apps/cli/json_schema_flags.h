// SPDX-License-Identifier: MIT
// llama.cpp's --json-schema TEXT and --json-schema-file FILE for `generate` and `run`: a JSON
// Schema the output must follow, converted (engine/grammar/json_schema.h) into the GBNF that
// --grammar takes, so both go through the same constraint.
#pragma once

#include <CLI/CLI.hpp>
#include <string>

namespace mb::cli {

struct JsonSchemaFlags {
  std::string text, file;
};

void add_json_schema_flags(CLI::App& cmd, JsonSchemaFlags& flags);
// The GBNF the flags ask for, or "" without them. Throws mb::Error naming the flag and the
// schema's problem (with its JSON pointer), or a grammar flag given as well.
std::string json_schema_flags_gbnf(const JsonSchemaFlags& flags, bool grammar_given);

}  // namespace mb::cli
