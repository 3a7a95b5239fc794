// SPDX-License-Identifier: MIT
// Falcon-H1's checkpoint family (falcon_h1.cc).
#pragma once

#include "model/family.h"

namespace mb {

const Family& falcon_h1_family();

}  // namespace mb
