// SPDX-License-Identifier: MIT
// The grammar that enforces tool_choice "required" or a named function: GBNF text for the call
// syntax of the template's format, written exactly as the template shows calls to the model, so
// that a forced call is one the model was trained to write and ChatOutputParser reads back.
//   JsonInToolCallTags  <tool_call>\n{"name": "NAME", "arguments": ARGS}\n</tool_call>
//   ToolCallList        <TOOLCALL>[{"name": "NAME", "arguments": ARGS}, ...]</TOOLCALL>
//   XmlFunction         <tool_call>\n<function=NAME>\n<parameter=P>\nVALUE\n</parameter>\n...
//                       </function>\n</tool_call>
// ARGS follows the function's `parameters` JSON schema (json_schema_to_gbnf) where the converter
// supports the schema, else any JSON object: a tool whose schema uses a keyword outside the
// supported subset is still callable, with its arguments left to the model. XML parameters are
// the schema's required properties in order, then any of its others (any names where it lists
// none), each value text without '<'.
// With parallel_tool_calls false exactly one call is allowed, else one or more, one after another
// (the list format: one or more entries in its one list).
#pragma once

#include <string>
#include <vector>

#include "server/chat_output.h"
#include "server/chat_tools.h"

namespace mb::server {

// The GBNF (start rule `root`) of a forced call to any of `functions`, or to `only` when it is
// not empty. Throws mb::Error for ToolCallFormat::None or when no function is left to call.
std::string tool_call_gbnf(ToolCallFormat format, const std::vector<ToolFunction>& functions,
                           const std::string& only, bool parallel);

// `grammar` with every rule it defines renamed `prefix` + name (references included; literals and
// character classes untouched), so that several grammars can be joined into one.
std::string prefix_gbnf_rules(const std::string& grammar, const std::string& prefix);

}  // namespace mb::server
