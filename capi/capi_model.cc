// SPDX-License-Identifier: MIT
// The C API's models, states, forward passes and tokenizer calls: each checks its arguments,
// calls the C++ API (model/model.h, engine/state_file.h, tokenizer/tokenizer.h) and copies the
// results out, inside guard() so that no exception crosses into C.
#include <string>
#include <vector>

#include "capi_common.h"
#include "core/dtype.h"
#include "core/threading.h"
#include "engine/gguf_tokenizer.h"
#include "engine/state_file.h"
#include "model/device.h"

using mb::capi::CallError;
using mb::capi::guard;
using mb::capi::LoadedModel;
using mb::capi::Lock;
using mb::capi::require;

namespace {

int resolve_threads(int32_t n_threads) {
  if (n_threads < 0 || n_threads > mb::kMaxThreads)
    throw CallError(MB_ERR_INVALID_ARGUMENT, "n_threads must be in [0, " + std::to_string(mb::kMaxThreads) +
                                                 "] (0 = all cores), got " + std::to_string(n_threads));
  return n_threads == 0 ? mb::default_thread_count() : n_threads;
}

mb::LoadOptions load_options(const mb_load_options& options) {
  mb::LoadOptions result;
  try {
    if (options.device != nullptr) result.device = mb::parse_device(options.device);
    const std::string dtype = options.dtype == nullptr ? "auto" : options.dtype;
    if (dtype != "auto") result.weight_dtype = mb::parse_dtype(dtype);
  } catch (const mb::Error& e) {
    throw CallError(MB_ERR_INVALID_ARGUMENT, e.what());
  }
  // A device that is not there (no Vulkan in this build, an index past the last device) is the
  // build's or the machine's limit, not a bad file, so it is asked for before the load; the
  // load then makes the backend it keeps.
  if (result.device.kind != mb::DeviceKind::Cpu) {
    try {
      mb::make_backend(result.device);
    } catch (const mb::Error& e) {
      throw CallError(MB_ERR_UNSUPPORTED, e.what());
    }
  }
  return result;
}

// The model behind a handle, or MB_ERR_INVALID_ARGUMENT.
LoadedModel& loaded(const mb_model* model) {
  require(model, "model");
  return *model->impl;
}

// The caller's states must be states of this model: another model's would not fit its layout.
void require_same_model(const mb_state* state, const LoadedModel& model, const std::string& what) {
  require(state, what.c_str());
  if (state->model.get() != &model)
    throw CallError(MB_ERR_INVALID_ARGUMENT, what + " belongs to another model");
}

mb::OutputKind output_kind(mb_output_kind kind) {
  switch (kind) {
    case MB_OUTPUT_NONE:
      return mb::OutputKind::None;
    case MB_OUTPUT_LOGITS_LAST:
      return mb::OutputKind::LogitsLast;
    case MB_OUTPUT_LOGITS_ALL:
      return mb::OutputKind::LogitsAll;
    case MB_OUTPUT_HIDDEN_LAST:
      return mb::OutputKind::HiddenLast;
    case MB_OUTPUT_HIDDEN_ALL:
      return mb::OutputKind::HiddenAll;
    case MB_OUTPUT_HIDDEN_MEAN:
      return mb::OutputKind::HiddenMean;
    case MB_OUTPUT_ARGMAX_LAST:
      return mb::OutputKind::ArgmaxLast;
    case MB_OUTPUT_KIND_FORCE_INT:
      break;
  }
  throw CallError(MB_ERR_INVALID_ARGUMENT, "unknown output kind " + std::to_string(static_cast<int>(kind)));
}

const mb::Tokenizer& tokenizer_of(const LoadedModel& model) {
  if (!model.tokenizer)
    throw CallError(MB_ERR_UNSUPPORTED,
                    "the model has no tokenizer (tokenizer.json, vocab.json + merges.txt "
                    "or GGUF tokenizer metadata)");
  return *model.tokenizer;
}

}  // namespace

