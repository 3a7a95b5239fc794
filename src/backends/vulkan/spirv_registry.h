// SPDX-License-Identifier: MIT
// The compute shaders embedded into the binary as SPIR-V (cmake/vulkan_backend.cmake compiles
// src/backends/vulkan/shaders/*.comp with glslc and generates the registry).
#pragma once

#include <cstdint>
#include <span>
#include <string_view>

namespace mb::vulkan {

struct ShaderSpirv {
  const char* name;  // the file name without .comp
  // The shader with the device's fma() as mb_fma, and the one with fma emulated from double
  // precision (MB_EMULATED_FMA, for devices whose fma() is not fused).
  std::span<const uint32_t> native;
  std::span<const uint32_t> emulated_fma;
};

std::span<const ShaderSpirv> embedded_shaders();

// Throws mb::Error when no shader of that name is embedded.
const ShaderSpirv& find_shader(std::string_view name);

}  // namespace mb::vulkan
