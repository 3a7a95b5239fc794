// SPDX-License-Identifier: MIT
// The fixture the Vulkan op tests share (ops_test.cc, batched_ops_test.cc): each GPU op against
// the CPU kernel (scalar instruction set, which every instruction set equals) with memcmp, and
// against the double-precision reference within NMSE 1e-7. The bitwise tier needs an exact fma on
// the device (Context::exact_fma); without it only the tolerance tier runs.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "backends/vulkan/vulkan_commands.h"
#include "common/test_util.h"
#include "core/threading.h"
#include "vulkan/vulkan_test_util.h"

namespace mb::test {

inline const ComputeContext kScalar{1, Isa::Scalar};
inline constexpr double kMaxNmse = 1e-7;

class VulkanOps : public test::VulkanTest {
 protected:
  // Checks both tiers: NMSE against the reference, and the CPU kernel's bits where possible.
  void expect_matches(const std::vector<float>& gpu, const std::vector<float>& cpu,
                      const std::vector<float>& reference, const std::string& what) {
    EXPECT_LE(test::nmse(gpu, reference), kMaxNmse) << what;
    if (ctx().exact_fma()) {
      const long diff = test::first_bit_difference(gpu, cpu);
      EXPECT_EQ(diff, -1) << what << ": element " << diff << " gpu " << (diff >= 0 ? gpu[diff] : 0.0f)
                          << " cpu " << (diff >= 0 ? cpu[diff] : 0.0f);
    }
  }
  void run(const std::function<void(vulkan::CommandSequence&)>& record) {
    vulkan::CommandSequence sequence(ctx(), 16);
    sequence.begin();
    record(sequence);
    sequence.end();
    sequence.run();
  }
};

}  // namespace mb::test
