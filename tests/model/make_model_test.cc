// SPDX-License-Identifier: MIT
// make_model refuses impossible sizes instead of replacing them, and writes nothing then.
#include <gtest/gtest.h>

#include <filesystem>
#include <functional>

#include "common/model_fixture.h"
#include "common/test_util.h"
#include "core/error.h"
#include "model/make_model.h"

namespace mb {
namespace {

TEST(MakeModel, ImpossibleSizesAreRefusedNotReplaced) {
  const std::vector<std::pair<std::function<void(MakeModelOptions&)>, std::string>> cases = {
      {[](MakeModelOptions& o) { o.config.ssm.dt_rank = 0; }, "dt_rank must be >= 1, got 0"},
      {[](MakeModelOptions& o) { o.config.ssm.dt_rank = -2; }, "dt_rank must be >= 1, got -2"},
      {[](MakeModelOptions& o) { o.config.pad_vocab_size_multiple = 0; },
       "pad_vocab_size_multiple must be >= 1"},
      {[](MakeModelOptions& o) { o.shards = 0; }, "shards must be >= 1, got 0"},
      {[](MakeModelOptions& o) { o.input_dim = -1; }, "input_dim must be >= 0, got -1"},
      // 65536 x 2^24 embedding values alone would be 4 TiB of f32.
      {[](MakeModelOptions& o) {
         o.config.d_model = 65536;
         o.config.vocab_size = int64_t{1} << 24;
       },
       "weight values, beyond the limit of 4294967296"},
  };
  const std::string root = test::make_temp_dir("make_model_refusals");
  int index = 0;
  for (const auto& [change, fragment] : cases) {
    MakeModelOptions o;
    o.config = test::small_config();
    change(o);
    const std::string dir = root + "/" + std::to_string(index++);
    try {
      make_model(dir, o);
      ADD_FAILURE() << "accepted: " << fragment;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
    }
    EXPECT_FALSE(std::filesystem::exists(dir)) << fragment;
  }
}

TEST(MakeModel, TheValueEstimateCoversTheWrittenWeights) {
  MakeModelOptions o;
  o.config = test::small_config(48, 3, 300);
  o.config.tie_embeddings = false;
  const std::string dir = test::write_model(o, "make_model_estimate");
  const auto model = Model::load(dir);
  // Every tensor is f32 here, so the folder's weight bytes / 4 is the true value count (plus
  // the safetensors headers, which the 1.5 factor leaves room for).
  uintmax_t bytes = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir))
    if (entry.path().extension() == ".safetensors") bytes += entry.file_size();
  const double estimate = make_model_value_count(o.config, 0);
  EXPECT_GE(estimate * 4, static_cast<double>(bytes) * 0.9);
  EXPECT_LE(estimate * 4, static_cast<double>(bytes) * 1.5);
}

}  // namespace
}  // namespace mb
