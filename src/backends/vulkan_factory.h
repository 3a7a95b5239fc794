// SPDX-License-Identifier: MIT
// The Vulkan backend as the rest of the engine asks for it, without its headers: defined by
// backends/vulkan/vulkan_factory.cc in a build with the backend, by backends/no_vulkan.cc
// without it (an error saying how to get one).
#pragma once

#include <memory>

#include "backends/backend.h"

namespace mb {

// The Vulkan device `index` of `mambacpp devices`; throws mb::Error when there is none.
std::shared_ptr<const Backend> make_vulkan_backend(int index);

}  // namespace mb
