// SPDX-License-Identifier: MIT
// Mamba-2 and Mamba-3 on the Vulkan device against the CPU model, compared with memcmp: logits
// and states equal the CPU's bits (f32, bf16 and f16 weights; Mamba-2 with two groups and a
// time-step limit, Mamba-3 with RoPE angles, and with two groups and the gate norm), a prefill equals its
// decode steps, a batch equals its sequences alone, the round size changes no bit, and a decode step records
// once and takes as many dispatches for eight sequences as for one. The chunked scan gives the CPU's chunked
// bits and stays within rounding of the sequential form, and --scan auto picks the same form on both devices.
// The bitwise CPU comparison needs an exact fma on the device (Context::exact_fma); without one it falls back
// to NMSE <= 1e-7 and says so.
#include <algorithm>
#include <cstdlib>
#include <map>
#include <memory>
#include <string>

#include "backends/vulkan/vulkan_backend.h"
#include "common/mamba2_reference.h"
#include "common/mamba3_reference.h"
#include "common/model_fixture.h"
#include "common/test_util.h"
#include "vulkan/vulkan_test_util.h"

// A namespace of its own: the test binary compiles its files in batches (a unity build).
namespace mb::vulkan_ssd_model_test {
namespace {

const ComputeContext kCpu{2};
constexpr double kMaxNmse = 1e-7;
constexpr int64_t kVocab = 97;

struct Variant {
  std::string name;
  DType dtype;
};

ModelConfig variant_config(const std::string& name) {
  if (name == "mamba2") {
    // Two groups of B and C, and a time-step limit that clamps some of dt.
    ModelConfig c = test::mamba2_config(32, 16, 16, 2, kVocab);
    c.ssm.dt_limit_min = 0.001;
    c.ssm.dt_limit_max = 0.08;
    c.ssm.chunk_size = 8;
    return c;
  }
  ModelConfig c = test::mamba3_config(32, 16, 16, kVocab);  // four heads of 16, four RoPE angles
  c.ssm.chunk_size = 8;
  if (name == "mamba3_gate_norm") {
    // Two groups of B and C, and the grouped gated RMSNorm before out_proj.
    c.ssm.ngroups = 2;
    c.ssm.is_outproj_norm = true;
  }
  return c;
}

struct Loaded {
  std::unique_ptr<Model> cpu, gpu;
};

// One CPU and one Vulkan model per variant for the whole binary: each Vulkan model opens a
// context and compiles its pipelines, which is slow on lavapipe.
Loaded& loaded(const Variant& v) {
  static std::map<std::string, Loaded> models;
  Loaded& slot = models[v.name + "/" + std::string(dtype_name(v.dtype))];
  if (!slot.cpu) {
    MakeModelOptions options;
    options.config = variant_config(v.name);
    options.dtype = v.dtype;
    options.seed = 23;
    const std::string dir = test::write_model(options, "vulkan_ssd_" + v.name);
    setenv("MB_VULKAN_VALIDATION", "1", 1);  // every device model runs under the validation layer
    slot.cpu = Model::load(dir);
    LoadOptions on_gpu;
    on_gpu.device = {DeviceKind::Vulkan, test::vulkan_test_context()->info().index};
    slot.gpu = Model::load(dir, on_gpu);
  }
  return slot;
}

class VulkanSsdModel : public test::VulkanTest, public ::testing::WithParamInterface<Variant> {
 public:
  // Logits and states of a prefill and of decode steps after it against the CPU.
  void expect_logits_and_states_equal_the_cpu();

 protected:
 protected:
  void SetUp() override {
    test::VulkanTest::SetUp();
    if (IsSkipped()) return;
    models_ = &loaded(GetParam());
    backend().context().clear_validation_errors();
  }
  void TearDown() override {
    if (models_ != nullptr)
      for (const std::string& error : backend().context().validation_errors())
        ADD_FAILURE() << "Vulkan validation error: " << error;
    test::VulkanTest::TearDown();
  }
  const Model& cpu() { return *models_->cpu; }
  const Model& gpu() { return *models_->gpu; }
  const vulkan::VulkanBackend& backend() {
    return dynamic_cast<const vulkan::VulkanBackend&>(models_->gpu->backend());
  }
  bool bitwise() { return backend().context().exact_fma(); }

