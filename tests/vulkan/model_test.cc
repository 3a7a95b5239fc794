// SPDX-License-Identifier: MIT
// Mamba-1 on the Vulkan device against the CPU model, compared with memcmp: logits and states
// equal the CPU's bits (f32 and bf16 weights), a prefill equals its decode steps, a batch equals
// its sequences alone, and the chunk size changes no bit. The bitwise CPU comparison needs an
// exact fma on the device (Context::exact_fma); without one it falls back to NMSE <= 1e-7 and
// says so. The device-internal invariants (prefill == steps, batch == solo, chunks) hold on
// any device, since they compare the device with itself.
#include <algorithm>
#include <cstdlib>
#include <memory>
#include <string>

#include "backends/vulkan/vulkan_backend.h"
#include "backends/vulkan/vulkan_ops.h"
#include "common/history_block.h"
#include "common/hybrid_configs.h"
#include "common/model_fixture.h"
#include "common/test_util.h"
#include "core/error.h"
#include "vulkan/vulkan_test_util.h"

// A namespace of its own: the test binary compiles its files in batches (a unity build).
namespace mb::vulkan_model_test {
namespace {

const ComputeContext kCpu{2};
constexpr double kMaxNmse = 1e-7;

const vulkan::VulkanBackend& vulkan_of(const Model& model) {
  return dynamic_cast<const vulkan::VulkanBackend&>(model.backend());
}

// The phase name of each dispatch of the workspace's current recording.
std::vector<std::string> recorded_phases(const Model& model, const Workspace& ws) {
  const std::vector<std::string> names = model.phase_names();
  std::vector<std::string> phases;
  for (PhaseId id : vulkan::VulkanBackend::recorded_phases(*ws.stream)) phases.push_back(names.at(id));
  return phases;
}

struct Loaded {
  std::unique_ptr<Model> cpu, gpu;
};

// One CPU and one Vulkan model per weight dtype for the whole binary: each Vulkan model opens a
// context and compiles its pipelines, which is slow on lavapipe.
Loaded& loaded(DType dtype) {
  static Loaded models[2];
  Loaded& slot = models[dtype == DType::BF16 ? 1 : 0];
  if (!slot.cpu) {
    MakeModelOptions options;
    options.config = test::small_config(32, 2, 97);
    options.dtype = dtype;
    options.seed = 7;
    const std::string dir = test::write_model(options, "vulkan_model");
    // Every device model runs under the validation layer, as the op tests do.
    setenv("MB_VULKAN_VALIDATION", "1", 1);
    slot.cpu = Model::load(dir);
    LoadOptions on_gpu;
    on_gpu.device = {DeviceKind::Vulkan, test::vulkan_test_context()->info().index};
    slot.gpu = Model::load(dir, on_gpu);
  }
  return slot;
}

class VulkanModel : public test::VulkanTest, public ::testing::WithParamInterface<DType> {
 protected:
  void SetUp() override {
    test::VulkanTest::SetUp();
    if (IsSkipped()) return;
    models_ = &loaded(GetParam());
    ASSERT_EQ(executor().context().validation_enabled(), test::vulkan_test_context()->validation_enabled());
    executor().context().clear_validation_errors();
  }
  void TearDown() override {
    if (models_ != nullptr) {
      for (const std::string& error : executor().context().validation_errors())
        ADD_FAILURE() << "Vulkan validation error: " << error;
    }
    test::VulkanTest::TearDown();
  }
  const Model& cpu() { return *models_->cpu; }
  const Model& gpu() { return *models_->gpu; }
  const vulkan::VulkanBackend& executor() { return vulkan_of(*models_->gpu); }
  bool bitwise() { return executor().context().exact_fma(); }

  // One forward call of one sequence from `state`.
  std::vector<float> run(const Model& model, SequenceState& state, const std::vector<int32_t>& tokens,
                         OutputKind output, int64_t chunk = 0) {
    SequenceInput input{&state, tokens, {}};
    std::vector<std::vector<float>> out;
    model.forward(kCpu, std::span(&input, 1), {output, chunk}, ws_, out);
    return out[0];
  }
  void expect_cpu_equal(const std::vector<float>& gpu_values, const std::vector<float>& cpu_values,
                        const std::string& what) {
    ASSERT_EQ(gpu_values.size(), cpu_values.size()) << what;
    EXPECT_LE(test::nmse(gpu_values, cpu_values), kMaxNmse) << what;
    if (bitwise()) {
      const long diff = test::first_bit_difference(gpu_values, cpu_values);
      EXPECT_EQ(diff, -1) << what << ": element " << diff;
    }
  }

