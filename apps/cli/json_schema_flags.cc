// SPDX-License-Identifier: MIT
#include "json_schema_flags.h"

#include "core/error.h"
#include "engine/grammar/json_schema.h"
#include "io/file_io.h"

namespace mb::cli {

void add_json_schema_flags(CLI::App& cmd, JsonSchemaFlags& flags) {
  auto* text = cmd.add_option("--json-schema", flags.text,
                              "JSON Schema the output must follow (converted to a grammar; see README)");
  auto* file = cmd.add_option("--json-schema-file", flags.file, "Read the JSON Schema from a file");
  text->excludes(file);
}

std::string json_schema_flags_gbnf(const JsonSchemaFlags& flags, bool grammar_given) {
  if (flags.text.empty() && flags.file.empty()) return "";
  const std::string flag = flags.file.empty() ? "--json-schema" : "--json-schema-file";
  if (grammar_given) throw Error(flag + " and --grammar/--grammar-file cannot both be given (each constrains the output)");
  const std::string text = flags.file.empty()
                               ? flags.text
                               : read_file_limited(flags.file, JsonSchemaLimits::kMaxTextBytes, "JSON schema file");
  try {
    return json_schema_text_to_gbnf(text, "the JSON schema");
  } catch (const Error& e) {
    throw Error(flag + ": " + e.what());
  }
}

void apply_json_schema_flags(const JsonSchemaFlags& flags, GrammarFlags& grammar, bool chat) {
  if (chat && !(flags.text.empty() && flags.file.empty()))
    throw Error("--json-schema and --json-schema-file do not apply to --chat (use `mambacpp serve`'s response_format)");
  std::string gbnf = json_schema_flags_gbnf(flags, !(grammar.text.empty() && grammar.file.empty()));
  if (!gbnf.empty()) grammar.text = std::move(gbnf);
}

}  // namespace mb::cli
