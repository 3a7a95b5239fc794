// SPDX-License-Identifier: MIT
#include "core/isa_flag.h"

#include <cctype>
#include <string>

#include "core/error.h"

namespace mb {

Isa parse_isa(std::string_view name, std::string_view what) {
  std::string lower(name);
  for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (lower == "auto") return best_isa();
  for (const Isa isa : {Isa::Scalar, Isa::Avx2, Isa::Avx512, Isa::Neon}) {
    if (lower != isa_name(isa)) continue;
    if (!isa_supported(isa))
      throw Error(std::string(what) + " " + lower + ": this CPU does not support it (its best is " +
                  isa_name(best_isa()) + ")");
    return isa;
  }
  throw Error(std::string(what) + " must be auto, avx512, avx2, neon or scalar, got '" + std::string(name) +
              "'");
}

}  // namespace mb