  Loaded* models_ = nullptr;
  Workspace ws_;
};

TEST_P(VulkanModel, LogitsAndStateEqualTheCpu) {
  if (!bitwise()) std::printf("[vulkan] no exact fma: comparing with the CPU within NMSE only\n");
  const auto tokens = test::random_tokens(11, 97, 1);
  SequenceState cpu_state = cpu().new_state(), gpu_state = gpu().new_state();
  const auto cpu_logits = run(cpu(), cpu_state, tokens, OutputKind::LogitsAll);
  const auto gpu_logits = run(gpu(), gpu_state, tokens, OutputKind::LogitsAll);
  ASSERT_EQ(gpu_logits.size(), 11u * 97u);
  expect_cpu_equal(gpu_logits, cpu_logits, "prefill logits");
  ASSERT_TRUE(gpu_state.on_device()) << "the state should stay on the device";
  expect_cpu_equal(gpu_state.download(), cpu_state.download(), "state after the prefill");
  EXPECT_EQ(gpu_state.position, 11);
  // Decode steps continue from the device state and still equal the CPU.
  for (int32_t token : test::random_tokens(4, 97, 2)) {
    const auto cpu_step = run(cpu(), cpu_state, {token}, OutputKind::LogitsLast);
    const auto gpu_step = run(gpu(), gpu_state, {token}, OutputKind::LogitsLast);
    expect_cpu_equal(gpu_step, cpu_step, "decode logits");
  }
  expect_cpu_equal(gpu_state.download(), cpu_state.download(), "state after the steps");
}

TEST_P(VulkanModel, EveryOutputKindEqualsTheCpu) {
  const auto tokens = test::random_tokens(7, 97, 3);
  for (OutputKind kind : {OutputKind::LogitsLast, OutputKind::HiddenLast, OutputKind::HiddenAll,
                          OutputKind::HiddenMean, OutputKind::ArgmaxLast, OutputKind::None}) {
    SequenceState cpu_state = cpu().new_state(), gpu_state = gpu().new_state();
    const auto expected = run(cpu(), cpu_state, tokens, kind, 3);
    const auto got = run(gpu(), gpu_state, tokens, kind, 3);
    expect_cpu_equal(got, expected, "output kind " + std::to_string(static_cast<int>(kind)));
    expect_cpu_equal(gpu_state.download(), cpu_state.download(), "state");
  }
}

TEST_P(VulkanModel, PrefillEqualsDecodeSteps) {
  const auto tokens = test::random_tokens(13, 97, 4);
  SequenceState prefilled = gpu().new_state(), stepped = gpu().new_state();
  const auto all = run(gpu(), prefilled, tokens, OutputKind::LogitsAll);
  std::vector<float> steps;
  for (int32_t token : tokens) {
    const auto logits = run(gpu(), stepped, {token}, OutputKind::LogitsLast);
    steps.insert(steps.end(), logits.begin(), logits.end());
  }
  EXPECT_TRUE(test::same_bits(all, steps))
      << "first difference at " << test::first_bit_difference(all, steps);
  EXPECT_TRUE(test::same_bits(prefilled.download(), stepped.download()));
}

TEST_P(VulkanModel, ChunkSizeChangesNoBit) {
  const auto tokens = test::random_tokens(10, 97, 5);
  SequenceState whole_state = gpu().new_state();
  const auto whole = run(gpu(), whole_state, tokens, OutputKind::LogitsAll, 0);
  for (int64_t chunk : {1, 3, 4}) {
    SequenceState state = gpu().new_state();
    const auto chunked = run(gpu(), state, tokens, OutputKind::LogitsAll, chunk);
    EXPECT_TRUE(test::same_bits(chunked, whole)) << "chunk " << chunk;
    EXPECT_TRUE(test::same_bits(state.download(), whole_state.download())) << "chunk " << chunk;
  }
}

TEST_P(VulkanModel, BatchEqualsEachSequenceAlone) {
  // Sequences of different lengths, one in a round of its own after the others finish.
  const std::vector<std::vector<int32_t>> prompts = {
      test::random_tokens(5, 97, 6), test::random_tokens(1, 97, 7), test::random_tokens(9, 97, 8)};
  std::vector<SequenceState> states;
  for (size_t i = 0; i < prompts.size(); ++i) states.push_back(gpu().new_state());
  std::vector<SequenceInput> batch;
  for (size_t i = 0; i < prompts.size(); ++i) batch.push_back({&states[i], prompts[i], {}});
  std::vector<std::vector<float>> out;
  gpu().forward(kCpu, batch, {OutputKind::LogitsAll, 4}, ws_, out);
  for (size_t i = 0; i < prompts.size(); ++i) {
    SequenceState alone = gpu().new_state();
    const auto expected = run(gpu(), alone, prompts[i], OutputKind::LogitsAll);
    EXPECT_TRUE(test::same_bits(out[i], expected)) << "sequence " << i;
    EXPECT_TRUE(test::same_bits(states[i].download(), alone.download())) << "sequence " << i;
  }
  // Batched decode steps equal solo steps too.
  for (int step = 0; step < 3; ++step) {
    std::vector<int32_t> next = {static_cast<int32_t>(step), 50, 96};
    std::vector<SequenceState> solo;
    for (auto& state : states) solo.push_back(state);  // forks: device-side copies
    for (size_t i = 0; i < states.size(); ++i) batch[i] = {&states[i], std::span(&next[i], 1), {}};
    gpu().forward(kCpu, batch, {OutputKind::LogitsLast, 0}, ws_, out);
    for (size_t i = 0; i < states.size(); ++i) {
      const auto expected = run(gpu(), solo[i], {next[i]}, OutputKind::LogitsLast);
      EXPECT_TRUE(test::same_bits(out[i], expected)) << "step " << step << " sequence " << i;
    }
  }
}

TEST_P(VulkanModel, LastRowOutputsOfABatchEqualEachSequenceAlone) {
  // With chunk 4 the first round holds rows 0-1 (finishing), 2-5 (not) and 6-8 (finishing): the
  // finishing rows are not adjacent, and their outputs fill slots 0 and 1.
  const std::vector<std::vector<int32_t>> prompts = {
      test::random_tokens(2, 97, 31), test::random_tokens(6, 97, 32), test::random_tokens(3, 97, 33)};
  for (OutputKind kind : {OutputKind::LogitsLast, OutputKind::HiddenLast, OutputKind::ArgmaxLast}) {
    std::vector<SequenceState> states;
    for (size_t i = 0; i < prompts.size(); ++i) states.push_back(gpu().new_state());
    std::vector<SequenceInput> batch;
    for (size_t i = 0; i < prompts.size(); ++i) batch.push_back({&states[i], prompts[i], {}});
    std::vector<std::vector<float>> out;
    gpu().forward(kCpu, batch, {kind, 4}, ws_, out);
    for (size_t i = 0; i < prompts.size(); ++i) {
      SequenceState alone = cpu().new_state();
      const auto expected = run(cpu(), alone, prompts[i], kind);
      expect_cpu_equal(out[i], expected, "sequence " + std::to_string(i));
    }
  }
}

TEST_P(VulkanModel, DecodeRecordsOnceAndReplays) {
  SequenceState state = gpu().new_state();
  Workspace ws;
  SequenceInput input{&state, {}, {}};
  std::vector<std::vector<float>> out;
  int32_t token = 3;
  input.tokens = std::span(&token, 1);
  gpu().forward(kCpu, std::span(&input, 1), {OutputKind::LogitsLast, 0}, ws, out);
  const int64_t after_first = vulkan::VulkanBackend::recordings(*ws.stream);
  EXPECT_EQ(after_first, 1);
  for (int step = 0; step < 5; ++step) {
    token = static_cast<int32_t>(std::max_element(out[0].begin(), out[0].end()) - out[0].begin());
    gpu().forward(kCpu, std::span(&input, 1), {OutputKind::LogitsLast, 0}, ws, out);
  }
  EXPECT_EQ(vulkan::VulkanBackend::recordings(*ws.stream), after_first)
      << "a steady decode loop should replay its recording";
  EXPECT_EQ(state.position, 6);
  // A new state (whose buffer may reuse the freed one's handle) is a new shape: recorded anew,
  // and its first step equals a fresh state's first step in another workspace.
  state = gpu().new_state();
  token = 3;
  gpu().forward(kCpu, std::span(&input, 1), {OutputKind::LogitsLast, 0}, ws, out);
  EXPECT_EQ(vulkan::VulkanBackend::recordings(*ws.stream), after_first + 1);
  SequenceState fresh = gpu().new_state();
  EXPECT_TRUE(test::same_bits(out[0], run(gpu(), fresh, {3}, OutputKind::LogitsLast)));
}

TEST_P(VulkanModel, ADecodeStepOfEightSequencesTakesAsManyDispatchesAsOne) {
  // The conv and the scan take every sequence of a round in one dispatch, so a decode step of a
  // batch records the same dispatches as a step of one sequence: five a layer (in_proj with the
  // norm, conv, x_proj, the scan with dt_proj, out_proj), plus FalconMamba's mixer norm.
  auto step_phases = [&](size_t sequences) {
    std::vector<SequenceState> states;
    for (size_t i = 0; i < sequences; ++i) states.push_back(gpu().new_state());
    std::vector<int32_t> tokens(sequences, 5);
    std::vector<SequenceInput> batch;
    for (size_t i = 0; i < sequences; ++i) batch.push_back({&states[i], std::span(&tokens[i], 1), {}});
    Workspace ws;
    std::vector<std::vector<float>> out;
    gpu().forward(kCpu, batch, {OutputKind::ArgmaxLast, 0}, ws, out);
    return recorded_phases(gpu(), ws);
  };
  auto count = [](const std::vector<std::string>& phases, const std::string& phase) {
    return std::count(phases.begin(), phases.end(), phase);
  };
  const std::vector<std::string> one = step_phases(1), eight = step_phases(8);
  const int64_t layers = cpu().config().n_layer;
  for (const char* phase :
       {"in_proj gemm", "conv+silu", "x_proj gemm", "selective scan+gate", "out_proj gemm+residual"})
    EXPECT_EQ(count(eight, phase), layers) << phase;
  EXPECT_EQ(count(eight, "dt_proj gemm+softplus"), 0);
  const int64_t mixer_norms = count(eight, "rmsnorm");
  EXPECT_TRUE(mixer_norms == 0 || mixer_norms == layers) << mixer_norms;
  const int64_t per_layer = 5 * layers + mixer_norms;
  const int64_t outside =
      count(eight, "embed") + count(eight, "norm_f") + count(eight, "lm_head gemm") + count(eight, "argmax");
  EXPECT_EQ(static_cast<int64_t>(eight.size()), per_layer + outside);
  EXPECT_EQ(eight, one) << "batch 8 recorded " << eight.size() << " dispatches, batch 1 " << one.size();

  // A prefill round (kMatmulTiledMinRows rows or more) keeps dt_proj as its own GEMM, one
  // dispatch a layer, and its scan reads dt from memory: the same bits as the fused decode.
  SequenceState prefill_state = gpu().new_state();
  const auto prompt = test::random_tokens(vulkan::kMatmulTiledMinRows, 97, 4);
  Workspace ws;
  std::vector<std::vector<float>> out;
  const SequenceInput input{&prefill_state, prompt, {}};
  gpu().forward(kCpu, std::span(&input, 1), {OutputKind::LogitsLast, 0}, ws, out);
  const std::vector<std::string> prefill = recorded_phases(gpu(), ws);
  EXPECT_EQ(count(prefill, "dt_proj gemm+softplus"), layers);
  EXPECT_EQ(count(prefill, "selective scan+gate"), layers);
}

TEST_P(VulkanModel, ForkedStateContinuesOnTheCpu) {
  // A state advanced on the device, downloaded and continued on the CPU, equals the device
  // continuing it: the state layout is the same on both sides. A fork stays on the device.
  const auto tokens = test::random_tokens(6, 97, 9);
  SequenceState state = gpu().new_state();
  run(gpu(), state, tokens, OutputKind::None);
  const SequenceState device_fork = state;
  EXPECT_TRUE(device_fork.on_device());
  EXPECT_TRUE(test::same_bits(device_fork.download(), state.download()));
  SequenceState fork(state.download(), state.position);
  EXPECT_FALSE(fork.on_device());
  const auto on_cpu = run(cpu(), fork, {17}, OutputKind::LogitsLast);
  const auto on_gpu = run(gpu(), state, {17}, OutputKind::LogitsLast);
  expect_cpu_equal(on_gpu, on_cpu, "continued logits");
  // The device-held state itself, given to the CPU model, is downloaded and continues there.
  const auto from_device = run(cpu(), state, {18}, OutputKind::LogitsLast);
  EXPECT_FALSE(state.on_device());
  expect_cpu_equal(from_device, run(cpu(), fork, {18}, OutputKind::LogitsLast),
                   "the device state on the CPU");
}

INSTANTIATE_TEST_SUITE_P(Dtypes, VulkanModel, ::testing::Values(DType::F32, DType::BF16),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

class VulkanModelVariants : public test::VulkanTest {};

TEST_F(VulkanModelVariants, FalconMambaWithFeatureInputsEqualsTheCpu) {
  // FalconMamba's mixer norms and an input projection of feature rows, in one batch with a
  // token sequence: the remaining paths of the executor.
  MakeModelOptions options;
  options.config = test::small_config(32, 2, 61);
  options.config.ssm.mixer_rms_norm = true;
  options.input_dim = 5;
  options.seed = 11;
  const std::string dir = test::write_model(options, "vulkan_falcon");
  setenv("MB_VULKAN_VALIDATION", "1", 1);
  auto cpu = Model::load(dir);
  LoadOptions on_gpu;
  on_gpu.device = {DeviceKind::Vulkan, ctx().info().index};
  auto gpu = Model::load(dir, on_gpu);
  const auto features = test::random_floats(6 * 5, 12);
  const auto tokens = test::random_tokens(4, 61, 13);
  std::vector<std::vector<float>> expected, got;
  for (const Model* model : {cpu.get(), gpu.get()}) {
    SequenceState a = model->new_state(), b = model->new_state();
    const SequenceInput batch[] = {{&a, {}, features}, {&b, tokens, {}}};
    Workspace ws;
    model->forward(ComputeContext{2}, batch, {OutputKind::LogitsAll, 4}, ws,
                   model == cpu.get() ? expected : got);
  }
  ASSERT_EQ(got.size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_LE(test::nmse(got[i], expected[i]), kMaxNmse) << "sequence " << i;
    if (ctx().exact_fma()) {
      EXPECT_TRUE(test::same_bits(got[i], expected[i])) << "sequence " << i;
    }
  }
  for (const std::string& error : vulkan_of(*gpu).context().validation_errors())
    ADD_FAILURE() << "Vulkan validation error: " << error;
}

TEST_F(VulkanModelVariants, ADeviceLoadDropsTheHostMatricesUnlessAskedToKeepThem) {
  // Forward reads the device's copy of the weights, so a model loaded for a device frees its
  // packed host matrices after the upload (every VulkanModel test runs such a model, under
  // ASan in CI); moving it back to the CPU is then an error that says why. keep_host_weights
  // keeps them, and the move gives the CPU's bits.
  MakeModelOptions options;
  options.config = test::small_config(32, 2, 61);
  options.seed = 5;
  const std::string dir = test::write_model(options, "vulkan_host_weights");
  auto cpu = Model::load(dir);
  LoadOptions on_gpu;
  on_gpu.device = {DeviceKind::Vulkan, ctx().info().index};
  auto gpu = Model::load(dir, on_gpu);
  ASSERT_GT(cpu->host_matrix_bytes(), 0u);
  EXPECT_EQ(gpu->host_matrix_bytes(), 0u);
  EXPECT_FALSE(gpu->has_host_matrices());
  EXPECT_EQ(gpu->matrix_bytes(), cpu->matrix_bytes());  // what a step streams, still reported

  const auto tokens = test::random_tokens(5, 61, 6);
  auto logits = [&](const Model& model) {
    SequenceState state = model.new_state();
    const SequenceInput input{&state, tokens, {}};
    Workspace ws;
    std::vector<std::vector<float>> out;
    model.forward(ComputeContext{1}, std::span(&input, 1), {OutputKind::LogitsLast, 0}, ws, out);
    return out.at(0);
  };
  const std::vector<float> expected = logits(*cpu);
  auto expect_cpu_bits = [&](const std::vector<float>& got, const char* what) {
    EXPECT_LE(test::nmse(got, expected), kMaxNmse) << what;
    if (ctx().exact_fma()) {
      EXPECT_TRUE(test::same_bits(got, expected)) << what;
    }
  };
  expect_cpu_bits(logits(*gpu), "device-only model");
  try {
    gpu->set_device(DeviceSpec{});
    ADD_FAILURE() << "moving a device-only model to the CPU should be an error";
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find("load it again"), std::string::npos) << error.what();
  }
  EXPECT_TRUE(gpu->on_device());  // the refusal left the model on its device, still working
  expect_cpu_bits(logits(*gpu), "device-only model after the refused move");
  vulkan::ContextOptions device;
  device.device_index = ctx().info().index;
  EXPECT_THROW(gpu->set_backend(std::make_shared<vulkan::VulkanBackend>(device)), Error);

  on_gpu.keep_host_weights = true;
  auto kept = Model::load(dir, on_gpu);
  EXPECT_EQ(kept->host_matrix_bytes(), cpu->host_matrix_bytes());
  expect_cpu_bits(logits(*kept), "model that kept its host matrices");
  kept->set_device(DeviceSpec{});
  EXPECT_FALSE(kept->on_device());
  EXPECT_TRUE(test::same_bits(logits(*kept), expected));
}

TEST_F(VulkanModelVariants, MatricesCutIntoPiecesGiveTheSameBits) {
  // Matrices larger than one storage binding (lavapipe: 128 MiB, less than an f32 130m LM head)
  // are uploaded in runs of whole panels, one dispatch per run. Cut here at 32 KiB: one panel of
  // the 128-column out_proj, two of the 64-column in_proj (whose dispatches each fuse the layer
  // norm), x_proj and LM head. dt_rank 72 makes dt_proj 36 KiB: two pieces, so the cut model
  // keeps dt_proj's own GEMM dispatches while the whole one runs dt_proj inside the scan.
  MakeModelOptions options;
  options.config = test::small_config(64, 1, 200);
  options.config.ssm.dt_rank = 72;
  options.seed = 21;
  const std::string dir = test::write_model(options, "vulkan_pieces");
  auto host = Model::load(dir), whole = Model::load(dir), cut = Model::load(dir);
  setenv("MB_VULKAN_VALIDATION", "1", 1);
  vulkan::ContextOptions context;
  context.device_index = ctx().info().index;
  whole->set_backend(std::make_shared<vulkan::VulkanBackend>(context));
  cut->set_backend(std::make_shared<vulkan::VulkanBackend>(context, 128 * kPanelWidth * 4));
  // 5 positions take the decode GEMM; 140 the tiled one, over two tiles of rows (the last partial).
  for (int64_t length : {5, 140}) {
    const auto tokens = test::random_tokens(length, 200, 22);
    std::vector<std::vector<float>> expected, got_whole, got_cut;
    for (auto* model : {host.get(), whole.get(), cut.get()}) {
      SequenceState state = model->new_state();
      const SequenceInput input{&state, tokens, {}};
      Workspace ws;
      model->forward(ComputeContext{1}, std::span(&input, 1), {OutputKind::LogitsAll, 0}, ws,
                     model == host.get() ? expected : (model == whole.get() ? got_whole : got_cut));
      if (model == cut.get()) {
        // The LM head and in_proj of 256 rows (four panels) and dt_proj are two pieces each.
        int checked = 0;
        for (const DevicePhaseTime& time : cut->device_timings(ws)) {
          if (time.phase == "lm_head gemm" || time.phase == "in_proj gemm" ||
              time.phase == "dt_proj gemm+softplus") {
            EXPECT_EQ(time.dispatches, 2) << time.phase;
            ++checked;
          }
        }
        EXPECT_EQ(checked, ctx().info().timestamps ? 3 : 0);
      }
    }
    EXPECT_TRUE(test::same_bits(got_cut[0], got_whole[0])) << length << " positions";
    EXPECT_LE(test::nmse(got_whole[0], expected[0]), kMaxNmse) << length << " positions";
    if (ctx().exact_fma()) {
      EXPECT_TRUE(test::same_bits(got_whole[0], expected[0])) << length << " positions";
    }
  }
}

TEST_F(VulkanModelVariants, ManySequencesAndTheOnePerSequenceFallbackGiveTheSameBits) {
  // More sequences than one batched dispatch takes (kMaxGpuParts), prefilled in chunks of
  // different lengths and then stepped together, on an executor that batches and on one whose
  // context pretends it cannot index buffer arrays (one conv and one scan dispatch per sequence).
  MakeModelOptions options;
  options.config = test::small_config(32, 2, 53);
  options.config.ssm.mixer_rms_norm = true;
  options.seed = 31;
  const std::string dir = test::write_model(options, "vulkan_many");
  setenv("MB_VULKAN_VALIDATION", "1", 1);
  auto batched = Model::load(dir), fallback = Model::load(dir);
  vulkan::ContextOptions context;
  context.device_index = ctx().info().index;
  batched->set_backend(std::make_shared<vulkan::VulkanBackend>(context));
  context.buffer_arrays = false;
  fallback->set_backend(std::make_shared<vulkan::VulkanBackend>(context));
  const size_t n = vulkan::kMaxGpuParts + 2;
  std::vector<std::vector<int32_t>> prompts;
  for (size_t i = 0; i < n; ++i) prompts.push_back(test::random_tokens(1 + i % 4, 53, 40 + i));
  std::vector<std::vector<float>> results[2];
  for (int which = 0; which < 2; ++which) {
    const Model& model = which == 0 ? *batched : *fallback;
    std::vector<SequenceState> states;
    for (size_t i = 0; i < n; ++i) states.push_back(model.new_state());
    std::vector<SequenceInput> batch;
    for (size_t i = 0; i < n; ++i) batch.push_back({&states[i], prompts[i], {}});
    Workspace ws;
    std::vector<std::vector<float>> out;
    model.forward(ComputeContext{2}, batch, {OutputKind::LogitsLast, 3}, ws, out);
    results[which] = out;
    std::vector<int32_t> next(n);
    for (size_t i = 0; i < n; ++i) next[i] = static_cast<int32_t>(i);
    for (size_t i = 0; i < n; ++i) batch[i] = {&states[i], std::span(&next[i], 1), {}};
    model.forward(ComputeContext{2}, batch, {OutputKind::LogitsLast, 0}, ws, out);
    results[which].insert(results[which].end(), out.begin(), out.end());
    const vulkan::VulkanBackend& executor = vulkan_of(model);
    const std::vector<std::string> phases = recorded_phases(model, ws);
    // Per layer (2): ceil(18 / 16) scans batched, 18 without arrays; the mixer norms are one
    // dispatch, at most one more normalizes the layer's input.
    const int64_t scans = std::count(phases.begin(), phases.end(), "selective scan+gate");
    EXPECT_EQ(scans, which == 0 ? 2 * 2 : static_cast<int64_t>(2 * n));
    EXPECT_LE(std::count(phases.begin(), phases.end(), "rmsnorm"), 2 * 2);
    for (const std::string& error : executor.context().validation_errors())
      ADD_FAILURE() << "Vulkan validation error: " << error;
    // Each sequence's results equal the sequence run alone on the batching executor.
    if (which == 0) {
      for (size_t i = 0; i < n; i += 5) {
        SequenceState alone = model.new_state();
        SequenceInput input{&alone, prompts[i], {}};
        Workspace solo_ws;
        model.forward(ComputeContext{2}, std::span(&input, 1), {OutputKind::LogitsLast, 3}, solo_ws, out);
        EXPECT_TRUE(test::same_bits(out[0], results[0][i])) << "sequence " << i;
        input.tokens = std::span(&next[i], 1);
        model.forward(ComputeContext{2}, std::span(&input, 1), {OutputKind::LogitsLast, 0}, solo_ws, out);
        EXPECT_TRUE(test::same_bits(out[0], results[0][n + i])) << "sequence " << i << " step";
      }
    }
  }
  ASSERT_EQ(results[0].size(), results[1].size());
  for (size_t i = 0; i < results[0].size(); ++i)
    EXPECT_TRUE(test::same_bits(results[0][i], results[1][i])) << "output " << i;
}

TEST_F(VulkanModelVariants, AGrowingStatePartLivesOnTheDeviceAndEqualsTheCpu) {
  // A block whose state grows per position (common/history_block.h): the device appends each
  // round's rows into the state's growing buffer, which grows across blocks of positions (300
  // crosses the first), forks on the device, and holds the CPU's bits.
  MakeModelOptions options;
  options.config = test::small_config(32, 2, 61);
  options.seed = 13;
  const std::string dir = test::write_model(options, "vulkan_growing");
  setenv("MB_VULKAN_VALIDATION", "1", 1);
  auto cpu = Model::load(dir);
  LoadOptions on_gpu;
  on_gpu.device = {DeviceKind::Vulkan, ctx().info().index};
  on_gpu.keep_host_weights = true;
  auto gpu = Model::load(dir, on_gpu);
  for (Model* model : {cpu.get(), gpu.get()}) model->append_block(std::make_unique<test::HistoryBlock>(20));
  const auto prompt = test::random_tokens(300, 61, 14), steps = test::random_tokens(3, 61, 15);
  std::vector<std::vector<float>> logits[2];
  SequenceState states[2] = {cpu->new_state(), gpu->new_state()};
  for (int which = 0; which < 2; ++which) {
    const Model& model = which == 0 ? *cpu : *gpu;
    Workspace ws;
    std::vector<std::vector<float>> out;
    SequenceInput input{&states[which], prompt, {}};
    model.forward(ComputeContext{2}, std::span(&input, 1), {OutputKind::LogitsLast, 100}, ws, out);
    logits[which].push_back(out[0]);
    for (const int32_t& token : steps) {
      input.tokens = std::span(&token, 1);
      model.forward(ComputeContext{2}, std::span(&input, 1), {OutputKind::LogitsLast, 0}, ws, out);
      logits[which].push_back(out[0]);
    }
  }
  ASSERT_TRUE(states[1].on_device());
  EXPECT_EQ(states[1].floats(), gpu->state_floats() + 303 * 20);
  const SequenceState fork = states[1];
  EXPECT_TRUE(fork.on_device());
  EXPECT_TRUE(test::same_bits(fork.download(), states[1].download()));
  const std::vector<float> cpu_values = states[0].download(), gpu_values = states[1].download();
  EXPECT_LE(test::nmse(gpu_values, cpu_values), kMaxNmse);
  for (size_t i = 0; i < logits[0].size(); ++i)
    EXPECT_LE(test::nmse(logits[1][i], logits[0][i]), kMaxNmse) << i;
  if (ctx().exact_fma()) {
    EXPECT_TRUE(test::same_bits(gpu_values, cpu_values));
    for (size_t i = 0; i < logits[0].size(); ++i)
      EXPECT_TRUE(test::same_bits(logits[1][i], logits[0][i])) << i;
  }
  for (const std::string& error : vulkan_of(*gpu).context().validation_errors())
    ADD_FAILURE() << "Vulkan validation error: " << error;
}

class VulkanModelErrors : public test::VulkanTest {};

TEST_F(VulkanModelErrors, DeviceIndexOutOfRangeIsAnError) {
  MakeModelOptions options;
  options.config = test::small_config(16, 1, 37);
  const std::string dir = test::write_model(options, "vulkan_model_errors");
  LoadOptions load;
  load.device = {DeviceKind::Vulkan, 99};
  try {
    Model::load(dir, load);
    FAIL() << "expected an error";
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find("out of range"), std::string::npos) << error.what();
  }
}

// The hybrids' attention and MLP ops have no shaders yet: the load is refused naming the first op
// the device lacks (a model without Mamba layers names the attention and MLP blocks).
TEST_F(VulkanModelErrors, HybridModelsAreRefusedNamingTheirBlocks) {
  for (const ModelConfig& config : {test::granite_config("M*"), test::nemotron_config("-*")}) {
    MakeModelOptions options;
    options.config = config;
    const std::string dir = test::write_model(options, "vulkan_model_hybrid");
    LoadOptions load;
    load.device = {DeviceKind::Vulkan, 0};
    try {
      Model::load(dir, load);
      FAIL() << "expected an error";
    } catch (const Error& error) {
      const std::string what = error.what();
      EXPECT_NE(what.find(config.hybrid.pattern.find('M') == std::string::npos ? "attention and MLP blocks"
                                                                               : "does not run"),
                std::string::npos)
          << what;
      EXPECT_NE(what.find("--device cpu"), std::string::npos) << what;
    }
  }
}

}  // namespace
}  // namespace mb::vulkan_model_test
