// SPDX-License-Identifier: MIT
// The device flag's grammar and the errors a device request gives in every build: with or
// without the Vulkan backend, and with or without a device, asking for a device that cannot be
// had names it in the error instead of running elsewhere.
#include <gtest/gtest.h>

#include <string>

#include "common/model_fixture.h"
#include "core/error.h"
#include "model/device.h"
#include "model/model.h"

namespace mb {
namespace {

TEST(DeviceSpec, ParsesCpuAndVulkanWithAnIndex) {
  EXPECT_EQ(parse_device("cpu").kind, DeviceKind::Cpu);
  const DeviceSpec plain = parse_device("vulkan");
  EXPECT_EQ(plain.kind, DeviceKind::Vulkan);
  EXPECT_EQ(plain.index, 0);
  const DeviceSpec second = parse_device("vulkan:2");
  EXPECT_EQ(second.kind, DeviceKind::Vulkan);
  EXPECT_EQ(second.index, 2);
  EXPECT_EQ(second.text(), "vulkan:2");
  EXPECT_EQ(parse_device("cpu").text(), "cpu");
}

TEST(DeviceSpec, RejectsAnythingElseNamingIt) {
  for (const std::string text : {"", "gpu", "cuda", "vulkan:", "vulkan:-1", "vulkan:x", "vulkan2",
                                 "vulkan:1:2", "Vulkan", "cpu:0", "vulkan:99999999999"}) {
    try {
      parse_device(text);
      ADD_FAILURE() << "'" << text << "' was accepted";
    } catch (const Error& error) {
      EXPECT_NE(std::string(error.what()).find("unknown device '" + text + "'"), std::string::npos)
          << error.what();
    }
  }
}

TEST(DeviceSpec, AnUnavailableDeviceIsAnErrorNamingIt) {
  MakeModelOptions options;
  options.config = test::small_config(16, 1, 37);
  const std::string dir = test::write_model(options, "device_spec");
  LoadOptions load;
  load.device = {DeviceKind::Vulkan, 99};
  try {
    Model::load(dir, load);
    FAIL() << "expected an error";
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find("'vulkan:99'"), std::string::npos) << error.what();
  }
}

}  // namespace
}  // namespace mb