  // One forward call of one sequence from `state`.
  std::vector<float> run(const Model& model, SequenceState& state, const std::vector<int32_t>& tokens,
                         const ForwardOptions& options) {
    SequenceInput input{&state, tokens, {}};
    std::vector<std::vector<float>> out;
    model.forward(kCpu, std::span(&input, 1), options, ws_, out);
    return out[0];
  }
  void expect_cpu_equal(const std::vector<float>& gpu_values, const std::vector<float>& cpu_values,
                        const std::string& what) {
    ASSERT_EQ(gpu_values.size(), cpu_values.size()) << what;
    EXPECT_LE(test::nmse(gpu_values, cpu_values), kMaxNmse) << what;
    if (bitwise()) {
      EXPECT_EQ(test::first_bit_difference(gpu_values, cpu_values), -1) << what;
    }
  }
  // The phase name of each dispatch of the workspace's current recording.
  std::vector<std::string> recorded_phases(const Workspace& ws) {
    const std::vector<std::string> names = gpu().phase_names();
    std::vector<std::string> phases;
    for (PhaseId id : vulkan::VulkanBackend::recorded_phases(*ws.stream)) phases.push_back(names.at(id));
    return phases;
  }

  Loaded* models_ = nullptr;
  Workspace ws_;
};

void VulkanSsdModel::expect_logits_and_states_equal_the_cpu() {
  if (!bitwise()) std::printf("[vulkan] no exact fma: comparing with the CPU within NMSE only\n");
  const auto tokens = test::random_tokens(11, kVocab, 1);
  SequenceState cpu_state = cpu().new_state(), gpu_state = gpu().new_state();
  const ForwardOptions all{OutputKind::LogitsAll, 0};
  expect_cpu_equal(run(gpu(), gpu_state, tokens, all), run(cpu(), cpu_state, tokens, all), "prefill logits");
  ASSERT_TRUE(gpu_state.on_device());
  expect_cpu_equal(gpu_state.download(), cpu_state.download(), "state after the prefill");
  for (int32_t token : test::random_tokens(4, kVocab, 2)) {
    const ForwardOptions last{OutputKind::LogitsLast, 0};
    expect_cpu_equal(run(gpu(), gpu_state, {token}, last), run(cpu(), cpu_state, {token}, last),
                     "decode logits");
  }
  expect_cpu_equal(gpu_state.download(), cpu_state.download(), "state after the steps");
}

TEST_P(VulkanSsdModel, LogitsAndStateEqualTheCpu) {
  expect_logits_and_states_equal_the_cpu();
}

TEST_P(VulkanSsdModel, PrefillEqualsDecodeSteps) {
  const auto tokens = test::random_tokens(13, kVocab, 4);
  SequenceState prefilled = gpu().new_state(), stepped = gpu().new_state();
  const auto all = run(gpu(), prefilled, tokens, {OutputKind::LogitsAll, 0});
  std::vector<float> steps;
  for (int32_t token : tokens) {
    const auto logits = run(gpu(), stepped, {token}, {OutputKind::LogitsLast, 0});
    steps.insert(steps.end(), logits.begin(), logits.end());
  }
  EXPECT_EQ(test::first_bit_difference(all, steps), -1);
  EXPECT_TRUE(test::same_bits(prefilled.download(), stepped.download()));
}

TEST_P(VulkanSsdModel, RoundSizeChangesNoBit) {
  // Rounds of 9 rows and more take the tiled GEMM; the scan's staging blocks hold 8 positions.
  const auto tokens = test::random_tokens(21, kVocab, 5);
  SequenceState whole_state = gpu().new_state();
  const auto whole = run(gpu(), whole_state, tokens, {OutputKind::LogitsAll, 0});
  for (int64_t chunk : {1, 3, 9}) {
    SequenceState state = gpu().new_state();
    EXPECT_TRUE(test::same_bits(run(gpu(), state, tokens, {OutputKind::LogitsAll, chunk}), whole)) << chunk;
    EXPECT_TRUE(test::same_bits(state.download(), whole_state.download())) << chunk;
  }
}

TEST_P(VulkanSsdModel, BatchEqualsEachSequenceAlone) {
  const std::vector<std::vector<int32_t>> prompts = {test::random_tokens(5, kVocab, 6),
                                                     test::random_tokens(1, kVocab, 7),
                                                     test::random_tokens(12, kVocab, 8)};
  std::vector<SequenceState> states;
  for (size_t i = 0; i < prompts.size(); ++i) states.push_back(gpu().new_state());
  std::vector<SequenceInput> batch;
  for (size_t i = 0; i < prompts.size(); ++i) batch.push_back({&states[i], prompts[i], {}});
  std::vector<std::vector<float>> out;
  gpu().forward(kCpu, batch, {OutputKind::LogitsAll, 4}, ws_, out);
  for (size_t i = 0; i < prompts.size(); ++i) {
    SequenceState alone = gpu().new_state();
    EXPECT_TRUE(test::same_bits(out[i], run(gpu(), alone, prompts[i], {OutputKind::LogitsAll, 0}))) << i;
    EXPECT_TRUE(test::same_bits(states[i].download(), alone.download())) << i;
  }
  for (int step = 0; step < 2; ++step) {
    std::vector<int32_t> next = {static_cast<int32_t>(step), 50, 96};
    std::vector<SequenceState> solo(states.begin(), states.end());  // device-side forks
    for (size_t i = 0; i < states.size(); ++i) batch[i] = {&states[i], std::span(&next[i], 1), {}};
    gpu().forward(kCpu, batch, {OutputKind::LogitsLast, 0}, ws_, out);
    for (size_t i = 0; i < states.size(); ++i)
      EXPECT_TRUE(test::same_bits(out[i], run(gpu(), solo[i], {next[i]}, {OutputKind::LogitsLast, 0})))
          << "step " << step << " sequence " << i;
  }
}

TEST_P(VulkanSsdModel, DecodeRecordsOnceAndABatchTakesTheDispatchesOfOne) {
  auto step = [&](size_t sequences, int steps, Workspace& ws) {
    std::vector<SequenceState> states;
    for (size_t i = 0; i < sequences; ++i) states.push_back(gpu().new_state());
    std::vector<int32_t> tokens(sequences, 5);
    std::vector<SequenceInput> batch;
    for (size_t i = 0; i < sequences; ++i) batch.push_back({&states[i], std::span(&tokens[i], 1), {}});
    std::vector<std::vector<float>> out;
    for (int s = 0; s < steps; ++s) gpu().forward(kCpu, batch, {OutputKind::ArgmaxLast, 0}, ws, out);
  };
  Workspace one_ws, eight_ws;
  step(1, 4, one_ws);
  EXPECT_EQ(vulkan::VulkanBackend::recordings(*one_ws.stream), 1) << "a steady decode loop replays";
  step(8, 1, eight_ws);
  const std::vector<std::string> one = recorded_phases(one_ws), eight = recorded_phases(eight_ws);
  EXPECT_EQ(eight, one);
  // Mamba-2: in_proj (the layer norm fused), conv, the scan, the gated norm, out_proj; Mamba-3:
  // in_proj, the mixer (its row preparation and its scan), out_proj.
  const bool mamba2 = GetParam().name == "mamba2";
  const int64_t per_layer = mamba2 ? 5 : 4;
  const int64_t outside = 4;  // embed, norm_f, lm_head, argmax
  EXPECT_EQ(static_cast<int64_t>(one.size()), per_layer * cpu().config().n_layer + outside);
}

TEST_P(VulkanSsdModel, ChunkedScanGivesTheCpusBitsWithinRoundingOfTheSequentialScan) {
  // SSD chunks of the config's 8 positions and of 5 (parts end inside a chunk), in one round and
  // in rounds of 16 and 9 (each a continued window), then decode steps from the chunked state.
  const auto tokens = test::random_tokens(37, kVocab, 10);
  SequenceState sequential_state = gpu().new_state();
  const auto sequential = run(gpu(), sequential_state, tokens, {OutputKind::LogitsAll, 0});
  const double scale = test::max_abs(sequential), state_scale = test::max_abs(sequential_state.download());
  const std::pair<int64_t, int64_t> settings[] = {{0, 0}, {5, 0}, {5, 16}, {0, 9}};
  for (const auto& [ssd_chunk, round] : settings) {
    const std::string what = "ssd chunk " + std::to_string(ssd_chunk) + " round " + std::to_string(round);
    const ForwardOptions options{OutputKind::LogitsAll, round, ScanForm::Chunked, ssd_chunk};
    SequenceState cpu_state = cpu().new_state(), gpu_state = gpu().new_state();
    const auto got = run(gpu(), gpu_state, tokens, options);
    expect_cpu_equal(got, run(cpu(), cpu_state, tokens, options), what);
    expect_cpu_equal(gpu_state.download(), cpu_state.download(), what + " state");
    EXPECT_LE(test::max_abs_diff(got, sequential), 1e-5 * scale) << what;
    EXPECT_LE(test::max_abs_diff(gpu_state.download(), sequential_state.download()), 1e-5 * state_scale)
        << what;
    for (int32_t token : {3, 40}) {
      const ForwardOptions last{OutputKind::LogitsLast, 0};
      expect_cpu_equal(run(gpu(), gpu_state, {token}, last), run(cpu(), cpu_state, {token}, last),
                       what + " then a step");
    }
  }
}

TEST_P(VulkanSsdModel, AutoPicksTheFormTheCpuPicks) {
  // Mamba-3's auto takes the chunked form for parts of 32 positions or more and SSD chunks of at
  // most 64, per part; Mamba-2's always the sequential one. A batch with parts on both sides.
  const std::vector<std::vector<int32_t>> prompts = {test::random_tokens(40, kVocab, 11),
                                                     test::random_tokens(6, kVocab, 12)};
  const ForwardOptions options{OutputKind::LogitsAll, 0, ScanForm::Auto, 0};
  std::vector<std::vector<float>> outputs[2];
  std::vector<std::vector<float>> states[2];
  for (int which = 0; which < 2; ++which) {
    const Model& model = which == 0 ? cpu() : gpu();
    std::vector<SequenceState> seqs = {model.new_state(), model.new_state()};
    std::vector<SequenceInput> batch = {{&seqs[0], prompts[0], {}}, {&seqs[1], prompts[1], {}}};
    Workspace ws;
    model.forward(kCpu, batch, options, ws, outputs[which]);
    for (const SequenceState& state : seqs) states[which].push_back(state.download());
  }
  for (size_t i = 0; i < prompts.size(); ++i) {
    expect_cpu_equal(outputs[1][i], outputs[0][i], "sequence " + std::to_string(i));
    expect_cpu_equal(states[1][i], states[0][i], "sequence " + std::to_string(i) + " state");
  }
}

// The shader variants the registry does not run (it pairs buffer arrays with subgroup shuffles, and
// neither with neither): state arrays with shared-memory exchanges, and one dispatch per sequence
// with shuffles. d_state 64 spreads each channel's states over four invocations, so the chain's
// hand-off runs too. Two sequences prefill in both scan orders and decode; every output equals
// the CPU's.
class VulkanSsdShaderVariants : public test::VulkanTest, public ::testing::WithParamInterface<std::string> {};

TEST_P(VulkanSsdShaderVariants, ArraysWithoutShufflesAndShufflesWithoutArraysGiveTheCpusBits) {
  MakeModelOptions options;
  options.config = GetParam() == "mamba2" ? test::mamba2_config(32, 64, 16, 2, kVocab)
                                          : test::mamba3_config(32, 64, 16, kVocab);
  options.config.ssm.chunk_size = 8;
  options.seed = 29;
  const std::string dir = test::write_model(options, "vulkan_ssd_variants_" + GetParam());
  setenv("MB_VULKAN_VALIDATION", "1", 1);
  auto cpu = Model::load(dir), gpu = Model::load(dir);
  const std::vector<std::vector<int32_t>> prompts = {test::random_tokens(20, kVocab, 41),
                                                     test::random_tokens(9, kVocab, 42)};
  const int32_t next[] = {7, 8};
  for (bool arrays : {true, false}) {
    vulkan::ContextOptions context;
    context.device_index = ctx().info().index;
    context.buffer_arrays = arrays;
    context.subgroup_ops = !arrays;
    gpu->set_backend(std::make_shared<vulkan::VulkanBackend>(context));
    const auto& backend = dynamic_cast<const vulkan::VulkanBackend&>(gpu->backend());
    for (ScanForm scan : {ScanForm::Sequential, ScanForm::Chunked}) {
      std::vector<std::vector<float>> outputs[2];
      for (int which = 0; which < 2; ++which) {
        const Model& model = which == 0 ? *cpu : *gpu;
        std::vector<SequenceState> states = {model.new_state(), model.new_state()};
        std::vector<SequenceInput> batch = {{&states[0], prompts[0], {}}, {&states[1], prompts[1], {}}};
        Workspace ws;
        std::vector<std::vector<float>> out;
        model.forward(kCpu, batch, {OutputKind::LogitsAll, 0, scan, 0}, ws, out);
        outputs[which] = out;
        for (size_t i = 0; i < batch.size(); ++i) batch[i] = {&states[i], std::span(&next[i], 1), {}};
        model.forward(kCpu, batch, {OutputKind::LogitsLast, 0}, ws, out);
        outputs[which].insert(outputs[which].end(), out.begin(), out.end());
        for (const SequenceState& state : states) outputs[which].push_back(state.download());
      }
      for (size_t i = 0; i < outputs[0].size(); ++i) {
        EXPECT_LE(test::nmse(outputs[1][i], outputs[0][i]), kMaxNmse) << i;
        if (backend.context().exact_fma()) {
          EXPECT_TRUE(test::same_bits(outputs[1][i], outputs[0][i])) << i;
        }
      }
    }
    for (const std::string& error : backend.context().validation_errors())
      ADD_FAILURE() << "Vulkan validation error: " << error;
  }
}

INSTANTIATE_TEST_SUITE_P(Architectures, VulkanSsdShaderVariants, ::testing::Values("mamba2", "mamba3"),
                         [](const auto& info) { return info.param; });

// The weights' dtype changes only the matmuls (tested for every dtype on their own): the other
// dtypes run the CPU comparison alone, which keeps the suite's device time down on CI's two cores.
class VulkanSsdModelDtypes : public VulkanSsdModel {};

TEST_P(VulkanSsdModelDtypes, LogitsAndStateEqualTheCpu) {
  expect_logits_and_states_equal_the_cpu();
}

std::string variant_name(const ::testing::TestParamInfo<Variant>& info) {
  return info.param.name + "_" + std::string(dtype_name(info.param.dtype));
}

INSTANTIATE_TEST_SUITE_P(Variants, VulkanSsdModel,
                         ::testing::Values(Variant{"mamba2", DType::F32}, Variant{"mamba3", DType::F32},
                                           Variant{"mamba3_gate_norm", DType::BF16}),
                         variant_name);
INSTANTIATE_TEST_SUITE_P(Variants, VulkanSsdModelDtypes,
                         ::testing::Values(Variant{"mamba2", DType::BF16}, Variant{"mamba2", DType::F16},
                                           Variant{"mamba3_gate_norm", DType::F16}),
                         variant_name);

}  // namespace
}  // namespace mb::vulkan_ssd_model_test
