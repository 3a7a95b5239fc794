// SPDX-License-Identifier: MIT
// The model families a checkpoint can be.
#pragma once

namespace mb {

// The family of a checkpoint: which mixer its Mamba layers use.
enum class Architecture { Mamba1, Mamba2, Mamba3 };

}  // namespace mb
