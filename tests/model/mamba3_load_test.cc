// SPDX-License-Identifier: MIT
// Mamba-3 checkpoints and configs that do not match are refused with a message naming the
// tensor (and both shapes) or the config key; bad forward options leave states untouched;
// feature inputs run through the optional input projection.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "common/mamba3_reference.h"
#include "common/model_fixture.h"
#include "common/tensor_io.h"
#include "common/test_util.h"
#include "core/error.h"
#include "io/mapped_file.h"
#include "io/safetensors.h"
#include "backends/cpu/cpu_backend.h"
#include "model/blocks/mamba3_block.h"

namespace mb {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

std::string good_model(bool outproj_norm) {
  MakeModelOptions o;
  o.config = test::mamba3_config(32, 16, 16, 40);
  o.config.ssm.is_outproj_norm = outproj_norm;
  return test::write_model(o, "m3load");
}


void expect_load_error(const std::string& dir, const std::vector<std::string>& fragments) {
  try {
    Model::load(dir);
    FAIL() << "loaded a bad checkpoint";
  } catch (const Error& e) {
    for (const auto& fragment : fragments)
      EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what() << " lacks " << fragment;
  }
}

TEST(Mamba3Load, MissingTensorIsNamed) {
  const std::string dir = good_model(false);
  test::rewrite_tensors(dir, [](auto& tensors) {
    std::erase_if(tensors, [](const StoredTensor& t) { return t.name == "backbone.layers.1.mixer.B_bias"; });
  });
  expect_load_error(dir, {"backbone.layers.1.mixer.B_bias", "[4, 1, 16]"});
}

TEST(Mamba3Load, MisshapedTensorNamesBothShapes) {
  const std::string dir = good_model(false);
  // in_proj with one row too few: [2*64 + 2*16 + 3*4 + 4 - 1, 32] instead of [176, 32].
  test::rewrite_tensors(dir, [](auto& tensors) {
    for (StoredTensor& t : tensors)
      if (t.name == "backbone.layers.0.mixer.in_proj.weight") {
        t.shape[0] -= 1;
        t.byte_size -= t.shape[1] * 4;
      }
  });
  expect_load_error(dir, {"backbone.layers.0.mixer.in_proj.weight", "[175, 32]", "[176, 32]"});
}

TEST(Mamba3Load, GatedNormNeedsItsWeight) {
  const std::string dir = good_model(false);
  json config = json::parse(read_text_file(dir + "/config.json"));
  config["ssm_cfg"]["is_outproj_norm"] = true;
  std::ofstream(dir + "/config.json") << config.dump();
  expect_load_error(dir, {"backbone.layers.0.mixer.norm.weight"});
}

TEST(Mamba3Load, ConfigValuesOutsideTheArchitectureAreRefused) {
  const std::string base = good_model(true);
  const std::vector<std::pair<std::function<void(json&)>, std::string>> edits = {
      {[](json& c) { c["ssm_cfg"]["rope_fraction"] = 0.75; }, "rope_fraction"},
      {[](json& c) { c["ssm_cfg"]["headdim"] = 24; }, "headdim"},
      {[](json& c) { c["ssm_cfg"]["ngroups"] = 3; }, "ngroups"},
      {[](json& c) { c["ssm_cfg"]["A_floor"] = -1; }, "A_floor"},
      {[](json& c) { c["ssm_cfg"]["d_state"] = 512; }, "d_state"},
      {[](json& c) { c["ssm_cfg"]["chunk_size"] = 0; }, "chunk_size"},
  };
  for (const auto& [edit, key] : edits) {
    json config = json::parse(read_text_file(base + "/config.json"));
    edit(config);
    EXPECT_THROW(
        {
          try {
            parse_model_config(config, "test");
          } catch (const Error& e) {
            EXPECT_NE(std::string(e.what()).find(key), std::string::npos) << e.what();
            throw;
          }
        },
        Error)
        << key;
  }
}

TEST(Mamba3Load, BadForwardOptionsLeaveTheStateUntouched) {
  auto model = Model::load(good_model(true));
  SequenceState state = model->new_state();
  const auto before = state.download();
  const std::vector<int32_t> tokens = {1, 2, 3};
  SequenceInput input{&state, tokens, {}};
  Workspace ws;
  std::vector<std::vector<float>> out;
  EXPECT_THROW(model->forward(ComputeContext{}, std::span(&input, 1),
                              {OutputKind::LogitsLast, 0, ScanForm::Chunked, -1}, ws, out),
               Error);
  const std::vector<int32_t> bad = {1, 40};
  input.tokens = bad;
  EXPECT_THROW(model->forward(ComputeContext{}, std::span(&input, 1), {}, ws, out), Error);
  EXPECT_TRUE(test::same_bits(state.download(), before));
  EXPECT_EQ(state.position, 0);
}

TEST(Mamba3Load, FeatureInputsRunThroughTheInputProjection) {
  MakeModelOptions o;
  o.config = test::mamba3_config(32, 16, 16, 40);
  o.input_dim = 7;
  auto model = Model::load(test::write_model(o, "m3features"));
  ASSERT_EQ(model->input_dim(), 7);
  const auto features = test::random_floats(9 * 7, 5);
  const ComputeContext ctx{2, best_isa()};
  Workspace ws;
  std::vector<std::vector<float>> out;
  SequenceState all = model->new_state();
  SequenceInput input{&all, {}, features};
  model->forward(ctx, std::span(&input, 1), {OutputKind::HiddenAll, 0, ScanForm::Sequential}, ws, out);
  const auto prefilled = out[0];
  SequenceState stepped = model->new_state();
  std::vector<float> steps;
  for (int t = 0; t < 9; ++t) {
    SequenceInput one{&stepped, {}, std::span(features).subspan(t * 7, 7)};
    model->forward(ctx, std::span(&one, 1), {OutputKind::HiddenAll, 0}, ws, out);
    steps.insert(steps.end(), out[0].begin(), out[0].end());
  }
  EXPECT_TRUE(test::same_bits(prefilled, steps));
  EXPECT_TRUE(test::same_bits(all.download(), stepped.download()));
}

}  // namespace
}  // namespace mb
