// SPDX-License-Identifier: MIT
// Quantized weights on the Vulkan device against the CPU model, compared with memcmp: Mamba-1 and
// Mamba-2 loaded with each quantized dtype (q8_0, q4_0, q4_k, q6_k: the CLI's --dtype), Mamba-3
// with q4_k, and GGUF files in Q4_K_M (Q4_K and Q6_K matrices in one model) give the CPU's logits
// and states after a prefill (the tiled GEMM) and decode steps (the GEMV); on the device a prefill
// equals its decode steps and a batch equals its sequences alone; a Q4_K model whose matrices are
// cut into pieces of a few panels (as a device's binding limit cuts a large model's) gives the
// CPU's bits too. The models are 256 wide, so the K-quants apply to every projection but dt_proj
// (16 columns: bf16). The bitwise CPU comparison needs an exact fma on the device
// (Context::exact_fma); without one it falls back to NMSE <= 1e-7 and says so.
#include <cstdlib>
#include <map>
#include <memory>
#include <string>

#include "backends/vulkan/vulkan_backend.h"
#include "common/mamba2_reference.h"
#include "common/mamba3_reference.h"
#include "common/model_fixture.h"
#include "common/test_util.h"
#include "io/safetensors.h"
#include "model/config.h"
#include "model/gguf_checkpoint.h"
#include "ops/quant.h"
#include "vulkan/vulkan_test_util.h"

// A namespace of its own: the test binary compiles its files in batches (a unity build).
namespace mb::vulkan_quant_model_test {
namespace {

const ComputeContext kCpu{2};
constexpr double kMaxNmse = 1e-7;
constexpr int64_t kVocab = 97;

struct Variant {
  std::string arch;  // mamba1, mamba2, mamba3
  DType dtype;       // the load dtype, or the GGUF file's main type with `gguf`
  bool gguf = false;
  std::string name() const {
    return arch + "_" + (gguf ? std::string("gguf_q4_k_m") : std::string(dtype_name(dtype)));
  }
};

ModelConfig variant_config(const std::string& arch) {
  if (arch == "mamba2") return test::mamba2_config(256, 16, 32, 2, kVocab);  // 16 heads, two groups
  if (arch == "mamba3") return test::mamba3_config(256, 16, 64, kVocab);
  return test::small_config(256, 2, kVocab);
}

struct Loaded {
  std::unique_ptr<Model> cpu, gpu;
};

// One CPU and one Vulkan model per variant for the whole binary.
Loaded& loaded(const Variant& v) {
  static std::map<std::string, Loaded> models;
  Loaded& slot = models[v.name()];
  if (slot.cpu) return slot;
  MakeModelOptions options;
  options.config = variant_config(v.arch);
  options.config.tie_embeddings = !v.gguf;  // Q4_K_M stores an untied head in Q6_K
  options.seed = 29;
  std::string path = test::write_model(options, "vulkan_quant_" + v.arch);
  LoadOptions on_cpu, on_gpu;
  if (v.gguf) {
    const std::string file = path + "/model.gguf";
    write_gguf_checkpoint(file, load_model_config(path), TensorSet::open_dir(path),
                          {GgufFileType::Q4_K_M, "", {}});
    path = file;
  } else {
    on_cpu.weight_dtype = v.dtype;
    on_gpu.weight_dtype = v.dtype;
  }
  setenv("MB_VULKAN_VALIDATION", "1", 1);  // every device model runs under the validation layer
  slot.cpu = Model::load(path, on_cpu);
  on_gpu.device = {DeviceKind::Vulkan, test::vulkan_test_context()->info().index};
  slot.gpu = Model::load(path, on_gpu);
  return slot;
}

class VulkanQuantModel : public test::VulkanTest, public ::testing::WithParamInterface<Variant> {
 protected:
  void SetUp() override {
    test::VulkanTest::SetUp();
    if (IsSkipped()) return;
    if (GetParam().arch == "mamba3" && !ctx().info().float64) GTEST_SKIP() << "Mamba-3 needs shaderFloat64";
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
    if (backend().context().exact_fma()) {
      const long diff = test::first_bit_difference(gpu_values, cpu_values);
      EXPECT_EQ(diff, -1) << what << ": element " << diff;
    }
  }

