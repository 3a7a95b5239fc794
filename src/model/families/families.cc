// SPDX-License-Identifier: MIT
// The one list of declared checkpoint families (model/family.h): a new family is its own file in
// this folder plus its two lines here.
#include "model/family.h"

namespace mb {

// Each family's declaration, defined in its own file.
const Family& mamba1_family();
const Family& falcon_mamba_family();
const Family& mamba2_family();
const Family& mamba3_family();
const Family& granite_hybrid_family();
const Family& nemotron_h_family();
const Family& bamba_family();
const Family& jamba_family();
const Family& falcon_h1_family();
const Family& lfm2_family();
const Family& lfm2_moe_family();
const Family& zamba2_family();
const Family& qwen35_family();

const std::vector<const Family*>& all_families() {
  // Built once on first use from constant declarations; the list itself never changes.
  static const std::vector<const Family*> list = {
      &mamba1_family(),         &falcon_mamba_family(), &mamba2_family(),   &mamba3_family(),
      &granite_hybrid_family(), &nemotron_h_family(),   &bamba_family(),    &jamba_family(),
      &falcon_h1_family(),      &lfm2_family(),         &lfm2_moe_family(), &zamba2_family(),
      &qwen35_family(),
  };
  return list;
}

}  // namespace mb
