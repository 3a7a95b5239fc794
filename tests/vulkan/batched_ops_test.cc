// SPDX-License-Identifier: MIT
// The structure of the batched ops (causal conv and selective scan over the parts of a round,
// dt_proj fused into the scan): how many dispatches a round takes, and the refusal of arguments
// the device cannot run. Their results, on the device and on a context without buffer arrays,
// are cases of the op registry (backend_ops_test.cc).
#include <algorithm>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "backends/vulkan/vulkan_backend.h"
#include "backends/vulkan/vulkan_ops.h"
#include "core/error.h"
#include "ops/matmul.h"
#include "vulkan/ops_fixture.h"

namespace mb {
namespace {

using test::VulkanOps;
using vulkan::Buffer;

class VulkanBatchedOps : public VulkanOps {};

// The phases of the dispatches of one round of a conv, a scan and a scan with dt_proj over `parts`
// parts of `rows` rows each on a backend (buffer contents do not matter here).
std::vector<PhaseId> round_phases(const vulkan::VulkanBackend& backend, size_t parts, int64_t rows) {
  const int64_t C = 8, N = 4, R = 2, K = 4, total = static_cast<int64_t>(parts) * rows;
  std::unique_ptr<Stream> stream = backend.new_stream();
  const View x = stream->buffer(0, total, C, Access::Device), y = stream->buffer(1, total, C, Access::Device),
             dt = stream->buffer(2, total, C, Access::Device),
             bc = stream->buffer(3, total, R + 2 * N, Access::Device);
  const std::vector<float> zeros(K * C + N * C, 0.0f);
  const std::unique_ptr<Storage> weights =
      backend.upload_floats(zeros.data(), static_cast<int64_t>(zeros.size()));
  const View w{weights.get(), 0, 0};
  const std::vector<float> dt_weights(C * R, 0.0f);
  const std::vector<uint8_t> packed = pack_weights(dt_weights.data(), DType::F32, C, R, DType::F32);
  const WeightMatrix host{packed.data(), DType::F32, C, R};
  const std::unique_ptr<Storage> matrix = backend.upload_matrix(host);
  std::vector<std::unique_ptr<StateStorage>> states;
  std::vector<Part> round;
  for (size_t p = 0; p < parts; ++p) {
    states.push_back(backend.new_state({(K - 1) * C + N * C, {}}));
    round.push_back({states.back().get(), static_cast<int64_t>(p) * rows, rows, 0});
  }
  const uint64_t key[] = {parts};
  backend.begin_round(*stream, {}, key);
  backend.causal_conv(*stream, {x, C, K, w, {}, 0, y, round, 1});
  SelectiveScanOp scan;
  scan.channels = C;
  scan.d_state = N;
  scan.u = x;
  scan.dt = dt;
  scan.b = bc.column(R);
  scan.c = bc.column(R + N);
  scan.a_base2 = w;
  scan.d_skip = w;
  scan.state_offset = (K - 1) * C;
  scan.y = y;
  scan.parts = round;
  scan.phase = 2;
  backend.selective_scan(*stream, scan);
  const ScanDtProj proj{{matrix.get(), DType::F32, C, R}, w, bc, total, 4};
  scan.dt_proj = &proj;
  scan.phase = 3;
  backend.selective_scan(*stream, scan);
  backend.end_round(*stream);
  return vulkan::VulkanBackend::recorded_phases(*stream);
}

TEST_F(VulkanBatchedOps, DispatchesFollowThePartsAndTheRoundSize) {
  // The conv and the scan take up to kMaxGpuParts parts per dispatch where the device indexes
  // buffer arrays, one part per dispatch where it does not (the fallback); a decode-sized scan
  // (< kMatmulTiledMinRows rows) runs dt_proj itself, a prefill-sized one as a product first.
  for (bool buffer_arrays : {true, false}) {
    vulkan::ContextOptions options;
    options.validation = true;
    options.buffer_arrays = buffer_arrays;
    const vulkan::VulkanBackend backend(options);
    const size_t per_dispatch = backend.context().buffer_arrays() ? vulkan::kMaxGpuParts : 1;
    for (const auto& [parts, rows] :
         std::vector<std::pair<size_t, int64_t>>{{1, 1}, {8, 1}, {1, 9}, {16, 1}, {17, 1}, {40, 1}}) {
      const std::vector<PhaseId> phases = round_phases(backend, parts, rows);
      const auto count = [&](PhaseId phase) { return std::count(phases.begin(), phases.end(), phase); };
      const int64_t dispatches = static_cast<int64_t>((parts + per_dispatch - 1) / per_dispatch);
      const std::string what = std::to_string(parts) + " parts of " + std::to_string(rows) + " rows" +
                               (buffer_arrays ? "" : " without buffer arrays");
      EXPECT_EQ(count(1), dispatches) << what << ": conv";
      EXPECT_EQ(count(2), dispatches) << what << ": scan";
      EXPECT_EQ(count(3), dispatches) << what << ": scan with dt_proj";
      const bool decode = static_cast<int64_t>(parts) * rows < vulkan::kMatmulTiledMinRows;
      EXPECT_EQ(count(4), decode ? 0 : 1) << what << ": dt_proj";
    }
    for (const std::string& error : backend.context().validation_errors())
      ADD_FAILURE() << "Vulkan validation error: " << error;
  }
}

// A backend for the recorder-level tests: the states of their parts are the device's own, made
// by the backend, and the recordings run on its context.
vulkan::VulkanBackend& recorder_backend() {
  static vulkan::VulkanBackend backend = [] {
    vulkan::ContextOptions options;
    options.validation = true;
    return vulkan::VulkanBackend(options);
  }();
  return backend;
}

TEST_F(VulkanBatchedOps, FusedDtProjOutsideItsBuffersIsRefused) {
  vulkan::VulkanBackend& backend = recorder_backend();
  vulkan::Context& context = backend.context();
  Buffer rows(context, 256 * sizeof(float)), small(context, 8 * sizeof(float));
  const std::unique_ptr<StateStorage> state = backend.new_state({64, {}});
  const Part parts[] = {{state.get(), 0, 2, 0}};
  const vulkan::GpuSelectiveScanFusedDt fused{&rows, 0, DType::F32, 2, &rows, 0, 0};
  vulkan::GpuSelectiveScanArgs g;
  g.channels = 4;
  g.d_state = 2;
  g.u = g.bc = g.a_base2 = g.d_skip = g.y = &rows;
  g.ldu = g.ldbc = g.ldy = 8;
  g.parts = parts;
  vulkan::CommandSequence sequence(context, 4);
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
  for (const std::string& error : context.validation_errors())
    ADD_FAILURE() << "Vulkan validation error: " << error;
}

TEST_F(VulkanBatchedOps, PartsSharingAStateOrWithoutADeviceStateAreRefused) {
  vulkan::VulkanBackend& backend = recorder_backend();
  vulkan::Context& context = backend.context();
  Buffer rows(context, 64 * sizeof(float)), w(context, 64 * sizeof(float));
  const std::unique_ptr<StateStorage> state = backend.new_state({64, {}});
  HostState host({64, {}});
  vulkan::GpuCausalConvArgs g;
  g.x = &rows;
  g.ldx = 4;
  g.channels = 4;
  g.kernel_size = 2;
  g.weight = &w;
  g.y = &rows;
  g.ldy = 4;
  vulkan::CommandSequence sequence(context, 4);
  sequence.begin();
  const Part shared[] = {{state.get(), 0, 1, 0}, {state.get(), 1, 1, 0}};
  g.parts = shared;
  EXPECT_THROW(vulkan::record_causal_conv_silu(sequence, g), Error);
  // A host state (or none) has no device buffer to bind.
  const Part on_host[] = {{&host, 0, 1, 0}};
  g.parts = on_host;
  EXPECT_THROW(vulkan::record_causal_conv_silu(sequence, g), Error);
  const Part missing[] = {{nullptr, 0, 1, 0}};
  g.parts = missing;
  EXPECT_THROW(vulkan::record_causal_conv_silu(sequence, g), Error);
  EXPECT_EQ(sequence.dispatch_count(), 0u);
  sequence.end();
}

}  // namespace
}  // namespace mb
