#include "model/model.h"

#include <algorithm>
#include <cstring>
#include <filesystem>

#include "core/error.h"
#include "core/profile.h"
#include "io/safetensors.h"
#include "model/gguf_checkpoint.h"
#include "model/mamba1.h"
#include "model/mamba2.h"
#include "model/mamba3.h"
#include "model/weight_binder.h"
#include "ops/argmax.h"
#include "ops/quant.h"
#include "ops/rms_norm.h"

namespace mb {

std::unique_ptr<Model> Model::load(const std::string& dir, const LoadOptions& options) {
  ModelConfig config;
  std::shared_ptr<const TensorSet> tensors;
  if (is_gguf_file(dir)) {
    GgufCheckpoint checkpoint = open_gguf_checkpoint(dir);
    config = checkpoint.config;
    tensors = std::move(checkpoint.tensors);
  } else {
    std::error_code error;
    if (std::filesystem::is_regular_file(dir, error))
      throw Error("'" + dir + "' is a file but not a GGUF file; give a checkpoint folder or a .gguf file");
    config = load_model_config(dir);
    tensors = std::make_shared<const TensorSet>(TensorSet::open_dir(dir));
  }
  std::unique_ptr<Model> model;
  switch (config.arch) {
    case Architecture::Mamba1:
      model = std::make_unique<Mamba1Model>(config, tensors, options);
      break;
    case Architecture::Mamba2:
      model = std::make_unique<Mamba2Model>(config, tensors, options);
      break;
    case Architecture::Mamba3:
      model = std::make_unique<Mamba3Model>(config, tensors, options);
      break;
  }
  if (!model) throw Error("'" + dir + "': unknown architecture");
  model->set_device(options.device);
  if (options.device.kind != DeviceKind::Cpu && !options.keep_host_weights) {
    model->binder_->release_packed_matrices();
    model->host_matrices_released_ = true;
  }
  return model;
}

namespace {

void require_host_matrices(bool released, const DeviceExecutor* device, const std::string& target) {
  if (!released) return;
  throw Error("the model's weights live only on " +
              (device != nullptr ? device->description() : "its device") +
              " (the host copy was dropped after the upload): load it again to run it on " + target +
              " (LoadOptions::keep_host_weights keeps the host copy)");
}

}  // namespace

void Model::set_device(const DeviceSpec& spec) {
  require_host_matrices(host_matrices_released_, device_.get(), spec.text());
  device_.reset();
  if (spec.kind != DeviceKind::Cpu) device_ = make_device_executor(*this, spec);
}

void Model::set_executor(std::unique_ptr<DeviceExecutor> executor) {
  require_host_matrices(host_matrices_released_, device_.get(),
                        executor != nullptr ? executor->description() : "the CPU");
  device_ = std::move(executor);
}

size_t Model::host_matrix_bytes() const {
  return binder_->resident_packed_bytes();
}

SequenceState::SequenceState(const SequenceState& other) : values(other.values), position(other.position) {
  if (other.device) other.device->download(values);
}

SequenceState& SequenceState::operator=(const SequenceState& other) {
  if (this != &other) {
    values = other.values;
    position = other.position;
    if (other.device) other.device->download(values);
    device.reset();
  }
  return *this;
}

void SequenceState::sync_to_host() {
  if (device) device->download(values);
}

std::vector<float> SequenceState::host_values() const {
  std::vector<float> copy = values;
  if (device) device->download(copy);
  return copy;
}

namespace {

uint64_t fnv1a(uint64_t hash, const void* data, size_t size) {
  const auto* bytes = static_cast<const uint8_t*>(data);
  for (size_t i = 0; i < size; ++i) hash = (hash ^ bytes[i]) * 0x100000001b3ull;
  return hash;
}

// Hashes the architecture's sizes and, for every tensor, its name, shape and up to 4 KiB of
// its stored bytes: cheap, and different for any two checkpoints that differ in practice.
uint64_t checkpoint_fingerprint(const ModelConfig& c, const TensorSet& tensors) {
  uint64_t hash = 0xcbf29ce484222325ull;
  const int64_t sizes[] = {static_cast<int64_t>(c.arch),
                           c.d_model,
                           c.n_layer,
                           c.vocab_size,
                           c.d_state,
                           c.d_conv,
                           c.d_inner,
                           c.dt_rank,
                           c.headdim,
                           c.ngroups,
                           static_cast<int64_t>(c.is_outproj_norm),
                           static_cast<int64_t>(c.gated_norm)};
  const double parameters[] = {c.norm_eps, c.rope_fraction, c.a_floor, c.dt_limit_min, c.dt_limit_max};
  hash = fnv1a(hash, parameters, sizeof parameters);
  hash = fnv1a(hash, sizes, sizeof sizes);
  // Hashed only when present, so plain Mamba-1 checkpoints keep the fingerprints (and state
  // files) they had before FalconMamba existed.
  if (c.mixer_rms_norm) hash = fnv1a(hash, &c.mixer_rms_eps, sizeof c.mixer_rms_eps);
  for (const auto& [name, tensor] : tensors.tensors()) {
    hash = fnv1a(hash, name.data(), name.size());
    hash = fnv1a(hash, tensor.shape.data(), tensor.shape.size() * sizeof(int64_t));
    hash = fnv1a(hash, tensor.data, std::min<size_t>(tensor.byte_size, 4096));
  }
  return hash;
}

}  // namespace

WeightBinder& Model::bind_common(const ModelConfig& config, std::shared_ptr<const TensorSet> tensors,
                                 const LoadOptions& options) {
  config_ = config;
  tensors_ = std::move(tensors);
  binder_ = std::make_shared<WeightBinder>(*tensors_, options.weight_dtype);
  WeightBinder& binder = *binder_;
  check_layer_indices(*tensors_, config.n_layer);
  const std::string first = "backbone.layers.0.mixer.";
  if (config.use_bias_from_checkpoint) config_.use_bias = binder.has(first + "in_proj.bias");
  if (config.use_conv_bias_from_checkpoint) config_.use_conv_bias = binder.has(first + "conv1d.bias");
  const ModelConfig& c = config_;
  fingerprint_ = checkpoint_fingerprint(c, *tensors_);
  const std::string embedding_name =
      binder.first_present({"backbone.embeddings.weight", "backbone.embedding.weight"});
  // With a quantized matrix dtype the embedding is quantized too: lookups dequantize its rows,
  // and a tied LM head packs the same blocks.
  embedding_ =
      &binder.quantized_rows(binder.tensor_rows_in(embedding_name, {c.vocab_rows, c.vocab_size}, c.d_model));
  // Padded vocabulary rows are never produced: the head only holds the real rows.
  if (c.tie_embeddings) {
    lm_head_ = binder.packed_rows(*embedding_, c.vocab_size);
  } else {
    if (!binder.has("lm_head.weight"))
      throw Error("config says the LM head is untied but the checkpoint has no 'lm_head.weight'");
    lm_head_ = binder.packed_rows(
        binder.tensor_rows_in("lm_head.weight", {c.vocab_rows, c.vocab_size}, c.d_model), c.vocab_size);
  }
  norm_f_ = binder.f32("backbone.norm_f.weight", {c.d_model});
  if (binder.has("input_proj.weight")) {
    const StoredTensor* stored = tensors_->find("input_proj.weight");
    const int64_t input_dim = stored->shape.size() == 2 ? stored->shape[1] : 0;
    if (input_dim <= 0)
      throw Error("tensor 'input_proj.weight' must have shape [d_model, input_dim], got " +
                  stored->shape_string());
    input_proj_ = binder.matrix("input_proj.weight", c.d_model, input_dim);
    input_proj_bias_ = binder.f32_if_present("input_proj.bias", {c.d_model});
  }
  return binder;
}

std::vector<std::string> Model::phase_names() const {
  std::vector<std::string> names = {"embed", "norm_f", "lm_head gemm"};
  for (std::string_view name : layer_phase_names()) names.emplace_back(name);
  return names;
}

size_t Model::matrix_bytes() const {
  return binder_->packed_matrix_bytes();
}

int64_t Model::output_width(OutputKind kind) const {
  switch (kind) {
    case OutputKind::None:
      return 0;
    case OutputKind::ArgmaxLast:
      return 1;
    case OutputKind::LogitsLast:
    case OutputKind::LogitsAll:
      return config_.vocab_size;
    default:
      return config_.d_model;
  }
}

void Model::forward(const ComputeContext& ctx, std::span<const SequenceInput> batch,
                    const ForwardOptions& options, Workspace& ws,
                    std::vector<std::vector<float>>& outputs) const {
  validate_batch(ctx, batch, options, ws);
  if (device_) {
    device_->forward(batch, ws.total, options, ws, outputs);
    return;
  }
  // A state a device advanced last holds its values there; the CPU continues from them.
  for (const SequenceInput& in : batch) {
    if (in.state->device) {
      in.state->sync_to_host();
      in.state->device.reset();
    }
  }
  forward_cpu(ctx, batch, options, ws, outputs);
}

void Model::validate_batch(const ComputeContext& ctx, std::span<const SequenceInput> batch,
                           const ForwardOptions& options, Workspace& ws) const {
  const int64_t n_seq = static_cast<int64_t>(batch.size());
  if (options.chunk < 0) throw Error("chunk size must be >= 0");
  if (options.ssd_chunk < 0) throw Error("SSD chunk size must be >= 0");
  check_thread_count(ctx.n_threads);
  // Validate everything before any state changes, so a bad request leaves every sequence intact.
  std::vector<int64_t>& total = ws.total;
  total.assign(n_seq, 0);
  for (int64_t i = 0; i < n_seq; ++i) {
    const SequenceInput& in = batch[i];
    if (in.state == nullptr) throw Error("sequence " + std::to_string(i) + " has no state");
    // The message is only built for a mismatch: a steady decode step allocates nothing.
    if (in.state->values.size() != state_floats())
      state_layout_.check_size(in.state->values.size(), "sequence " + std::to_string(i) + "'s state");
    if (!in.tokens.empty()) {
      for (int32_t id : in.tokens) {
        if (id < 0 || id >= config_.vocab_size)
          throw Error("token id " + std::to_string(id) + " is outside the vocabulary [0, " +
                      std::to_string(config_.vocab_size) + ")");
      }
      total[i] = static_cast<int64_t>(in.tokens.size());
    } else {
      if (input_dim() == 0)
        throw Error("sequence " + std::to_string(i) +
                    " has no tokens (this checkpoint has no input projection for features)");
      if (in.features.empty() || in.features.size() % input_dim() != 0)
        throw Error("sequence " + std::to_string(i) + " has " + std::to_string(in.features.size()) +
                    " feature values, not a positive multiple of input_dim " + std::to_string(input_dim()));
      total[i] = static_cast<int64_t>(in.features.size()) / input_dim();
    }
  }
  // Two sequences advancing one state would both read and write it in the same round (from
  // different threads, in no fixed order), so each state may appear in a batch only once.
  std::vector<const SequenceState*>& sorted = ws.sorted_states;
  sorted.clear();
  for (const SequenceInput& in : batch) sorted.push_back(in.state);
  std::sort(sorted.begin(), sorted.end());
  const auto repeated = std::adjacent_find(sorted.begin(), sorted.end());
  if (repeated != sorted.end()) {
    int64_t first = -1, second = -1;
    for (int64_t i = 0; i < n_seq && second < 0; ++i) {
      if (batch[i].state != *repeated) continue;
      (first < 0 ? first : second) = i;
    }
    throw Error("sequences " + std::to_string(first) + " and " + std::to_string(second) +
                " of the batch share one SequenceState; each state may appear once per forward call");
  }
}

void Model::forward_cpu(const ComputeContext& ctx, std::span<const SequenceInput> batch,
                        const ForwardOptions& options, Workspace& ws,
                        std::vector<std::vector<float>>& outputs) const {
  const int64_t d = config_.d_model;
  const int64_t n_seq = static_cast<int64_t>(batch.size());
  const std::vector<int64_t>& total = ws.total;

  outputs.resize(n_seq);
  for (auto& out : outputs) out.clear();
  ws.consumed.assign(n_seq, 0);
  if (options.output == OutputKind::HiddenMean) ws.pooled.assign(n_seq * d, 0.0);
  std::vector<Rows>& rows = ws.rows;
  std::vector<int64_t>& owner = ws.owner;

  for (;;) {
    rows.clear();
    owner.clear();
    int64_t m = 0;
    for (int64_t i = 0; i < n_seq; ++i) {
      const int64_t left = total[i] - ws.consumed[i];
      if (left == 0) continue;
      const int64_t count = options.chunk > 0 && options.chunk < left ? options.chunk : left;
      rows.push_back({batch[i].state, m, count});
      owner.push_back(i);
      m += count;
    }
    if (rows.empty()) break;

    const size_t per_row = static_cast<size_t>(d) + scratch_floats_per_row();
    const size_t logits_floats =
        options.output == OutputKind::LogitsLast || options.output == OutputKind::ArgmaxLast
            ? rows.size() * config_.vocab_size
            : 0;
    float* base = ws.reserve(m * per_row + logits_floats);
    float* hidden = base;                     // [m, d]
    float* scratch = base + m * d;            // [m, scratch_floats_per_row]
    float* last_logits = base + m * per_row;  // [sequences, vocab]

    // Embed the round's positions.
    {
      ScopedPhase timer(ctx.profile, kEmbedPhase);
      for (size_t r = 0; r < rows.size(); ++r) {
        const SequenceInput& in = batch[owner[r]];
        const int64_t start = ws.consumed[owner[r]];
        if (!in.tokens.empty()) {
          const DType dtype = *embedding_->dtype;
          const size_t row_bytes = dtype_row_bytes(dtype, d);
          for (int64_t t = 0; t < rows[r].count; ++t) {
            const uint8_t* src = embedding_->data + in.tokens[start + t] * row_bytes;
            dequantize_row(dtype, src, d, hidden + (rows[r].begin + t) * d);
          }
        } else {
          MatmulArgs proj;
          proj.x = in.features.data() + start * input_dim();
          proj.ldx = input_dim();
          proj.m = rows[r].count;
          proj.w = input_proj_;
          proj.bias = input_proj_bias_;
          proj.y = hidden + rows[r].begin * d;
          proj.ldy = d;
          matmul(ctx, proj);
        }
      }
    }

    forward_layers(ctx, rows, hidden, m, options, ws, scratch);

    // Outputs. The scratch area is free again and holds the normalized rows.
    float* normed = scratch;
    int64_t finishing = 0;
    {
      ScopedPhase timer(ctx.profile, kFinalNormPhase);  // norm_f, and the LM head of LogitsAll
      for (size_t r = 0; r < rows.size(); ++r) {
        const int64_t i = owner[r];
        const Rows& part = rows[r];
        const bool last_round = ws.consumed[i] + part.count == total[i];
        RmsNormArgs norm{hidden + part.begin * d, d, part.count, d, norm_f_, config_.norm_eps,
                         normed + part.begin * d, d};
        switch (options.output) {
          case OutputKind::None:
            break;
          case OutputKind::LogitsLast:
          case OutputKind::ArgmaxLast:
          case OutputKind::HiddenLast:
            if (!last_round) break;
            norm.x = hidden + (part.begin + part.count - 1) * d;
            norm.rows = 1;
            if (options.output == OutputKind::HiddenLast) {
              outputs[i].resize(d);
              norm.y = outputs[i].data();
              rms_norm(ctx, norm);
            } else {
              norm.y = normed + finishing * d;  // gathered for one LM-head product below
              rms_norm(ctx, norm);
              ++finishing;
            }
            break;
          case OutputKind::HiddenAll: {
            const size_t old = outputs[i].size();
            outputs[i].resize(old + part.count * d);
            norm.y = outputs[i].data() + old;
            rms_norm(ctx, norm);
            break;
          }
          case OutputKind::LogitsAll: {
            rms_norm(ctx, norm);
            const size_t old = outputs[i].size();
            outputs[i].resize(old + part.count * config_.vocab_size);
            MatmulArgs head{
                normed + part.begin * d, d,    part.count, lm_head_, nullptr, outputs[i].data() + old,
                config_.vocab_size,      false};
            matmul(ctx, head);
            break;
          }
          case OutputKind::HiddenMean: {
            rms_norm(ctx, norm);
            double* sum = ws.pooled.data() + i * d;
            for (int64_t t = 0; t < part.count; ++t)
              for (int64_t k = 0; k < d; ++k) sum[k] += normed[(part.begin + t) * d + k];
            if (last_round) {
              outputs[i].resize(d);
              for (int64_t k = 0; k < d; ++k) outputs[i][k] = static_cast<float>(sum[k] / total[i]);
            }
            break;
          }
        }
      }
    }
    if (finishing > 0) {
      ScopedPhase timer(ctx.profile, kLmHeadPhase);
      // One pass over the LM head for every sequence that finished in this round.
      MatmulArgs head{normed, d, finishing, lm_head_, nullptr, last_logits, config_.vocab_size, false};
      matmul(ctx, head);
      int64_t slot = 0;
      for (size_t r = 0; r < rows.size(); ++r) {
        const int64_t i = owner[r];
        if (ws.consumed[i] + rows[r].count != total[i]) continue;
        const float* logits = last_logits + slot * config_.vocab_size;
        if (options.output == OutputKind::ArgmaxLast)
          outputs[i].assign(1, static_cast<float>(greedy_index(logits, config_.vocab_size)));
        else
          outputs[i].assign(logits, logits + config_.vocab_size);
        ++slot;
      }
    }
    for (size_t r = 0; r < rows.size(); ++r) {
      ws.consumed[owner[r]] += rows[r].count;
      rows[r].state->position += rows[r].count;
    }
  }
}

}  // namespace mb
