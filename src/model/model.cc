// SPDX-License-Identifier: MIT
#include "model/model.h"

#include <algorithm>
#include <filesystem>
#include <set>
#include <typeinfo>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "io/safetensors.h"
#include "model/blocks/block.h"
#include "model/blocks/mamba_schema.h"
#include "model/family.h"
#include "model/gguf_checkpoint.h"
#include "model/weight_binder.h"
#include "model/weight_schema.h"

namespace mb {
namespace {

// The model's own weights in Model::weights_: the head of model_tensor_specs, then its tail.
constexpr size_t kNormF = 3 + kFinalNorm, kHead = 3 + kLmHead;

uint64_t fnv1a(uint64_t hash, const void* data, size_t size) {
  const auto* bytes = static_cast<const uint8_t*>(data);
  for (size_t i = 0; i < size; ++i) hash = (hash ^ bytes[i]) * 0x100000001b3ull;
  return hash;
}

// The checkpoint's identity for state, slot and prefix-store files: its family, every declared
// config key that changes the math (hash_family_keys), what the family's config.json holds beside
// its table (hf_extra: a layer list, a dt limit that may be infinite, the position-embedding type),
// the two settings no config.json key holds, and for every tensor its name, shape and up to 4 KiB
// of its stored bytes: cheap, and different for any two checkpoints that differ in practice. A key
// declared tomorrow is hashed without an edit here.
uint64_t checkpoint_fingerprint(const ModelConfig& c, const TensorSet& tensors) {
  const Family* family = find_family(c);
  if (family == nullptr) throw Error("the config belongs to no declared family");
  uint64_t hash = 0xcbf29ce484222325ull;
  hash = fnv1a(hash, family->name.data(), family->name.size() + 1);
  hash = hash_family_keys(*family, c, hash);
  if (!family->model_types.empty()) {
    nlohmann::json beside = family_config_to_hf_json(*family, c);
    for (const ConfigKey& key : family->keys) beside.erase(key.hf);
    const std::string text = beside.dump();  // keys in sorted order
    hash = fnv1a(hash, text.data(), text.size() + 1);
  }
  // The state-spaces form's Mamba-2 without its gated norm (rmsnorm false), and a GGUF file's
  // attention scale (Nemotron-H's attention.scale), which the Hugging Face forms cannot say.
  const double unsaid[] = {c.ssm.gated_norm ? 1.0 : 0.0, c.hybrid.attention.scale, c.ssm.dt_limit_min,
                           c.ssm.dt_limit_max};
  hash = fnv1a(hash, unsaid, sizeof unsaid);
  for (const auto& [name, tensor] : tensors.tensors()) {
    hash = fnv1a(hash, name.data(), name.size());
    hash = fnv1a(hash, tensor.shape.data(), tensor.shape.size() * sizeof(int64_t));
    hash = fnv1a(hash, tensor.data, std::min<size_t>(tensor.byte_size, 4096));
  }
  return hash;
}

// A folder's tensors must all be read, as a GGUF file's must all be known (open_gguf_checkpoint):
// a tensor no block binds is a layer of another kind, a bias the config turns off, or another
// architecture's weight, and running without it would answer as some other model. The exceptions
// are tensors real checkpoints carry that the engine knowingly does without.
void refuse_unread_tensors(const TensorSet& tensors, const std::set<std::string>& read,
                           const ModelConfig& c) {
  for (const auto& [name, tensor] : tensors.tensors()) {
    if (read.count(name) != 0) continue;
    // A tied head is the embedding; some tied checkpoints still store its copy.
    if (c.tie_embeddings && name == "lm_head.weight") continue;
    // Multi-token-prediction layers (Nemotron-3's "mtp.*") serve speculative decoding, which the
    // engine does not do; the model's own layers do not read them.
    if (name.rfind("mtp.", 0) == 0 || name.find(".mtp.") != std::string::npos) continue;
    // Qwen3.5's vision tower: the engine runs the text model alone (images are not supported).
    if (c.family == ModelFamily::Qwen35 && name.rfind("model.visual.", 0) == 0) continue;
    // A rotary cache some exporters save; the engine computes it from rope_theta.
    if (name.ends_with(".rotary_emb.inv_freq")) continue;
    throw Error(
        "checkpoint tensor '" + name + "' " + tensor.shape_string() +
        " is not part of the model its config.json describes (the config does not describe it: a layer of "
        "another kind, a bias the config turns off, or another architecture's weight)");
  }
}

void require_host_matrices(bool released, const Backend* backend, const std::string& target) {
  if (!released) return;
  throw Error("the model's weights live only on " +
              (backend != nullptr ? backend->description() : "its device") +
              " (the host copy was dropped after the upload): load it again to run it on " + target +
              " (LoadOptions::keep_host_weights keeps the host copy)");
}

}  // namespace

Model::Model() = default;
Model::~Model() = default;

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
  std::unique_ptr<Model> model(new Model());
  const bool from_folder = !is_gguf_file(dir);  // a GGUF file's tensors were all matched to specs
  model->bind(config, std::move(tensors), options);
  if (from_folder) refuse_unread_tensors(*model->tensors_, model->binder_->used(), model->config_);
  model->binder_->report_progress_to(nullptr);  // options.progress may not outlive this call
  if (options.progress != nullptr && options.device.kind != DeviceKind::Cpu)
    options.progress->start("uploading to " + options.device.text(), 0, ProgressUnit::Bytes);
  model->set_device(options.device);
  if (options.device.kind != DeviceKind::Cpu && !options.keep_host_weights) {
    model->binder_->release_packed_matrices();
    model->host_matrices_released_ = true;
  }
  return model;
}

