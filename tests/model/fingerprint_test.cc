// SPDX-License-Identifier: MIT
// Cross-machine bit fingerprints. The other exactness tests compare the instruction sets of one
// machine with each other; these pin the bits themselves, so that AVX-512, AVX2 and scalar on
// x86-64 and NEON and scalar on AArch64 are all held to the same outputs. Every op on fixed
// inputs, and small models of every architecture (written by make_model with fixed seeds) through
// prefill, the chunked scan and decode steps, are hashed (FNV-1a over the bytes of the floats;
// both architectures are little-endian) and compared with constants computed by the scalar
// target on x86-64.
//
// What the fingerprints leave out, and why:
// - NaN: a NaN created by an invalid operation is 0xffc00000 on x86 and 0x7fc00000 on AArch64,
//   so no input here makes one.
// - The sampler (engine/sampler.cc) uses std::exp in double; only logits are pinned.
// - make_model and the weight loaders compute a few values (dt biases, A = -exp(A_log)) with the
//   C library's double exp/log/expm1 and round them to f32. Those are not correctly rounded
//   everywhere, but their double results are within a few units in the last place of the true
//   value, so the f32 rounding agrees except for a value within about 2^-29 relative of a
//   rounding boundary; the constants below show none of these models' values is one.
//
// When a deliberate change of the numerics changes the bits, the failure message prints the
// whole table in source form, computed by the running target; paste it from an x86-64 run.
#include <gtest/gtest.h>

#include <cinttypes>
#include <cstdio>
#include <map>
#include <string>

#include "common/mamba2_reference.h"
#include "common/mamba3_reference.h"
#include "common/model_fixture.h"
#include "common/test_util.h"
#include "ops/causal_conv.h"
#include "ops/cpu/vec16.h"
#include "ops/gated_rms_norm.h"
#include "ops/matmul.h"
#include "ops/rms_norm.h"
#include "ops/selective_scan.h"