  Loaded* models_ = nullptr;
  Workspace ws_;
};

TEST_P(VulkanQuantModel, LogitsAndStatesEqualTheCpu) {
  if (!backend().context().exact_fma()) std::printf("[vulkan] no exact fma: comparing within NMSE only\n");
  if (!GetParam().gguf) {
    EXPECT_EQ(gpu().matrix_dtype(), GetParam().dtype);
  }
  // A prefill of 11 rows takes the tiled GEMM (rows quantized by their own dispatch), the decode
  // steps the GEMV (rows quantized inside it).
  const auto tokens = test::random_tokens(11, kVocab, 1);
  SequenceState cpu_state = cpu().new_state(), gpu_state = gpu().new_state();
  expect_cpu_equal(run(gpu(), gpu_state, tokens, OutputKind::LogitsAll),
                   run(cpu(), cpu_state, tokens, OutputKind::LogitsAll), "prefill logits");
  expect_cpu_equal(gpu_state.download(), cpu_state.download(), "state after the prefill");
  for (int32_t token : test::random_tokens(3, kVocab, 2))
    expect_cpu_equal(run(gpu(), gpu_state, {token}, OutputKind::LogitsLast),
                     run(cpu(), cpu_state, {token}, OutputKind::LogitsLast), "decode logits");
  expect_cpu_equal(gpu_state.download(), cpu_state.download(), "state after the steps");
}

TEST_P(VulkanQuantModel, PrefillEqualsStepsAndABatchEqualsEachSequenceAlone) {
  const auto tokens = test::random_tokens(10, kVocab, 3);
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

  // Rounds of 4 + 1 + 9 rows in chunks of 9 (the tiled GEMM, then the GEMV), then batched steps.
  const std::vector<std::vector<int32_t>> prompts = {test::random_tokens(4, kVocab, 4),
                                                     test::random_tokens(1, kVocab, 5),
                                                     test::random_tokens(9, kVocab, 6)};
  std::vector<SequenceState> states;
  for (size_t i = 0; i < prompts.size(); ++i) states.push_back(gpu().new_state());
  std::vector<SequenceInput> batch;
  for (size_t i = 0; i < prompts.size(); ++i) batch.push_back({&states[i], prompts[i], {}});
  std::vector<std::vector<float>> out;
  gpu().forward(kCpu, batch, {OutputKind::LogitsLast, 9}, ws_, out);
  for (size_t i = 0; i < prompts.size(); ++i) {
    SequenceState alone = gpu().new_state();
    EXPECT_TRUE(test::same_bits(out[i], run(gpu(), alone, prompts[i], OutputKind::LogitsLast)))
        << "sequence " << i;
    EXPECT_TRUE(test::same_bits(states[i].download(), alone.download())) << "sequence " << i;
  }
  std::vector<int32_t> next = {7, 50, 96};
  std::vector<SequenceState> solo;
  for (auto& state : states) solo.push_back(state);  // forks: device-side copies
  for (size_t i = 0; i < states.size(); ++i) batch[i] = {&states[i], std::span(&next[i], 1), {}};
  gpu().forward(kCpu, batch, {OutputKind::LogitsLast, 0}, ws_, out);
  for (size_t i = 0; i < states.size(); ++i)
    EXPECT_TRUE(test::same_bits(out[i], run(gpu(), solo[i], {next[i]}, OutputKind::LogitsLast)))
        << "step " << i;
}

class VulkanQuantPieces : public test::VulkanTest {};

TEST_F(VulkanQuantPieces, MatricesCutIntoPiecesGiveTheCpuBits) {
  // Pieces of 3 panels of a 256-column Q4_K matrix (one panel of the 512-column ones): in_proj's
  // 1024 rows take 22 pieces, the LM head's 97 three (the last of one row). A prefill quantizes
  // its rows once for all the pieces of a product; a decode step runs one GEMV per piece.
  MakeModelOptions options;
  options.config = variant_config("mamba1");
  options.seed = 31;
  const std::string dir = test::write_model(options, "vulkan_quant_pieces");
  LoadOptions quantized;
  quantized.weight_dtype = DType::Q4_K;
  auto cpu = Model::load(dir, quantized), cut = Model::load(dir, quantized);
  vulkan::ContextOptions context;
  context.device_index = ctx().info().index;
  context.validation = true;  // under the validation layer where it is installed, as every device test
  auto backend = std::make_shared<vulkan::VulkanBackend>(context, 3 * 16 * sizeof(BlockQ4_K));
  cut->set_backend(backend);
  const auto tokens = test::random_tokens(11, kVocab, 32);
  std::vector<float> logits[2], states[2];
  for (int which = 0; which < 2; ++which) {
    const Model& model = which == 0 ? *cpu : *cut;
    SequenceState state = model.new_state();
    Workspace ws;
    std::vector<std::vector<float>> out;
    SequenceInput input{&state, tokens, {}};
    model.forward(kCpu, std::span(&input, 1), {OutputKind::LogitsAll, 0}, ws, out);
    logits[which] = out[0];
    for (const int32_t& token : {5, 9}) {
      input.tokens = std::span(&token, 1);
      model.forward(kCpu, std::span(&input, 1), {OutputKind::LogitsLast, 0}, ws, out);
      logits[which].insert(logits[which].end(), out[0].begin(), out[0].end());
    }
    states[which] = state.download();
  }
  EXPECT_LE(test::nmse(logits[1], logits[0]), kMaxNmse);
  if (ctx().exact_fma()) {
    EXPECT_TRUE(test::same_bits(logits[1], logits[0]))
        << "at " << test::first_bit_difference(logits[1], logits[0]);
    EXPECT_TRUE(test::same_bits(states[1], states[0]));
  }
  for (const std::string& error : backend->context().validation_errors())
    ADD_FAILURE() << "Vulkan validation error: " << error;
}

std::vector<Variant> variants() {
  std::vector<Variant> all;
  for (const char* arch : {"mamba1", "mamba2"})
    for (DType dtype : {DType::Q8_0, DType::Q4_0, DType::Q4_K, DType::Q6_K}) all.push_back({arch, dtype});
  all.push_back({"mamba3", DType::Q4_K});
  all.push_back({"mamba1", DType::Q4_K, true});
  all.push_back({"mamba2", DType::Q4_K, true});
  return all;
}

INSTANTIATE_TEST_SUITE_P(Dtypes, VulkanQuantModel, ::testing::ValuesIn(variants()),
                         [](const auto& info) { return info.param.name(); });

}  // namespace
}  // namespace mb::vulkan_quant_model_test