void Model::bind(const ModelConfig& config, std::shared_ptr<const TensorSet> tensors,
                 const LoadOptions& options) {
  config_ = config;
  tensors_ = std::move(tensors);
  binder_ = std::make_shared<WeightBinder>(*tensors_, options.weight_dtype);
  WeightBinder& binder = *binder_;
  binder.report_progress_to(options.progress);
  check_layer_indices(*tensors_, config.n_layer);
  // Bias presence a config leaves to the checkpoint is read from the first layer's tensors.
  const BlockSpec first_layer{BlockKind::Mamba1Mixer, 0, {layer_prefix(0)}};
  if (config_.ssm.use_bias_from_checkpoint)
    config_.ssm.use_bias = binder.has(mamba_schema::in_proj_bias(first_layer, 0, true).name);
  if (config_.ssm.use_conv_bias_from_checkpoint)
    config_.ssm.use_conv_bias = binder.has(mamba_schema::conv_bias(first_layer, 0, true).name);
  const ModelConfig& c = config_;
  fingerprint_ = checkpoint_fingerprint(c, *tensors_);

  const std::string input_proj = model_tensor_specs(c, true, 0).head[kInputProj].name;
  if (binder.has(input_proj)) {
    const std::vector<int64_t> shape = binder.shape_of(input_proj);
    input_dim_ = shape.size() == 2 ? shape[1] : 0;
    if (input_dim_ <= 0)
      throw Error("tensor '" + input_proj + "' must have shape [d_model, input_dim], got " +
                  shape_string(shape));
  }
  const ModelTensors specs = model_tensor_specs(c, true, input_dim_);
  weights_.assign(5, Weight{});
  // With a quantized matrix dtype the embedding is quantized too: lookups dequantize its rows,
  // and a tied LM head packs the same blocks.
  const TensorSpec& embedding = specs.head[kEmbedding];
  const std::string embedding_name = binder.first_present({embedding.name, embedding.alt_name});
  embedding_ =
      &binder.quantized_rows(binder.tensor_rows_in(embedding_name, {c.vocab_rows, c.vocab_size}, c.d_model));
  // Padded vocabulary rows are never produced: the head only holds the real rows.
  const TensorSpec& lm_head = specs.tail[kLmHead];
  if (c.tie_embeddings) {
    weights_[kHead].host_matrix = binder.packed_rows(*embedding_, c.vocab_size);
  } else {
    if (!binder.has(lm_head.name))
      throw Error("config says the LM head is untied but the checkpoint has no '" + lm_head.name + "'");
    weights_[kHead].host_matrix = binder.packed_rows(
        binder.tensor_rows_in(lm_head.name, {c.vocab_rows, c.vocab_size}, c.d_model), c.vocab_size);
  }
  // Bound by its spec, so a zero-centred norm (Qwen3.5's) is folded as the blocks' are.
  weights_[kNormF] = bind_weights(binder, {specs.tail[kFinalNorm]}).front();
  if (input_dim_ > 0) {
    weights_[kInputProj].host_matrix = binder.matrix(input_proj, c.d_model, input_dim_);
    weights_[kInputProjBias].host_values =
        binder.f32_if_present(specs.head[kInputProjBias].name, {c.d_model});
    weights_[kInputProjBias].count = c.d_model;
  }

  // The blocks, their state parts one layer after another, and their phases by kind.
  phase_names_ = {"embed", "norm_f", "lm_head gemm", "argmax"};
  for (const BlockSpec& spec : c.blocks()) add_block(make_block(c, spec, binder));
}

void Model::add_block(std::unique_ptr<Block> block) {
  state_layout_.add_layer(block->state_parts());
  // Blocks of one kind (one class, one BlockKind) share their phases: the first one's names.
  PhaseId first_phase = static_cast<PhaseId>(phase_names_.size());
  const Block& added = *block;
  const auto same_kind = std::find_if(blocks_.begin(), blocks_.end(), [&](const auto& other) {
    const Block& existing = *other;
    return typeid(existing) == typeid(added) && existing.kind() == added.kind();
  });
  if (same_kind != blocks_.end()) {
    first_phase = (*same_kind)->first_phase();
  } else {
    for (std::string_view name : block->phase_names()) phase_names_.emplace_back(name);
  }
  block->place(state_layout_.layer(state_layout_.n_layers() - 1), first_phase);
  const std::vector<int64_t> widths = block->scratch_widths();
  if (scratch_widths_.size() < widths.size()) scratch_widths_.resize(widths.size(), 0);
  for (size_t i = 0; i < widths.size(); ++i) scratch_widths_[i] = std::max(scratch_widths_[i], widths[i]);
  reads_embedding_ = reads_embedding_ || block->reads_embedding();
  blocks_.push_back(std::move(block));
  state_shape_ = state_layout_.shape();
}

