// SPDX-License-Identifier: MIT
// `--device vulkan` end to end through the CLI, for Mamba-1, Mamba-2 and Mamba-3 checkpoints:
// logits files byte-identical to the CPU's (on a device with an exact fma; Mamba-2 and Mamba-3 in
// both scan orders, loaded with a quantized --dtype, and quantized GGUF files), the same greedy
// ids from generate and the same text from run, and bench's JSON with the CPU fields plus the
// device's phase timings (those of a quantized load's two product kernels too).
#include <cstdlib>
#include <map>
#include <string>

#include <nlohmann/json.hpp>

#include "common/test_util.h"
#include "io/mapped_file.h"
#include "vulkan/vulkan_test_util.h"

namespace mb {
namespace {

class VulkanCli : public test::VulkanTest, public ::testing::WithParamInterface<std::string> {
 protected:
  struct Output {
    int status;
    std::string out, err;
  };
  Output cli(const std::string& arguments) {
    const std::string dir = test::make_temp_dir("vulkan_cli_run");
    // MB_CLI overrides the build's path, for a copied build on another machine (gpu_check.sh).
    const char* override_path = std::getenv("MB_CLI");
    const std::string command = std::string(override_path != nullptr ? override_path : MB_CLI_PATH) + " " +
                                arguments + " >" + dir + "/out.txt 2>" + dir + "/err.txt";
    const int status = std::system(command.c_str());
    return {status, read_text_file(dir + "/out.txt"), read_text_file(dir + "/err.txt")};
  }
  // A bf16 checkpoint of the parameter's architecture, with a tokenizer, made once per binary.
  const std::string& model() {
    static std::map<std::string, std::string> made;
    const std::string& arch = GetParam();
    if (made.count(arch) == 0) {
      const std::string d = test::make_temp_dir("vulkan_cli_model") + "/" + arch;
      const Output out = cli("make-model --out " + d + " --arch " + arch +
                             " --d-model 32 --n-layer 2 --vocab 301 --seed 5 --dtype bf16");
      EXPECT_EQ(out.status, 0) << out.err;
      made[arch] = d;
    }
    return made[arch];
  }
  std::string device() { return "vulkan:" + std::to_string(ctx().info().index); }
  bool ssd() { return GetParam() != "mamba1"; }
};

TEST_P(VulkanCli, LogitsGenerateAndRunEqualTheCpu) {
  const std::string dir = test::make_temp_dir("vulkan_cli_logits");
  const std::string base = "logits -m " + model() + " --tokens 5,6,7,8,9,10,11 --all-positions --chunk 3 ";
  for (const std::string& scan :
       ssd() ? std::vector<std::string>{"sequential", "chunked"} : std::vector<std::string>{""}) {
    const std::string form = scan.empty() ? "" : "--scan " + scan + " --ssd-chunk 2 ";
    ASSERT_EQ(cli(base + form + "--out " + dir + "/cpu.npy").status, 0);
    const Output gpu = cli(base + form + "--out " + dir + "/gpu.npy --device " + device());
    ASSERT_EQ(gpu.status, 0) << gpu.err;
    const std::string cpu_bytes = read_text_file(dir + "/cpu.npy"),
                      gpu_bytes = read_text_file(dir + "/gpu.npy");
    ASSERT_EQ(cpu_bytes.size(), gpu_bytes.size());
    if (ctx().exact_fma()) {
      EXPECT_TRUE(cpu_bytes == gpu_bytes) << "the .npy files differ " << form;
    }
  }

  const std::string generate = "generate -m " + model() + " --tokens 1,2,3 -n 8 --ignore-eos";
  const Output cpu_ids = cli(generate), gpu_ids = cli(generate + " --device " + device());
  ASSERT_EQ(gpu_ids.status, 0) << gpu_ids.err;
  if (ctx().exact_fma()) {
    EXPECT_EQ(gpu_ids.out, cpu_ids.out);
  }

  const std::string run =
      "run -m " + model() + " -p \"Once upon a time\" -n 6 --temp 0.8 --seed 3 --ignore-eos";
  const Output cpu_text = cli(run), gpu_text = cli(run + " --device " + device());
  ASSERT_EQ(cpu_text.status, 0) << cpu_text.err;
  ASSERT_EQ(gpu_text.status, 0) << gpu_text.err;
  if (ctx().exact_fma()) {
    EXPECT_EQ(gpu_text.out, cpu_text.out);
  }
}

TEST_P(VulkanCli, QuantizedLoadsEqualTheCpu) {
  // --dtype quantizes the bf16 checkpoint at load; the device computes with its tiles and gives the
  // CPU's logits file (a prefill of 4 rows and, with --chunk 1, decode-sized rounds).
  const std::string dir = test::make_temp_dir("vulkan_cli_quant");
  for (const std::string dtype : {"q4_0", "q8_0"}) {
    const std::string base = "logits -m " + model() + " --tokens 5,6,7,8 --all-positions --dtype " + dtype +
                             (dtype == "q8_0" ? " --chunk 1" : "");
    ASSERT_EQ(cli(base + " --out " + dir + "/cpu.npy").status, 0);
    const Output gpu = cli(base + " --out " + dir + "/gpu.npy --device " + device());
    ASSERT_EQ(gpu.status, 0) << gpu.err;
    const std::string cpu_bytes = read_text_file(dir + "/cpu.npy"),
                      gpu_bytes = read_text_file(dir + "/gpu.npy");
    ASSERT_EQ(cpu_bytes.size(), gpu_bytes.size());
    if (ctx().exact_fma()) {
      EXPECT_TRUE(cpu_bytes == gpu_bytes) << "the .npy files differ for " << dtype;
    }
  }
  if (GetParam() != "mamba1" || !ctx().info().timestamps) return;
  // bench's device timings of a quantized load: a decode step's in_proj is one GEMV per layer (its
  // rows quantized inside the dispatch), a prefill of 12 rows two dispatches per layer (the rows
  // quantized once, then the tiled GEMM).
  const Output bench = cli("bench -m " + model() + " --dtype q4_0 --prompt-len 12 --gen-len 2 --repeats 1 " +
                           "--json --device " + device());
  ASSERT_EQ(bench.status, 0) << bench.err;
  const auto json = nlohmann::json::parse(bench.out);
  EXPECT_EQ(json["dtype"].get<std::string>(), "q4_0");
  EXPECT_EQ(json["device_phases"]["decode_step"]["in_proj gemm"]["dispatches"].get<int>(), 2) << bench.out;
  EXPECT_EQ(json["device_phases"]["prefill"]["in_proj gemm"]["dispatches"].get<int>(), 4) << bench.out;
}

TEST_P(VulkanCli, QuantizedGgufFilesEqualTheCpu) {
  // A GGUF file of each quantized file type: Q8_0 and Q4_0 (Mamba-1, 32 wide), Q4_K_M (Mamba-2,
  // 256 wide so that its K-quants apply: Q4_K matrices and the Q6_K embedding, which is also the
  // LM head). Their blocks go to the device as stored.
  if (GetParam() == "mamba3") GTEST_SKIP() << "llama.cpp's GGUF has no Mamba-3";
  const std::string dir = test::make_temp_dir("vulkan_cli_gguf");
  const std::vector<std::string> types =
      GetParam() == "mamba1" ? std::vector<std::string>{"q8_0", "q4_0"} : std::vector<std::string>{"q4_k_m"};
  for (const std::string& type : types) {
    const std::string file = dir + "/" + type + ".gguf";
    const Output made = cli("make-model --out " + file + " --arch " + GetParam() + " --d-model " +
                            (type == "q4_k_m" ? "256 --n-layer 1" : "32 --n-layer 2") +
                            " --vocab 301 --seed 7 --format gguf --dtype " + type);
    ASSERT_EQ(made.status, 0) << made.err;
    // A prefill of 10 rows (the tiled GEMM), then single rows (the GEMV).
    const std::string base =
        "logits -m " + file + " --tokens 5,6,7,8,9,10,11,12,13,14,15,16 --all-positions --chunk 10";
    ASSERT_EQ(cli(base + " --out " + dir + "/cpu.npy").status, 0);
    const Output gpu = cli(base + " --out " + dir + "/gpu.npy --device " + device());
    ASSERT_EQ(gpu.status, 0) << gpu.err;
    const std::string cpu_bytes = read_text_file(dir + "/cpu.npy"),
                      gpu_bytes = read_text_file(dir + "/gpu.npy");
    ASSERT_EQ(cpu_bytes.size(), gpu_bytes.size());
    if (ctx().exact_fma()) {
      EXPECT_TRUE(cpu_bytes == gpu_bytes) << "the .npy files differ for " << type;
    }
  }
}

TEST_P(VulkanCli, BenchReportsTheCpuFieldsAndDeviceTimings) {
  const Output cpu = cli("bench -m " + model() + " --prompt-len 6 --gen-len 2 --repeats 1 --json");
  const Output gpu = cli("bench -m " + model() +
                         " --prompt-len 6 --gen-len 2 --repeats 1 --batch 2 --json --device " + device());
  ASSERT_EQ(cpu.status, 0) << cpu.err;
  ASSERT_EQ(gpu.status, 0) << gpu.err;
  const auto cpu_json = nlohmann::json::parse(cpu.out), gpu_json = nlohmann::json::parse(gpu.out);
  for (const auto& [key, value] : cpu_json.items()) EXPECT_TRUE(gpu_json.contains(key)) << key;
  EXPECT_GT(gpu_json["decode_tok_s"].get<double>(), 0.0);
  EXPECT_EQ(gpu_json["batch"].get<int>(), 2);
  EXPECT_NE(gpu_json["device"].get<std::string>().find("vulkan:"), std::string::npos);
  if (ctx().info().timestamps) {
    ASSERT_TRUE(gpu_json.contains("device_phases")) << gpu.out;
    const auto& step = gpu_json["device_phases"]["decode_step"];
    ASSERT_TRUE(step.contains("in_proj gemm")) << gpu.out;
    EXPECT_EQ(step["in_proj gemm"]["dispatches"].get<int>(), 2);  // one per layer
    // Each architecture's scan, by its phase name.
    const std::string scan = GetParam() == "mamba1"   ? "selective scan+gate"
                             : GetParam() == "mamba2" ? "ssd scan"
                                                      : "mixer (bcnorm+rope+scan+gate)";
    EXPECT_TRUE(gpu_json["device_phases"]["prefill"].contains(scan)) << gpu.out;
    EXPECT_TRUE(step.contains(scan)) << gpu.out;
  }
}

INSTANTIATE_TEST_SUITE_P(Architectures, VulkanCli, ::testing::Values("mamba1", "mamba2", "mamba3"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace mb
