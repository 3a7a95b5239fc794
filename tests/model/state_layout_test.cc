// SPDX-License-Identifier: MIT
// StateLayout: the named parts of a sequence's state, their offsets in the flat f32 array, and
// the descriptions that validation errors and `bench --json` print.
#include "model/state_layout.h"

#include <gtest/gtest.h>

#include "core/error.h"

namespace mb {
namespace {

// Two SSM layers, then a layer with a KV cache in place of the conv history (the shape of a
// hybrid), then an SSM layer again.
StateLayout hybrid_layout() {
  StateLayout layout;
  for (int l = 0; l < 2; ++l) layout.add_layer({{"conv", {3, 8}}, {"ssm", {16, 8}}});
  layout.add_layer({{"k_cache", {4, 2, 5}}, {"v_cache", {4, 2, 5}}});
  layout.add_layer({{"conv", {3, 8}}, {"ssm", {16, 8}}});
  return layout;
}

TEST(StateLayout, PartsFollowEachOtherLayerAfterLayer) {
  const StateLayout layout = hybrid_layout();
  ASSERT_EQ(layout.n_layers(), 4);
  const int64_t ssm_layer = 3 * 8 + 16 * 8, kv_layer = 2 * 4 * 2 * 5;
  EXPECT_EQ(layout.layer(0).offset, 0);
  EXPECT_EQ(layout.layer(0).floats, ssm_layer);
  EXPECT_EQ(layout.offset(0, 1), 3 * 8);
  EXPECT_EQ(layout.layer(1).offset, ssm_layer);
  EXPECT_EQ(layout.offset(1, 1), ssm_layer + 3 * 8);
  EXPECT_EQ(layout.layer(2).offset, 2 * ssm_layer);
  EXPECT_EQ(layout.layer(2).floats, kv_layer);
  EXPECT_EQ(layout.offset(2, 1), 2 * ssm_layer + 4 * 2 * 5);
  EXPECT_EQ(layout.layer(3).offset, 2 * ssm_layer + kv_layer);
  EXPECT_EQ(layout.total_floats(), static_cast<size_t>(3 * ssm_layer + kv_layer));
  EXPECT_EQ(layout.layer(2).parts[1].floats(), 40);
}

TEST(StateLayout, PartsAreFoundByNameAndAMissingNameIsAnError) {
  const StateLayout layout = hybrid_layout();
  EXPECT_EQ(layout.part_index(0, "ssm"), 1u);
  EXPECT_EQ(layout.part_index(2, "v_cache"), 1u);
  try {
    layout.part_index(2, "ssm");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("layer 2's state has no part named 'ssm'"), std::string::npos)
        << e.what();
  }
}

TEST(StateLayout, DescribeGroupsEqualLayersAndCheckSizeNamesTheLayout) {
  const StateLayout layout = hybrid_layout();
  const std::string text = layout.describe();
  EXPECT_EQ(text,
            "layers 0-1: conv [3, 8] + ssm [16, 8] (152 floats each); "
            "layer 2: k_cache [4, 2, 5] + v_cache [4, 2, 5] (80 floats); "
            "layer 3: conv [3, 8] + ssm [16, 8] (152 floats); 536 f32 values in all");
  EXPECT_NO_THROW(layout.check_size(536, "the state"));
  try {
    layout.check_size(535, "state file 'x'");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()),
              "state file 'x' holds 535 state values but this model's state has " + text);
  }
  EXPECT_EQ(StateLayout().total_floats(), 0u);
}

}  // namespace
}  // namespace mb