namespace mb {
namespace {

using test::random_floats;
using Fingerprints = std::map<std::string, uint64_t>;

// Computed by the scalar target on x86-64 (see the top of the file).
const Fingerprints kExpected = {
    {"conv_and_scan", 0x19abe815ad8da3f0ull},
    {"elementwise", 0x5e3cf95995261c29ull},
    {"falcon_mamba_bf16_decode", 0x9ac975dc0c6d4201ull},
    {"falcon_mamba_bf16_prefill", 0x0191091d6da1cd23ull},
    {"falcon_mamba_bf16_state", 0xf4d733b99d669bd4ull},
    {"mamba1_f32_decode", 0x798acb1023aaabb7ull},
    {"mamba1_f32_prefill", 0x2b8caca5c837e677ull},
    {"mamba1_f32_state", 0x902dd8ea2f2015f3ull},
    {"mamba2_f16_chunked_prefill", 0xb258ab0f4b4192faull},
    {"mamba2_f16_chunked_state", 0x5ee97b689ea375b5ull},
    {"mamba2_f16_decode", 0x05dcd94fa10b1ab8ull},
    {"mamba2_f16_prefill", 0x4d3b81c7790b2ef4ull},
    {"mamba2_f16_state", 0x639f7a83f69c3ce3ull},
    {"mamba3_bf16_chunked_prefill", 0x6f0776932c38266aull},
    {"mamba3_bf16_chunked_state", 0xd257d7d4e93586aaull},
    {"mamba3_bf16_decode", 0xd7ab45f2fac80afeull},
    {"mamba3_bf16_prefill", 0xc1ad872a0ef2fec4ull},
    {"mamba3_bf16_state", 0x32e1605726ab3d85ull},
    {"matmul_bf16", 0xebd0c529d2035953ull},
    {"matmul_f16", 0xeabbefcefdd6636aull},
    {"matmul_f32", 0xa2e1b461eb46cfd7ull},
    {"matmul_q4_0", 0xe80b1e177730be1bull},
    {"matmul_q4_k", 0xf3ad96eeb27c1448ull},
    {"matmul_q6_k", 0x650a9fb69f0622d8ull},
    {"matmul_q8_0", 0x8a25906f01a74586ull},
    {"norms", 0x68ab757dda3c001aull},
};

uint64_t fnv1a(const std::vector<float>& values, uint64_t hash = 0xcbf29ce484222325ull) {
  const auto* bytes = reinterpret_cast<const unsigned char*>(values.data());
  for (size_t i = 0; i < values.size() * sizeof(float); ++i) {
    hash ^= bytes[i];
    hash *= 0x100000001b3ull;
  }
  return hash;
}

// Output rows of 1 (the decode path) and 5 rows, with the bias and softplus epilogue on f32,
// accumulation on bf16, and a bias on f16; 70 outputs leave a partial panel and partial vectors.
std::vector<float> run_matmuls(const ComputeContext& ctx, DType dtype) {
  const int64_t n = 70, k = 33;
  const auto w = random_floats(n * k, 1);
  const auto bias = random_floats(n, 2);
  const std::vector<uint8_t> packed = pack_weights(w.data(), DType::F32, n, k, dtype);
  std::vector<float> all;
  for (int64_t m : {1, 5}) {
    const auto x = random_floats(m * k, 3 + m);
    std::vector<float> y = random_floats(m * n, 4);
    MatmulArgs args;
    args.x = x.data();
    args.ldx = k;
    args.m = m;
    args.w = {packed.data(), dtype, n, k};
    args.bias = dtype == DType::BF16 ? nullptr : bias.data();
    args.y = y.data();
    args.ldy = n;
    args.accumulate = dtype == DType::BF16;
    args.softplus = dtype == DType::F32;
    matmul(ctx, args);
    all.insert(all.end(), y.begin(), y.end());
  }
  return all;
}

// Quantized weights (the rows quantized by quantize_row): 1 and 5 rows, K = 256 (whole blocks of
// every format), 70 outputs (a partial panel), bias and softplus on 5 rows, accumulation on 1.
std::vector<float> run_quant_matmuls(const ComputeContext& ctx, DType dtype) {
  const int64_t n = 70, k = 256;
  const auto w = random_floats(n * k, 11);
  const auto bias = random_floats(n, 12);
  const std::vector<uint8_t> packed = pack_weights(w.data(), DType::F32, n, k, dtype);
  std::vector<float> all;
  for (int64_t m : {1, 5}) {
    const auto x = random_floats(m * k, 13 + m, 3.0f);
    std::vector<float> y = random_floats(m * n, 14);
    MatmulArgs args{x.data(), k, m, {packed.data(), dtype, n, k}, m == 5 ? bias.data() : nullptr,
                    y.data(), n};
    args.accumulate = m == 1;
    args.softplus = m == 5;
    matmul(ctx, args);
    all.insert(all.end(), y.begin(), y.end());
  }
  return all;
}

// exp, SiLU and softplus over a sweep of [-100, 100] and the edges of their ranges: the clamps of
// exp, the subnormal results below exp(-87.3) (scale_pow2's rounding into the subnormals), the
// softplus threshold, tiny and subnormal inputs and the infinities.
std::vector<float> run_elementwise(Isa isa) {
  std::vector<float> inputs = {-INFINITY, -88.7f,  -88.0f,   -87.5f, -87.3f, -87.0f, -86.5f, -20.0f,
                               -1e-8f,    -1e-30f, -1e-40f,  -0.0f,  0.0f,   1e-40f, 1e-30f, 1e-8f,
                               19.9999f,  20.0f,   20.0001f, 88.0f,  88.3f,  88.7f,  1e30f,  INFINITY};
  for (float x = -100.0f; x < 100.0f; x += 0.0731f) inputs.push_back(x);
  const cpu::KernelTable& table = cpu::kernels_for(isa);
  std::vector<float> out;
  for (float x : inputs) {
    out.push_back(table.exp1(x));
    out.push_back(table.silu1(x));
    out.push_back(table.softplus1(x));
  }
  return out;
}

std::vector<float> run_norms(const ComputeContext& ctx) {
  const int64_t rows = 3, dim = 48;
  const auto x = random_floats(rows * dim, 5, 3.0f);
  const auto z = random_floats(rows * dim, 6, 4.0f);
  const auto weight = random_floats(dim, 7);
  std::vector<float> out(rows * dim * 3);
  RmsNormArgs norm{x.data(), dim, rows, dim - 11, weight.data(), 1e-5f, out.data(), dim};
  rms_norm(ctx, norm);
  for (const float* w : {weight.data(), static_cast<const float*>(nullptr)}) {
    float* y = out.data() + rows * dim * (w == nullptr ? 2 : 1);
    GatedRmsNormArgs gated{x.data(), dim, z.data(), dim, rows, dim, 16, w, 1e-5f, y, dim};
    gated_rms_norm(ctx, gated);
  }
  return out;
}

// A causal conv (with bias, carrying a history) feeding a gated selective scan, 37 channels so
// the vectors are partial, 9 positions; the outputs, the conv history and the scan state.
std::vector<float> run_conv_and_scan(const ComputeContext& ctx) {
  const int64_t channels = 37, length = 9, d_state = 16;
  const int kernel = 4;
  const auto x = random_floats(length * channels, 8);
  const auto conv_w = random_floats(kernel * channels, 9);
  const auto conv_b = random_floats(channels, 10);
  std::vector<float> history = random_floats((kernel - 1) * channels, 11);
  std::vector<float> u(length * channels);
  CausalConvArgs conv{x.data(),      channels,      length,         channels, kernel,
                      conv_w.data(), conv_b.data(), history.data(), u.data(), channels};
  causal_conv_silu(ctx, std::span(&conv, 1));

  auto dt = random_floats(length * channels, 12, 0.5f);
  for (float& v : dt) v = std::fabs(v) + 1e-3f;
  const auto bc = random_floats(length * 2 * d_state, 13);
  const auto z = random_floats(length * channels, 14, 2.0f);
  std::vector<float> a_base2(d_state * channels);
  for (int64_t n = 0; n < d_state; ++n)
    for (int64_t c = 0; c < channels; ++c) a_base2[n * channels + c] = -float(n + 1) * (1.0f + 0.01f * c);
  const auto d_skip = random_floats(channels, 15);
  std::vector<float> state = random_floats(d_state * channels, 16);
  std::vector<float> y(length * channels);
  SelectiveScanArgs scan;
  scan.length = length;
  scan.channels = channels;
  scan.d_state = d_state;
  scan.u = u.data();
  scan.ldu = channels;
  scan.dt = dt.data();
  scan.lddt = channels;
  scan.b = bc.data();
  scan.c = bc.data() + d_state;
  scan.ldbc = 2 * d_state;
  scan.z = z.data();
  scan.ldz = channels;
  scan.a_base2 = a_base2.data();
  scan.d_skip = d_skip.data();
  scan.state = state.data();
  scan.y = y.data();
  scan.ldy = channels;
  selective_scan(ctx, std::span(&scan, 1));

  std::vector<float> all = u;
  all.insert(all.end(), history.begin(), history.end());
  all.insert(all.end(), y.begin(), y.end());
  all.insert(all.end(), state.begin(), state.end());
  return all;
}

struct ModelCase {
  std::string name;
  MakeModelOptions options;
};

// One small model per architecture and weight type. The Mamba-3 case has 16 angles (a full
// vector of the angle velocities' tanh) and the Mamba-2 and Mamba-3 ones run the chunked scan
// with chunks shorter than the prompt.
std::vector<ModelCase> model_cases() {
  MakeModelOptions mamba1;
  mamba1.config = test::small_config(32, 2, 97);
  mamba1.seed = 21;
  MakeModelOptions falcon = mamba1;
  falcon.config.ssm.mixer_rms_norm = true;
  falcon.dtype = DType::BF16;
  falcon.seed = 22;
  MakeModelOptions mamba2;
  mamba2.config = test::mamba2_config(32, 16, 16, 2, 97);
  mamba2.config.ssm.chunk_size = 8;
  mamba2.dtype = DType::F16;
  mamba2.seed = 23;
  MakeModelOptions mamba3;
  mamba3.config = test::mamba3_config(32, 32, 16, 97);
  mamba3.config.ssm.rope_fraction = 1.0;
  mamba3.config.ssm.chunk_size = 8;
  mamba3.dtype = DType::BF16;
  mamba3.seed = 24;
  return {
      {"mamba1_f32", mamba1}, {"falcon_mamba_bf16", falcon}, {"mamba2_f16", mamba2}, {"mamba3_bf16", mamba3}};
}

// The logits of a 13-token prefill (every position), then 4 decode steps, and the final state;
// for Mamba-2 and Mamba-3 also the chunked prefill's logits and state.
void add_model_fingerprints(const ModelCase& c, const std::string& dir, Isa isa, Fingerprints& out) {
  const auto model = Model::load(dir);
  const ComputeContext ctx{2, isa};
  const auto tokens = test::random_tokens(13, c.options.config.vocab_size, 31);
  const auto steps = test::random_tokens(4, c.options.config.vocab_size, 32);
  const bool ssd = c.options.config.arch != Architecture::Mamba1;
  for (ScanForm scan : {ScanForm::Sequential, ScanForm::Chunked}) {
    if (scan == ScanForm::Chunked && !ssd) continue;
    SequenceState state = model->new_state();
    std::vector<float> logits =
        test::prefill(*model, ctx, tokens, state, {OutputKind::LogitsAll, 0, scan, 0});
    const std::string form = scan == ScanForm::Chunked ? "_chunked" : "";
    out[c.name + form + "_prefill"] = fnv1a(logits);
    if (scan == ScanForm::Sequential) {
      out[c.name + "_decode"] = fnv1a(test::step_logits(*model, ctx, steps, state));
    }
    out[c.name + form + "_state"] = fnv1a(state.download());
  }
}

Fingerprints fingerprints(Isa isa) {
  static std::map<std::string, std::string> model_dirs;
  const ComputeContext ctx{2, isa};
  Fingerprints out;
  out["matmul_f32"] = fnv1a(run_matmuls(ctx, DType::F32));
  out["matmul_bf16"] = fnv1a(run_matmuls(ctx, DType::BF16));
  out["matmul_f16"] = fnv1a(run_matmuls(ctx, DType::F16));
  for (DType dtype : {DType::Q8_0, DType::Q4_0, DType::Q4_K, DType::Q6_K})
    out["matmul_" + std::string(dtype_name(dtype))] = fnv1a(run_quant_matmuls(ctx, dtype));
  out["elementwise"] = fnv1a(run_elementwise(isa));
  out["norms"] = fnv1a(run_norms(ctx));
  out["conv_and_scan"] = fnv1a(run_conv_and_scan(ctx));
  for (const ModelCase& c : model_cases()) {
    auto it = model_dirs.find(c.name);
    if (it == model_dirs.end())
      it = model_dirs.emplace(c.name, test::write_model(c.options, "fingerprint")).first;
    add_model_fingerprints(c, it->second, isa, out);
  }
  return out;
}

std::string as_source(const Fingerprints& fingerprints) {
  std::string text;
  for (const auto& [name, hash] : fingerprints) {
    char line[128];
    std::snprintf(line, sizeof line, "    {\"%s\", 0x%016" PRIx64 "ull},\n", name.c_str(), hash);
    text += line;
  }
  return text;
}

TEST(CrossMachineFingerprint, EveryInstructionSetReproducesTheCommittedBits) {
  for (Isa isa : test::supported_isas()) {
    const Fingerprints got = fingerprints(isa);
    EXPECT_EQ(got.size(), kExpected.size()) << isa_name(isa) << ": the table has a missing or extra entry";
    bool all_equal = got.size() == kExpected.size();
    for (const auto& [name, hash] : got) {
      const auto expected = kExpected.find(name);
      const bool equal = expected != kExpected.end() && expected->second == hash;
      EXPECT_TRUE(equal) << isa_name(isa) << ": " << name;
      all_equal = all_equal && equal;
    }
    if (!all_equal) ADD_FAILURE() << isa_name(isa) << " computed:\n" << as_source(got);
  }
}

}  // namespace
}  // namespace mb
