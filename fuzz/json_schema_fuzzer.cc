// SPDX-License-Identifier: MIT
// Fuzzes JSON Schema text through json_schema_text_to_gbnf (the bounded parse, every keyword's
// reader, the reference resolver and its cycle check, the object and key-trie rules), then the
// grammar it writes through parse_gbnf: a grammar the converter accepts must parse, so a
// refusal there is a converter bug (an unescaped literal, an undefined or left-recursive rule),
// except the grammar engine's own size bounds, which a schema near the converter's can pass.
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "engine/grammar/gbnf.h"
#include "engine/grammar/json_schema.h"
#include "fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  std::string gbnf;
  mb::fuzz::expect_clean_refusal([&] { gbnf = mb::json_schema_text_to_gbnf(text); });
  if (gbnf.empty()) return 0;
  try {
    mb::parse_gbnf(gbnf);
  } catch (const mb::Error& e) {
    if (std::string_view(e.what()).find("more than") != std::string_view::npos) return 0;
    std::fprintf(stderr, "the converter wrote a grammar parse_gbnf refuses: %s\n%s\n", e.what(), gbnf.c_str());
    std::abort();
  }
  return 0;
}
