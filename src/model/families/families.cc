// SPDX-License-Identifier: MIT
// The one list of declared checkpoint families (model/family.h): a new family is its own file in
// this folder plus its two lines here.
#include "model/family.h"

namespace mb {

// Each family's declaration, defined in its own file.
const Family& zamba2_family();

const std::vector<const Family*>& all_families() {
  // Built once on first use from constant declarations; the list itself never changes.
  static const std::vector<const Family*> list = {&zamba2_family()};
  return list;
}

}  // namespace mb
