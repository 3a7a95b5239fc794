// The batched ops (causal conv and selective scan over the parts of a round, dt_proj fused into
// the scan) against the CPU kernels with memcmp and against the double references, on the shared
// context and on one without buffer arrays.
#include <algorithm>
#include <cmath>
#include <functional>
#include <memory>
#include <span>

#include "backends/vulkan/vulkan_ops.h"
#include "common/test_util.h"
#include "core/error.h"
#include "io/safetensors.h"
#include "ops/causal_conv.h"
#include "ops/matmul.h"
#include "ops/selective_scan.h"
#include "vulkan/ops_fixture.h"

namespace mb {
namespace {

using test::kScalar;
using test::random_floats;
using test::VulkanOps;
using vulkan::Buffer;

// The batched ops run on the shared context (one dispatch per kMaxGpuParts parts where the
// device indexes buffer arrays) and on a context that pretends it cannot (one dispatch per part,
// the fallback). Both must give the CPU kernels' bits.
vulkan::Context& fallback_context(const vulkan::Context& shared) {
  static std::unique_ptr<vulkan::Context> context = [&] {
    vulkan::ContextOptions options;
    options.device_index = shared.info().index;
    options.validation = shared.validation_enabled();
    options.buffer_arrays = false;
    return std::make_unique<vulkan::Context>(options);
  }();
  return *context;
}

// Rounds of parts with different lengths (1 included), numbered so that a part's rows need not
// follow the previous part's: the rows of part i start at first_rows()[i].
struct PartLayout {
  std::vector<int64_t> lengths;
  std::vector<int64_t> first_rows;
  int64_t total_rows = 0;
};

PartLayout layout_of(const std::vector<int64_t>& lengths) {
  // Parts are laid out in reverse order with one unused row between them.
  PartLayout layout{lengths, std::vector<int64_t>(lengths.size()), 0};
  for (size_t i = lengths.size(); i-- > 0;) {
    layout.first_rows[i] = layout.total_rows + 1;
    layout.total_rows += lengths[i] + 1;
  }
  return layout;
}

std::vector<std::vector<int64_t>> part_length_cases() {
  std::vector<int64_t> many;  // more parts than one dispatch takes
  for (int i = 0; i < vulkan::kMaxGpuParts + 3; ++i) many.push_back(1 + i % 3);
  return {{1}, {5, 1, 17}, many};
}

class VulkanBatchedOps : public VulkanOps {
 protected:
  void TearDown() override {
    for (const std::string& error : fallback_context(ctx()).validation_errors())
      ADD_FAILURE() << "Vulkan validation error (fallback context): " << error;
    fallback_context(ctx()).clear_validation_errors();
    VulkanOps::TearDown();
  }
  // Records and runs `record` on `context`; returns the number of dispatches.
  uint32_t run_on(vulkan::Context& context, const std::function<void(vulkan::CommandSequence&)>& record) {
    vulkan::CommandSequence sequence(context, 64);
    sequence.begin();
    record(sequence);
    sequence.end();
    sequence.run();
    return sequence.dispatch_count();
  }
  // Dispatches a batched op over `parts` parts should take on `context`.
  uint32_t expected_dispatches(vulkan::Context& context, size_t parts) {
    const size_t per = context.buffer_arrays() ? vulkan::kMaxGpuParts : 1;
    return static_cast<uint32_t>((parts + per - 1) / per);
  }
};

TEST_F(VulkanBatchedOps, CausalConvOverPartsEqualsCpuAndCarriesHistoryAcrossPieces) {
  for (vulkan::Context* context : {&ctx(), &fallback_context(ctx())}) {
    for (const std::vector<int64_t>& lengths : part_length_cases()) {
      for (int64_t channels : {1, 37, 130}) {
        for (int kernel : {1, 4}) {
          if (lengths.size() > 3 && (channels != 37 || kernel != 4)) continue;  // one shape suffices
          const PartLayout layout = layout_of(lengths);
          const size_t parts = lengths.size();
          const std::string what = std::string(context == &ctx() ? "" : "fallback ") + std::to_string(parts) +
                                   " parts C=" + std::to_string(channels) + " K=" + std::to_string(kernel);
          const bool has_bias = channels != 37;
          const int64_t ldx = 2 * channels, rows = layout.total_rows;  // the x half of Mamba-1's xz rows
          const auto x = random_floats(rows * ldx, 7), w = random_floats(kernel * channels, 8),
                     bias = random_floats(channels, 9);
          // Each part's history sits at an offset of its state buffer, as in a layer's state.
          const int64_t history_at = 3, history_floats = (kernel - 1) * channels;
          std::vector<std::vector<float>> states0, cpu_states, reference_states;
          std::vector<float> cpu(rows * channels, 0.0f), reference(rows * channels, 0.0f);
          std::vector<CausalConvArgs> args;
          for (size_t p = 0; p < parts; ++p) {
            states0.push_back(random_floats(history_at + history_floats, 10 + p));
            cpu_states.push_back(states0.back());
            reference_states.push_back(states0.back());
          }
          for (size_t p = 0; p < parts; ++p) {
            const int64_t r = layout.first_rows[p];
            args.push_back({x.data() + r * ldx, ldx, lengths[p], channels, kernel, w.data(),
                            has_bias ? bias.data() : nullptr, cpu_states[p].data() + history_at,
                            cpu.data() + r * channels, channels});
            CausalConvArgs ref = args.back();
            ref.history = reference_states[p].data() + history_at;
            ref.y = reference.data() + r * channels;
            causal_conv_silu_reference(ref);
          }
          causal_conv_silu(kScalar, args);

          Buffer x_buffer = Buffer::from_floats(*context, x), w_buffer = Buffer::from_floats(*context, w),
                 bias_buffer = Buffer::from_floats(*context, bias);
          // Whole parts in one round, then the same positions two per round.
          for (int64_t piece : {int64_t{1} << 20, int64_t{2}}) {
            Buffer y_buffer = Buffer::from_floats(*context, std::vector<float>(rows * channels, 0.0f));
            std::vector<Buffer> states;
            for (size_t p = 0; p < parts; ++p) states.push_back(Buffer::from_floats(*context, states0[p]));
            uint32_t dispatches = 0, rounds = 0;
            dispatches = run_on(*context, [&](vulkan::CommandSequence& s) {
              for (int64_t t0 = 0;; t0 += piece) {
                std::vector<vulkan::GpuPart> round;
                for (size_t p = 0; p < parts; ++p)
                  if (t0 < lengths[p])
                    round.push_back(
                        {&states[p], layout.first_rows[p] + t0, std::min(piece, lengths[p] - t0)});
                if (round.empty()) break;
                vulkan::GpuCausalConvArgs g;
                g.x = &x_buffer;
                g.ldx = ldx;
                g.channels = channels;
                g.kernel_size = kernel;
                g.weight = &w_buffer;
                g.bias = has_bias ? &bias_buffer : nullptr;
                g.history_offset = history_at;
                g.y = &y_buffer;
                g.ldy = channels;
                g.parts = round;
                vulkan::record_causal_conv_silu(s, g);
                rounds += expected_dispatches(*context, round.size());
              }
            });
            EXPECT_EQ(dispatches, rounds) << what;
            const std::string where = what + (piece == 2 ? " in pieces of 2" : " whole");
            expect_matches(y_buffer.to_floats(), cpu, reference, where);
            for (size_t p = 0; p < parts; ++p)  // copies of inputs: exact
              EXPECT_TRUE(test::same_bits(states[p].to_floats(), cpu_states[p])) << where << " part " << p;
          }
        }
      }
    }
  }
}

struct ScanData {
  std::vector<float> u, dt, bc, z, a_base2, d_skip;
};

ScanData make_scan_data(int64_t rows, int64_t channels, int64_t d_state) {
  ScanData d;
  d.u = random_floats(rows * channels, 11);
  d.dt = random_floats(rows * channels, 12, 0.5f);
  for (float& v : d.dt) v = std::fabs(v) + 1e-3f;
  d.bc = random_floats(rows * 2 * d_state, 13);
  d.z = random_floats(rows * channels, 14, 2.0f);
  d.a_base2.resize(d_state * channels);
  for (int64_t n = 0; n < d_state; ++n)
    for (int64_t c = 0; c < channels; ++c) d.a_base2[n * channels + c] = -float(n + 1) * (1.0f + 0.01f * c);
  d.d_skip = random_floats(channels, 15);
  return d;
}

TEST_F(VulkanBatchedOps, SelectiveScanOverPartsEqualsCpuOverStateSizes) {
  for (vulkan::Context* context : {&ctx(), &fallback_context(ctx())}) {
    for (const std::vector<int64_t>& lengths : part_length_cases()) {
      for (int64_t d_state : {1, 16, 64}) {
        for (int64_t channels : {1, 37}) {
          if (lengths.size() > 3 && (d_state != 16 || channels != 37)) continue;  // one shape suffices
          const PartLayout layout = layout_of(lengths);
          const size_t parts = lengths.size();
          const int64_t rows = layout.total_rows;
          const bool gate = channels != 1;
          const std::string what = std::string(context == &ctx() ? "" : "fallback ") + std::to_string(parts) +
                                   " parts N=" + std::to_string(d_state) + " D=" + std::to_string(channels) +
                                   (gate ? " gate" : "");
          const ScanData d = make_scan_data(rows, channels, d_state);
          const int64_t state_at = 5, state_floats = d_state * channels;
          std::vector<std::vector<float>> states0, cpu_states, reference_states;
          for (size_t p = 0; p < parts; ++p) {
            states0.push_back(random_floats(state_at + state_floats, 16 + p));
            cpu_states.push_back(states0.back());
            reference_states.push_back(states0.back());
          }
          std::vector<float> cpu(rows * channels, 0.0f), reference(rows * channels, 0.0f);
          std::vector<SelectiveScanArgs> args;
          for (size_t p = 0; p < parts; ++p) {
            const int64_t r = layout.first_rows[p];
            SelectiveScanArgs a;
            a.length = lengths[p];
            a.channels = channels;
            a.d_state = d_state;
            a.u = d.u.data() + r * channels;
            a.ldu = channels;
            a.dt = d.dt.data() + r * channels;
            a.lddt = channels;
            a.b = d.bc.data() + r * 2 * d_state;
            a.c = d.bc.data() + r * 2 * d_state + d_state;
            a.ldbc = 2 * d_state;
            a.z = gate ? d.z.data() + r * channels : nullptr;
            a.ldz = channels;
            a.a_base2 = d.a_base2.data();
            a.d_skip = d.d_skip.data();
            a.state = reference_states[p].data() + state_at;
            a.y = reference.data() + r * channels;
            a.ldy = channels;
            selective_scan_reference(a);
            a.state = cpu_states[p].data() + state_at;
            a.y = cpu.data() + r * channels;
            args.push_back(a);
          }
          selective_scan(kScalar, args);

          Buffer u = Buffer::from_floats(*context, d.u), dt = Buffer::from_floats(*context, d.dt),
                 bc = Buffer::from_floats(*context, d.bc), z = Buffer::from_floats(*context, d.z),
                 a_base2 = Buffer::from_floats(*context, d.a_base2),
                 d_skip = Buffer::from_floats(*context, d.d_skip),
                 y = Buffer::from_floats(*context, std::vector<float>(rows * channels, 0.0f));
          std::vector<Buffer> states;
          std::vector<vulkan::GpuPart> gpu_parts;
          for (size_t p = 0; p < parts; ++p) states.push_back(Buffer::from_floats(*context, states0[p]));
          for (size_t p = 0; p < parts; ++p)
            gpu_parts.push_back({&states[p], layout.first_rows[p], lengths[p]});
          vulkan::GpuSelectiveScanArgs g;
          g.channels = channels;
          g.d_state = d_state;
          g.u = &u;
          g.ldu = channels;
          g.dt = &dt;
          g.lddt = channels;
          g.bc = &bc;
          g.b_offset = 0;
          g.c_offset = d_state;
          g.ldbc = 2 * d_state;
          g.z = gate ? &z : nullptr;
          g.ldz = channels;
          g.a_base2 = &a_base2;
          g.d_skip = &d_skip;
          g.state_offset = state_at;
          g.y = &y;
          g.ldy = channels;
          g.parts = gpu_parts;
          const uint32_t dispatches =
              run_on(*context, [&](vulkan::CommandSequence& s) { vulkan::record_selective_scan(s, g); });
          EXPECT_EQ(dispatches, expected_dispatches(*context, parts)) << what;
          expect_matches(y.to_floats(), cpu, reference, what);
          for (size_t p = 0; p < parts; ++p)
            expect_matches(states[p].to_floats(), cpu_states[p], reference_states[p],
                           what + " state of part " + std::to_string(p));
        }
      }
    }
  }
}

TEST_F(VulkanBatchedOps, SelectiveScanWithFusedDtProjEqualsCpuDtProjThenScan) {
  // The scan computing dt itself (GpuSelectiveScanFusedDt) against the CPU's dt_proj (matmul
  // with bias and softplus) followed by its scan, and against the GPU's own matmul followed by
  // the plain scan. dt_low, B and C share one buffer at an offset, rows wider than their columns,
  // as in x_proj's output; 70 channels span two weight panels.
  const std::vector<int64_t> lengths = {1, 5, 17};
  const PartLayout layout = layout_of(lengths);
  const int64_t rows = layout.total_rows, state_at = 5;
  for (vulkan::Context* context : {&ctx(), &fallback_context(ctx())}) {
    for (DType dtype : {DType::F32, DType::BF16, DType::F16}) {
      for (int64_t rank : {1, 3, 16, 48}) {
        for (int64_t d_state : {1, 16}) {
          if (context != &ctx() && (rank != 16 || d_state != 16)) continue;  // one shape suffices
          const int64_t channels = rank == 16 ? 70 : 37;
          const int64_t low_at = 2, ldbc = rank + 2 * d_state + 3;
          const std::string what = std::string(context == &ctx() ? "" : "fallback ") +
                                   std::string(dtype_name(dtype)) + " R=" + std::to_string(rank) +
                                   " N=" + std::to_string(d_state) + " D=" + std::to_string(channels);
          ScanData d = make_scan_data(rows, channels, d_state);
          d.bc = random_floats(low_at + rows * ldbc, 13);  // [rows, ldbc]: dt_low, B, C, padding
          const auto encoded = encode_f32(random_floats(channels * rank, 17, 0.5f), dtype);
          const std::vector<uint8_t> packed = pack_weights(encoded.data(), dtype, channels, rank, dtype);
          const auto dt_bias = random_floats(channels, 18);

          // The CPU: dt_proj [rows, R] -> [rows, D] with softplus, then the scan over the parts.
          std::vector<float> dt(rows * channels), dt_reference(rows * channels);
          MatmulArgs product{d.bc.data() + low_at,
                             ldbc,
                             rows,
                             {packed.data(), dtype, channels, rank},
                             dt_bias.data(),
                             dt.data(),
                             channels,
                             false,
                             true};
          matmul(kScalar, product);
          product.y = dt_reference.data();
          matmul_reference(product);
          std::vector<std::vector<float>> states0, cpu_states, reference_states;
          std::vector<float> cpu(rows * channels, 0.0f), reference(rows * channels, 0.0f);
          std::vector<SelectiveScanArgs> args;
          for (size_t p = 0; p < lengths.size(); ++p) {
            states0.push_back(random_floats(state_at + d_state * channels, 16 + p));
            cpu_states.push_back(states0.back());
            reference_states.push_back(states0.back());
          }
          for (size_t p = 0; p < lengths.size(); ++p) {
            const int64_t r = layout.first_rows[p];
            const float* b = d.bc.data() + low_at + r * ldbc + rank;
            SelectiveScanArgs a{lengths[p],
                                channels,
                                d_state,
                                d.u.data() + r * channels,
                                channels,
                                dt_reference.data() + r * channels,
                                channels,
                                b,
                                b + d_state,
                                ldbc,
                                d.z.data() + r * channels,
                                channels,
                                d.a_base2.data(),
                                d.d_skip.data(),
                                reference_states[p].data() + state_at,
                                reference.data() + r * channels,
                                channels};
            selective_scan_reference(a);
            a.dt = dt.data() + r * channels;
            a.state = cpu_states[p].data() + state_at;
            a.y = cpu.data() + r * channels;
            args.push_back(a);
          }
          selective_scan(kScalar, args);

          Buffer u = Buffer::from_floats(*context, d.u), bc = Buffer::from_floats(*context, d.bc),
                 z = Buffer::from_floats(*context, d.z), a_base2 = Buffer::from_floats(*context, d.a_base2),
                 d_skip = Buffer::from_floats(*context, d.d_skip),
                 bias = Buffer::from_floats(*context, dt_bias),
                 dt_gpu(*context, rows * channels * sizeof(float)), w(*context, packed.size());
          w.upload(packed.data(), packed.size());
          // Fused, then unfused (the GPU's dt_proj GEMM into dt_gpu, then the plain scan).
          std::vector<std::vector<float>> outputs;
          std::vector<std::vector<std::vector<float>>> final_states;
          for (bool fused : {true, false}) {
            Buffer y = Buffer::from_floats(*context, std::vector<float>(rows * channels, 0.0f));
            std::vector<Buffer> states;
            std::vector<vulkan::GpuPart> gpu_parts;
            for (size_t p = 0; p < lengths.size(); ++p)
              states.push_back(Buffer::from_floats(*context, states0[p]));
            for (size_t p = 0; p < lengths.size(); ++p)
              gpu_parts.push_back({&states[p], layout.first_rows[p], lengths[p]});
            vulkan::GpuSelectiveScanArgs g;
            g.channels = channels;
            g.d_state = d_state;
            g.u = &u;
            g.ldu = channels;
            g.bc = &bc;
            g.b_offset = low_at + rank;
            g.c_offset = low_at + rank + d_state;
            g.ldbc = ldbc;
            g.z = &z;
            g.ldz = channels;
            g.a_base2 = &a_base2;
            g.d_skip = &d_skip;
            g.state_offset = state_at;
            g.y = &y;
            g.ldy = channels;
            g.parts = gpu_parts;
            if (fused) {
              g.fused_dt = vulkan::GpuSelectiveScanFusedDt{&w, 0, dtype, rank, &bias, 0, low_at};
            } else {
              g.dt = &dt_gpu;
              g.lddt = channels;
            }
            const uint32_t dispatches = run_on(*context, [&](vulkan::CommandSequence& s) {
              if (!fused)
                vulkan::record_matmul(s, {&bc, low_at, ldbc, rows, &w, 0, dtype, channels, rank, &bias, 0,
                                          &dt_gpu, 0, channels, false, true});
              vulkan::record_selective_scan(s, g);
            });
            EXPECT_EQ(dispatches, expected_dispatches(*context, lengths.size()) + (fused ? 0 : 1)) << what;
            outputs.push_back(y.to_floats());
            final_states.emplace_back();
            for (const Buffer& state : states) final_states.back().push_back(state.to_floats());
          }
          expect_matches(outputs[0], cpu, reference, what);
          EXPECT_TRUE(test::same_bits(outputs[0], outputs[1])) << what << ": fused != unfused";
          for (size_t p = 0; p < lengths.size(); ++p) {
            const std::string part = what + " state of part " + std::to_string(p);
            expect_matches(final_states[0][p], cpu_states[p], reference_states[p], part);
            EXPECT_TRUE(test::same_bits(final_states[0][p], final_states[1][p]))
                << part << ": fused != unfused";
          }
        }
      }
    }
  }
}

TEST_F(VulkanBatchedOps, FusedDtProjOutsideItsBuffersIsRefused) {
  Buffer rows(ctx(), 256 * sizeof(float)), state(ctx(), 64 * sizeof(float)), small(ctx(), 8 * sizeof(float));
  const vulkan::GpuPart parts[] = {{&state, 0, 2}};
  const vulkan::GpuSelectiveScanFusedDt fused{&rows, 0, DType::F32, 2, &rows, 0, 0};
  vulkan::GpuSelectiveScanArgs g;
  g.channels = 4;
  g.d_state = 2;
  g.u = g.bc = g.a_base2 = g.d_skip = g.y = &rows;
  g.ldu = g.ldbc = g.ldy = 8;
  g.parts = parts;
  vulkan::CommandSequence sequence(ctx(), 4);
  sequence.begin();
  const auto refused = [&](const vulkan::GpuSelectiveScanFusedDt& f, const std::string& name) {
    g.fused_dt = f;
    try {
      vulkan::record_selective_scan(sequence, g);
      ADD_FAILURE() << name << " was accepted";
    } catch (const Error& error) {
      EXPECT_NE(std::string(error.what()).find(name), std::string::npos) << error.what();
    }
  };
  vulkan::GpuSelectiveScanFusedDt f = fused;
  f.weight = &small;  // one 64-row panel of 2 columns needs 128 floats
  refused(f, "dt_proj weights");
  f = fused;
  f.bias = nullptr;
  refused(f, "dt_proj bias");
  f = fused;
  f.dt_low_offset = 250;
  refused(f, "dt_low");
  f = fused;
  f.rank = 0;
  refused(f, "rank");
  EXPECT_EQ(sequence.dispatch_count(), 0u);
  g.fused_dt = fused;
  vulkan::record_selective_scan(sequence, g);
  EXPECT_EQ(sequence.dispatch_count(), 1u);
  sequence.end();
}

TEST_F(VulkanBatchedOps, PartsSharingAStateAreRefused) {
  Buffer state(ctx(), 64 * sizeof(float)), rows(ctx(), 64 * sizeof(float)), w(ctx(), 64 * sizeof(float));
  const vulkan::GpuPart parts[] = {{&state, 0, 1}, {&state, 1, 1}};
  vulkan::GpuCausalConvArgs g;
  g.x = &rows;
  g.ldx = 4;
  g.channels = 4;
  g.kernel_size = 2;
  g.weight = &w;
  g.y = &rows;
  g.ldy = 4;
  g.parts = parts;
  vulkan::CommandSequence sequence(ctx(), 4);
  sequence.begin();
  EXPECT_THROW(vulkan::record_causal_conv_silu(sequence, g), Error);
  EXPECT_EQ(sequence.dispatch_count(), 0u);
  sequence.end();
}

}  // namespace
}  // namespace mb