extern "C" {

mb_load_options mb_load_options_default(void) {
  return mb_load_options{nullptr, nullptr, 0};
}

mb_status mb_model_load(const char* path, const mb_load_options* options, mb_model** out) {
  if (out != nullptr) *out = nullptr;
  return guard("mb_model_load", MB_ERR_IO, [&] {
    require(path, "path");
    require(out, "out");
    const mb_load_options given = options == nullptr ? mb_load_options_default() : *options;
    const mb::LoadOptions parsed = load_options(given);
    auto impl = std::make_shared<LoadedModel>();
    impl->n_threads = resolve_threads(given.n_threads);
    impl->path = path;
    impl->model = mb::Model::load(path, parsed);
    impl->tokenizer = mb::find_tokenizer(path);
    *out = new mb_model{std::move(impl)};
  });
}

void mb_model_free(mb_model* model) {
  delete model;
}

mb_status mb_model_get_info(const mb_model* model, mb_model_info* out) {
  return guard("mb_model_get_info", MB_ERR_INVALID_ARGUMENT, [&] {
    LoadedModel& impl = loaded(model);
    require(out, "out");
    const mb::ModelConfig& config = impl.model->config();
    *out = mb_model_info{config.vocab_size,       config.d_model,         config.n_layer,
                         impl.model->input_dim(), impl.tokenizer ? 1 : 0, impl.n_threads.load()};
  });
}

mb_status mb_model_set_threads(mb_model* model, int32_t n_threads) {
  return guard("mb_model_set_threads", MB_ERR_INVALID_ARGUMENT, [&] {
    LoadedModel& impl = loaded(model);
    impl.n_threads = resolve_threads(n_threads);
  });
}

mb_status mb_state_new(const mb_model* model, mb_state** out) {
  if (out != nullptr) *out = nullptr;
  return guard("mb_state_new", MB_ERR_INVALID_ARGUMENT, [&] {
    LoadedModel& impl = loaded(model);
    require(out, "out");
    *out = new mb_state{model->impl, impl.model->new_state()};
  });
}

mb_status mb_state_copy(const mb_state* state, mb_state** out) {
  if (out != nullptr) *out = nullptr;
  return guard("mb_state_copy", MB_ERR_INVALID_ARGUMENT, [&] {
    require(state, "state");
    require(out, "out");
    *out = new mb_state{state->model, state->state};
  });
}

void mb_state_free(mb_state* state) {
  delete state;
}

mb_status mb_state_position(const mb_state* state, int64_t* out) {
  return guard("mb_state_position", MB_ERR_INVALID_ARGUMENT, [&] {
    require(state, "state");
    require(out, "out");
    *out = state->state.position;
  });
}

mb_status mb_state_read(const mb_state* state, float* values, size_t* count) {
  return guard("mb_state_read", MB_ERR_INVALID_ARGUMENT, [&] {
    require(state, "state");
    require(count, "count");
    const size_t floats = state->state.floats();
    if (values != nullptr) {
      if (*count < floats)
        throw CallError(MB_ERR_INVALID_ARGUMENT, "the buffer holds " + std::to_string(*count) +
                                                     " floats; the state has " + std::to_string(floats));
      const std::vector<float> host = state->state.download();
      std::memcpy(values, host.data(), host.size() * sizeof(float));
    }
    *count = floats;
  });
}

mb_status mb_state_save(const mb_state* state, const char* path) {
  return guard("mb_state_save", MB_ERR_IO, [&] {
    require(state, "state");
    require(path, "path");
    mb::save_state(path, *state->model->model, state->state);
  });
}

mb_status mb_state_load(const mb_model* model, const char* path, mb_state** out) {
  if (out != nullptr) *out = nullptr;
  return guard("mb_state_load", MB_ERR_IO, [&] {
    LoadedModel& impl = loaded(model);
    require(path, "path");
    require(out, "out");
    *out = new mb_state{model->impl, mb::load_state(path, *impl.model)};
  });
}

mb_status mb_forward(mb_model* model, const mb_sequence_input* batch, size_t n_batch, mb_output_kind kind,
                     mb_output* outputs) {
  if (outputs != nullptr)
    for (size_t i = 0; i < n_batch; ++i) outputs[i] = mb_output{nullptr, 0, 0};
  return guard("mb_forward", MB_ERR_INVALID_ARGUMENT, [&] {
    LoadedModel& impl = loaded(model);
    if (n_batch > 0) {
      require(batch, "batch");
      require(outputs, "outputs");
    }
    const mb::OutputKind output = output_kind(kind);
    std::vector<mb::SequenceInput> inputs(n_batch);
    for (size_t i = 0; i < n_batch; ++i) {
      const std::string what = "batch[" + std::to_string(i) + "]";
      require_same_model(batch[i].state, impl, what + ".state");
      if (batch[i].n_tokens > 0 && batch[i].tokens == nullptr)
        throw CallError(MB_ERR_INVALID_ARGUMENT, what + ".tokens is NULL with n_tokens > 0");
      if (batch[i].n_features > 0 && batch[i].features == nullptr)
        throw CallError(MB_ERR_INVALID_ARGUMENT, what + ".features is NULL with n_features > 0");
      if (batch[i].n_tokens > 0 && batch[i].n_features > 0)
        throw CallError(MB_ERR_INVALID_ARGUMENT, what + " has both tokens and features");
      inputs[i] = mb::SequenceInput{&batch[i].state->state,
                                    {batch[i].tokens, batch[i].n_tokens},
                                    {batch[i].features, batch[i].n_features}};
    }
    std::vector<std::vector<float>> results;
    {
      const Lock lock(impl);
      mb::ForwardOptions options;
      options.output = output;
      impl.model->forward(mb::capi::context_of(impl), inputs, options, impl.workspace, results);
    }
    const int64_t width = impl.model->output_width(output);
    results.resize(n_batch);  // one entry per sequence, whatever the output kind
    std::vector<mb_output> copies(n_batch, mb_output{nullptr, 0, 0});
    try {
      for (size_t i = 0; i < n_batch; ++i) {
        const std::vector<float>& rows = results[i];
        copies[i] = mb_output{mb::capi::copy_to_malloc(rows.data(), rows.size()),
                              width == 0 ? 0 : static_cast<int64_t>(rows.size()) / width, width};
      }
    } catch (...) {
      for (mb_output& copy : copies) mb_output_free(&copy);
      throw;
    }
    for (size_t i = 0; i < n_batch; ++i) outputs[i] = copies[i];
  });
}

void mb_output_free(mb_output* output) {
  if (output == nullptr) return;
  std::free(output->data);
  *output = mb_output{nullptr, 0, 0};
}

mb_status mb_tokenize(const mb_model* model, const char* text, size_t text_len, int32_t** ids,
                      size_t* n_ids) {
  if (ids != nullptr) *ids = nullptr;
  if (n_ids != nullptr) *n_ids = 0;
  return guard("mb_tokenize", MB_ERR_INVALID_ARGUMENT, [&] {
    const LoadedModel& impl = loaded(model);
    if (text_len > 0) require(text, "text");
    require(ids, "ids");
    require(n_ids, "n_ids");
    const std::vector<int32_t> encoded = tokenizer_of(impl).encode({text == nullptr ? "" : text, text_len});
    *ids = mb::capi::copy_to_malloc(encoded.data(), encoded.size());
    *n_ids = encoded.size();
  });
}

mb_status mb_detokenize(const mb_model* model, const int32_t* ids, size_t n_ids, char** text,
                        size_t* text_len) {
  if (text != nullptr) *text = nullptr;
  if (text_len != nullptr) *text_len = 0;
  return guard("mb_detokenize", MB_ERR_INVALID_ARGUMENT, [&] {
    const LoadedModel& impl = loaded(model);
    if (n_ids > 0) require(ids, "ids");
    require(text, "text");
    const std::string decoded = tokenizer_of(impl).decode({ids, n_ids});
    *text = mb::capi::copy_string(decoded);
    if (text_len != nullptr) *text_len = decoded.size();
  });
}

void mb_free_tokens(int32_t* ids) {
  std::free(ids);
}

void mb_free_string(char* text) {
  std::free(text);
}

}  // extern "C"