void Model::append_block(std::unique_ptr<Block> block) {
  require_host_matrices(host_matrices_released_, backend_.get(), "a model with another block");
  for (const OpQuery& op : block->ops()) {
    const std::string why = backend_->why_unsupported(op);
    if (!why.empty()) throw Error(why);
  }
  block->upload(*backend_, uploaded_);
  add_block(std::move(block));
}

std::vector<std::string> Model::phase_names() const {
  return phase_names_;
}

DType Model::matrix_dtype() const {
  return weights_[kHead].host_matrix.dtype;
}

size_t Model::matrix_bytes() const {
  return binder_->packed_matrix_bytes();
}

size_t Model::step_matrix_bytes() const {
  size_t bytes = 0;
  for (const Weight& w : weights_) bytes += packed_bytes(w.host_matrix);
  for (const auto& block : blocks_) bytes += block->step_matrix_bytes();
  return bytes;
}

size_t Model::host_matrix_bytes() const {
  return binder_->resident_packed_bytes();
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

void Model::set_device(const DeviceSpec& spec) {
  require_host_matrices(host_matrices_released_, backend_.get(), spec.text());
  set_backend(make_backend(spec));
}

void Model::set_backend(std::shared_ptr<const Backend> backend) {
  require_host_matrices(host_matrices_released_, backend_.get(), backend->description());
  // Every op of every block is asked about before anything moves, so a refusal leaves the model
  // where it was.
  check_support(*backend);
  std::vector<std::unique_ptr<Storage>> uploaded;
  const auto upload_all = [&](const Backend& to) {
    upload_weights(to, weights_, uploaded);
    for (const auto& block : blocks_) block->upload(to, uploaded);
  };
  try {
    upload_all(*backend);
  } catch (...) {
    // The views of a partial upload name storage about to be freed: point every weight back at
    // the backend it came from.
    uploaded.clear();
    if (backend_) {
      upload_all(*backend_);
      uploaded_ = std::move(uploaded);
    }
    throw;
  }
  uploaded_ = std::move(uploaded);
  backend_ = std::move(backend);
}

void Model::check_support(const Backend& backend) const {
  std::vector<OpQuery> ops = {{OpKind::Matmul, matrix_dtype()}, {OpKind::RmsNorm}, {OpKind::Argmax}};
  if (config_.hybrid.embedding_multiplier != 1.0 || config_.hybrid.logits_scaling != 1.0)
    ops.push_back({OpKind::Scale});
  if (input_dim_ > 0) ops.push_back({OpKind::Matmul, weights_[kInputProj].host_matrix.dtype});
  for (const auto& block : blocks_)
    for (const OpQuery& op : block->ops()) ops.push_back(op);
  for (const OpQuery& op : ops) {
    const std::string why = backend.why_unsupported(op);
    if (!why.empty()) throw Error(why);
  }
}

std::vector<DevicePhaseTime> Model::device_timings(const Workspace& workspace) const {
  std::vector<DevicePhaseTime> times;
  if (!workspace.stream) return times;
  for (const PhaseTime& time : workspace.stream->timings) {
    const std::string name = time.phase < static_cast<PhaseId>(phase_names_.size())
                                 ? phase_names_[time.phase]
                                 : "phase " + std::to_string(time.phase);
    times.push_back({name, time.milliseconds, time.dispatches});
  }
  return times;
}

SequenceState Model::new_state() const {
  return SequenceState(backend_->new_state(state_shape_), 0);
}

SequenceState Model::state_from_host(std::span<const float> host, int64_t position,
                                     const std::string& what) const {
  state_layout_.check_size(host.size(), what, position);
  return SequenceState(backend_->adopt_state(state_shape_, position, host), position);
}

SequenceState::SequenceState(std::vector<float> values, int64_t at)
    : position(at),
      storage_(std::make_unique<HostState>(StateShape{static_cast<int64_t>(values.size()), {}}, at, values)) {
}

SequenceState::SequenceState(std::unique_ptr<StateStorage> storage, int64_t at)
    : position(at), storage_(std::move(storage)) {}

SequenceState::SequenceState(const SequenceState& other)
    : position(other.position), storage_(other.storage_ ? other.storage_->clone(other.position) : nullptr) {}

SequenceState& SequenceState::operator=(const SequenceState& other) {
  if (this != &other) {
    storage_ = other.storage_ ? other.storage_->clone(other.position) : nullptr;
    position = other.position;
  }
  return *this;
}

std::vector<float> SequenceState::download() const {
  std::vector<float> host(floats());
  if (storage_) storage_->download(position, host);
  return host;
}

size_t SequenceState::floats() const {
  return storage_ ? static_cast<size_t>(storage_->shape().host_floats(position)) : 0;
}

}  // namespace mb
