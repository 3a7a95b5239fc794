// SPDX-License-Identifier: MIT
// llama.cpp's --json-schema TEXT and --json-schema-file FILE for `generate` and `run`: a JSON
// Schema the output must follow, converted (engine/grammar/json_schema.h) into the GBNF that
// --grammar takes, so both go through the same constraint.
#pragma once

#include <CLI/CLI.hpp>
#include <string>

#include "grammar_flags.h"

namespace mb::cli {

struct JsonSchemaFlags {
  std::string text, file;
};

void add_json_schema_flags(CLI::App& cmd, JsonSchemaFlags& flags);
// The GBNF the flags ask for, or "" without them. Throws mb::Error naming the flag and the
// schema's problem (with its JSON pointer), or a grammar flag given as well.
std::string json_schema_flags_gbnf(const JsonSchemaFlags& flags, bool grammar_given);
// Puts the flags' GBNF into `grammar` (the --grammar text), so resolve_grammar compiles it; a
// schema with `run --chat` is refused, as a grammar is.
void apply_json_schema_flags(const JsonSchemaFlags& flags, GrammarFlags& grammar, bool chat = false);

}  // namespace mb::cli
