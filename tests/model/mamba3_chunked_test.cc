// SPDX-License-Identifier: MIT
// The chunked SSD prefill (spec §10) against the sequential recurrence: logits within 1e-4 of
// max |logit| and final states within tolerance, for stateless windows, partial last chunks,
// windows continued from a state left by decode steps or by earlier rounds (the §10.3 boundary
// fold), and decode after a chunked prefill. Removing the fold must break continued windows.
#include <gtest/gtest.h>

#include <cmath>
#include <map>

#include "backends/cpu/cpu_backend.h"
#include "common/mamba3_reference.h"
#include "common/model_fixture.h"
#include "common/test_util.h"
#include "model/blocks/mamba3_block.h"

namespace mb {
namespace {

std::string model_dir(const std::string& name) {
  static std::map<std::string, std::string> dirs;
  auto it = dirs.find(name);
  if (it != dirs.end()) return it->second;
  MakeModelOptions o;
  if (name == "d_state_128") {
    o.config = test::mamba3_config(64, 128, 64, 131);
    o.seed = 21;
  } else {
    o.config = test::mamba3_config(72, 20, 24, 131);
    o.config.ssm.ngroups = 3;
    o.config.ssm.is_outproj_norm = true;
    o.seed = 22;
  }
  return dirs[name] = test::write_model(o, "m3chunk_" + name);
}

const Model& model_named(const std::string& name) {
  static std::map<std::string, std::unique_ptr<Model>> models;
  auto it = models.find(name);
  if (it == models.end()) it = models.emplace(name, Model::load(model_dir(name))).first;
  return *it->second;
}

std::vector<float> run(const Model& model, SequenceState& state, const std::vector<int32_t>& tokens,
                       ScanForm scan, int64_t ssd_chunk = 0, int64_t round = 0,
                       OutputKind kind = OutputKind::LogitsAll) {
  Workspace ws;
  std::vector<std::vector<float>> out;
  SequenceInput input{&state, tokens, {}};
  model.forward(ComputeContext{2, best_isa()}, std::span(&input, 1), {kind, round, scan, ssd_chunk}, ws, out);
  return out[0];
}

// The worst over positions of max |a - b| / max |a| at that position.
double worst_relative(const std::vector<float>& a, const std::vector<float>& b, int64_t width) {
  EXPECT_EQ(a.size(), b.size());
  double worst = 0;
  for (size_t t = 0; t * width < a.size(); ++t) {
    double peak = 0, diff = 0;
    for (int64_t v = 0; v < width; ++v) {
      peak = std::max(peak, std::fabs(double(a[t * width + v])));
      diff = std::max(diff, std::fabs(double(a[t * width + v]) - b[t * width + v]));
    }
    worst = std::max(worst, diff / peak);
  }
  return worst;
}

// Final states agree part by part: SSM, k and v within 1e-4 of the part's largest magnitude (at
// least 1), angles within 1e-4 rad modulo 2 pi.
void expect_states_close(const Model& model, const SequenceState& a, const SequenceState& b,
                         const std::string& what) {
  const auto& m3 = dynamic_cast<const Mamba3Block&>(*model.blocks()[0]);
  const Mamba3StateLayout layout = mamba3_state_layout(m3.params());
  const std::vector<float> a_values = a.download(), b_values = b.download();
  for (int64_t l = 0; l < model.config().n_layer; ++l) {
    const float* x = a_values.data() + model.state_layout().layer(l).offset;
    const float* y = b_values.data() + model.state_layout().layer(l).offset;
    const int64_t bounds[] = {layout.ssm, layout.k, layout.v, layout.angle, layout.total};
    for (int part = 0; part < 4; ++part) {
      double peak = 1, diff = 0;
      for (int64_t i = bounds[part]; i < bounds[part + 1]; ++i) {
        double d = std::fabs(double(x[i]) - y[i]);
        if (part == 3) d = std::min(d, 2 * M_PI - d);
        peak = std::max(peak, std::fabs(double(x[i])));
        diff = std::max(diff, d);
      }
      EXPECT_LE(diff, 1e-4 * (part == 3 ? 1.0 : peak)) << what << ": layer " << l << " state part " << part;
    }
  }
  EXPECT_EQ(a.position, b.position);
}

class Mamba3Chunked : public ::testing::TestWithParam<std::string> {};

TEST_P(Mamba3Chunked, StatelessWindowsMatchTheSequentialOrder) {
  const Model& model = model_named(GetParam());
  const int64_t V = model.config().vocab_size;
  const auto tokens = test::random_tokens(200, V, 31);
  double worst = 0;
  for (int64_t T : {1, 5, 63, 64, 65, 130, 200}) {
    const std::vector<int32_t> prompt(tokens.begin(), tokens.begin() + T);
    SequenceState seq_state = model.new_state();
    const auto expected = run(model, seq_state, prompt, ScanForm::Sequential);
    for (int64_t ssd_chunk : {0, 16, 7}) {
      SequenceState state = model.new_state();
      const auto got = run(model, state, prompt, ScanForm::Chunked, ssd_chunk);
      const double rel = worst_relative(expected, got, V);
      EXPECT_LE(rel, 1e-4) << "T " << T << " chunk " << ssd_chunk;
      worst = std::max(worst, rel);
      expect_states_close(model, seq_state, state,
                          "T " + std::to_string(T) + " chunk " + std::to_string(ssd_chunk));
    }
  }
  std::printf("[ chunked ] %-12s stateless windows: worst relative diff %.3g\n", GetParam().c_str(), worst);
}

TEST_P(Mamba3Chunked, DecodeAfterAChunkedPrefillContinuesTheSequence) {
  const Model& model = model_named(GetParam());
  const int64_t V = model.config().vocab_size;
  const auto tokens = test::random_tokens(120, V, 32);
  SequenceState stepped = model.new_state();
  const auto expected = test::step_logits(model, ComputeContext{2, best_isa()}, tokens, stepped);
  SequenceState state = model.new_state();
  run(model, state, std::vector<int32_t>(tokens.begin(), tokens.begin() + 100), ScanForm::Chunked, 0, 0,
      OutputKind::None);
  const auto decoded = test::step_logits(model, ComputeContext{2, best_isa()},
                                         std::vector<int32_t>(tokens.begin() + 100, tokens.end()), state);
  const double rel =
      worst_relative(std::vector<float>(expected.begin() + 100 * V, expected.end()), decoded, V);
  EXPECT_LE(rel, 1e-4);
  expect_states_close(model, stepped, state, "after decode");
  std::printf("[ chunked ] %-12s decode after chunked prefill: worst relative diff %.3g\n",
              GetParam().c_str(), rel);
}

// Windows that start from a nonzero state: after 9 decode steps, and every round after the first
// when a long input runs in rounds. Returns the worst relative logit error of both setups.
double continued_window_error(const Model& model, bool check_states) {
  const int64_t V = model.config().vocab_size;
  const auto tokens = test::random_tokens(90, V, 33);
  SequenceState reference_state = model.new_state();
  const auto expected = run(model, reference_state, tokens, ScanForm::Sequential);

  SequenceState after_steps = model.new_state();
  const std::vector<int32_t> head(tokens.begin(), tokens.begin() + 9), tail(tokens.begin() + 9, tokens.end());
  auto got = test::step_logits(model, ComputeContext{2, best_isa()}, head, after_steps);
  const auto window = run(model, after_steps, tail, ScanForm::Chunked, 16);
  got.insert(got.end(), window.begin(), window.end());
  double worst = worst_relative(expected, got, V);
  if (check_states) expect_states_close(model, reference_state, after_steps, "after steps then a window");

  SequenceState rounds = model.new_state();
  const auto in_rounds = run(model, rounds, tokens, ScanForm::Chunked, 8, 13);
  worst = std::max(worst, worst_relative(expected, in_rounds, V));
  if (check_states) expect_states_close(model, reference_state, rounds, "rounds of 13");
  return worst;
}

TEST_P(Mamba3Chunked, ContinuedWindowsMatchTheSequentialOrder) {
  const double error = continued_window_error(model_named(GetParam()), true);
  EXPECT_LE(error, 1e-4);
  std::printf("[ chunked ] %-12s continued windows: worst relative diff %.3g\n", GetParam().c_str(), error);
}

TEST_P(Mamba3Chunked, RemovingTheBoundaryFoldBreaksContinuedWindows) {
  auto unfolded = Model::load(model_dir(GetParam()));
  for (size_t i = 0; i < unfolded->blocks().size(); ++i)
    dynamic_cast<Mamba3Block&>(unfolded->block(i)).disable_boundary_fold_for_testing();
  const double with_fold = continued_window_error(model_named(GetParam()), false);
  const double without_fold = continued_window_error(*unfolded, false);
  EXPECT_LE(with_fold, 1e-4);
  EXPECT_GE(without_fold, 1e-2);
  std::printf("[ chunked ] %-12s continued windows: with the fold %.3g, without %.3g\n", GetParam().c_str(),
              with_fold, without_fold);
}

TEST_P(Mamba3Chunked, AutoChoosesByRoundLength) {
  const Model& model = model_named(GetParam());
  const auto tokens = test::random_tokens(160, model.config().vocab_size, 34);
  for (int64_t T : {3, 160}) {
    const std::vector<int32_t> prompt(tokens.begin(), tokens.begin() + T);
    const bool chunked = CpuBackend::mamba3_prefers_chunked(T, model.config().ssm.chunk_size);
    SequenceState a = model.new_state(), b = model.new_state();
    const auto automatic = run(model, a, prompt, ScanForm::Auto);
    const auto explicit_choice = run(model, b, prompt, chunked ? ScanForm::Chunked : ScanForm::Sequential);
    EXPECT_TRUE(test::same_bits(automatic, explicit_choice)) << "T " << T;
  }
  EXPECT_FALSE(CpuBackend::mamba3_prefers_chunked(1, 64));
  EXPECT_TRUE(CpuBackend::mamba3_prefers_chunked(4096, 64));
}

INSTANTIATE_TEST_SUITE_P(Shapes, Mamba3Chunked, ::testing::Values("d_state_128", "partial"));

}  // namespace
}  // namespace mb
