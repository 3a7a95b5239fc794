// Mamba-1 (and FalconMamba) on a Vulkan device: the DeviceExecutor that Model::forward hands a
// batch to when the model was loaded with a Vulkan DeviceSpec.
//
// The round structure is the CPU's (model.cc): each round takes up to `chunk` positions of every
// sequence, its rows are the rows of the same GEMMs, and the conv and the scan run each sequence
// (a part: its rows of the round and its own state) on that sequence's state. Every op is the
// GPU twin of the CPU kernel the CPU path calls, with the same arguments, so on a device with an
// exact fma the outputs and states equal the CPU's bits.
//
// Dispatches: a layer records in_proj (with the layer's rms_norm fused), causal_conv, x_proj,
// (FalconMamba: one segmented rms_norm for dt_low, B and C), selective_scan (with dt_proj and
// its softplus fused in decode-sized rounds) and out_proj (+residual): five dispatches (six for
// FalconMamba), one per weight piece for the GEMMs, whatever the number of sequences. A prefill
// round (from kMatmulTiledMinRows rows) and a dt_proj cut into pieces (only when a test forces
// tiny pieces) keep dt_proj's own GEMM dispatches before the scan. The conv
// and the scan reach up to kMaxGpuParts (16) sequences' state buffers through a descriptor
// array, so only every further 16 sequences add a conv and a scan dispatch. A device without
// shaderStorageBufferArrayDynamicIndexing takes one conv and one scan dispatch per sequence.
//
// Memory: weights are uploaded once (the packed panels the CPU matmul reads, in their dtype);
// each sequence's state lives in its own device buffer (VulkanSequenceState) between calls, so
// states may outlive the model and be freed in any order; activations live in a
// VulkanWorkspace sized by the largest round, so device scratch is bounded by the chunk. Inputs
// (embedding rows, features) and outputs go through host-visible buffers.
//
// Decode: a round is recorded into one command buffer; the next round with the same shape (the
// same states at the same rows, the same output) replays it, so a steady decode loop records
// once and then only writes its embedding rows, submits and reads its logits. The recording
// names states by id in its key, and its staged parts table (rows of each sequence) is part of
// the recording, so a replay sees the same table.
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "backends/vulkan/vulkan_buffer.h"
#include "backends/vulkan/vulkan_commands.h"
#include "backends/vulkan/vulkan_context.h"
#include "model/device.h"
#include "model/mamba1.h"

namespace mb {

class VulkanMamba1 final : public DeviceExecutor {
 public:
  // `max_piece_bytes` (0 = the device's binding limit) caps the pieces weight matrices are cut
  // into; tests lower it to cut small matrices.
  VulkanMamba1(const Mamba1Model& model, const vulkan::ContextOptions& options, uint64_t max_piece_bytes = 0);
  ~VulkanMamba1() override;

  std::string description() const override;
  void forward(std::span<const SequenceInput> batch, std::span<const int64_t> totals,
               const ForwardOptions& options, Workspace& workspace,
               std::vector<std::vector<float>>& outputs) const override;
  std::vector<DevicePhaseTime> last_timings(const Workspace& workspace) const override;

  // The device context, for tests that read the validation layer's reports.
  vulkan::Context& context() const { return shared_->context; }
  // Recordings made through `workspace` so far (a steady decode loop adds none after its first step).
  int64_t recordings(const Workspace& workspace) const;
  // The phase ("norm", "in_proj", "conv", "scan", ...) of each dispatch of the workspace's
  // current recording, in order: tests count dispatches per phase with it.
  std::vector<std::string> recorded_phases(const Workspace& workspace) const;

 private:
  // The context and the lock of its one queue, shared with every state and workspace made
  // here, so that those may outlive the model and still be read or freed.
  struct Shared {
    explicit Shared(const vulkan::ContextOptions& options) : context(options) {}
    vulkan::Context context;
    std::mutex mutex;
    uint64_t states_made = 0;  // guarded by mutex
  };
  struct Layer;
  struct Round;
  class State;
  class Scratch;
  friend class State;

  using BufferPtr = std::unique_ptr<vulkan::Buffer>;
  // A packed weight matrix on the device, in pieces of whole 64-row panels, each no larger than
  // one storage binding may span (lavapipe allows 128 MiB; an f32 130m LM head is 154 MB).
  struct DeviceMatrix {
    struct Piece {
      BufferPtr buffer;
      int64_t first_row = 0, rows = 0;
    };
    std::vector<Piece> pieces;
    DType dtype = DType::F32;
    int64_t cols = 0;
  };
  BufferPtr upload_floats(const float* values, int64_t count) const;
  DeviceMatrix upload_matrix(const WeightMatrix& matrix) const;
  // Whether the layer's selective scan runs its dt_proj in a round of m rows.
  static bool fused_dt_proj(const Layer& layer, int64_t m);
  // y[:, rows] (+)= x W^T (+ bias) over every piece of W: one matmul dispatch per piece, writing
  // the piece's columns of y. Offsets are in floats. With `norm`, x's rows are RMS-normalized
  // (weight norm, eps norm_eps) inside each dispatch, as rms_norm followed by the product.
  static void record_product(vulkan::CommandSequence& seq, const DeviceMatrix& w, const vulkan::Buffer* x,
                             int64_t x_offset, int64_t ldx, int64_t m, const vulkan::Buffer* bias,
                             const vulkan::Buffer* y, int64_t y_offset, int64_t ldy, bool accumulate,
                             bool softplus, const vulkan::Buffer* norm = nullptr, float norm_eps = 0.0f);
  Scratch& scratch_of(Workspace& workspace) const;
  // The device copy of a sequence's state, made (uploaded) on its first use here.
  State& device_state(SequenceState& state) const;
  void record_round(Scratch& scratch, const Round& round, const ForwardOptions& options) const;

  const Mamba1Model& model_;
  std::shared_ptr<Shared> shared_;
  uint64_t max_piece_bytes_ = 0;
  std::vector<Layer> layers_;
  DeviceMatrix lm_head_, input_proj_;
  BufferPtr norm_f_, input_proj_bias_, mixer_norm_ones_;
};

}  // namespace mb
