// SPDX-License-Identifier: MIT
// What the Python module's objects share: a loaded model with its tokenizer and chat template,
// the compute context, and the one lock that serializes computation on it.
//
// Locking: a Python call releases the GIL before it takes Engine::mutex, and never waits for
// the GIL while it holds the mutex, so two Python threads using one model cannot deadlock. The
// model's forward pass and the scheduler's steps both run under the mutex: they share the
// model's threads, and Scheduler::step may run on one thread at a time.
#pragma once

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "chat/chat_template.h"
#include "engine/scheduler.h"
#include "model/model.h"
#include "server/openai_api.h"
#include "tokenizer/tokenizer.h"

namespace mb::python {

namespace py = pybind11;

struct Engine {
  std::string path;
  std::unique_ptr<Model> model;
  std::optional<Tokenizer> tokenizer;  // empty for checkpoints without one (feature models)
  server::ServedChatTemplate chat;     // the checkpoint's, or the plain format (and why its own is unusable)
  ComputeContext ctx;

  std::mutex mutex;                      // held while anything computes on the model
  Workspace workspace;                   // forward()'s, under the mutex
  std::unique_ptr<Scheduler> scheduler;  // generation's, made on first use, under the mutex

  // The tokenizer, or mb::Error saying the checkpoint has none.
  const Tokenizer& require_tokenizer() const;
  // The scheduler, made on first use; call with the mutex held.
  Scheduler& scheduler_locked();
};

// A sequence's recurrent state and the model it belongs to (kept alive by it).
struct PyState {
  std::shared_ptr<Engine> engine;
  SequenceState state;
};

// Loads the checkpoint (a Hugging Face folder or a GGUF file) with its tokenizer and chat template.
std::shared_ptr<Engine> load_engine(const std::string& path, const std::string& device,
                                    const std::optional<std::string>& dtype, int threads);

// The extension's Model class: a handle on an Engine (python/src/model_bindings.cc).
class PyModel {
 public:
  PyModel(const std::string& path, const std::string& device, const std::optional<std::string>& dtype,
          int threads);
  const std::shared_ptr<Engine>& engine() const { return engine_; }
  const ModelConfig& config() const { return engine_->model->config(); }

  std::vector<int32_t> tokenize(const std::string& text) const;
  std::string detokenize(const py::handle& ids, bool skip_special) const;
  PyState new_state() const;
  // Hidden states after the final norm: "all" [T, d_model], "last" or "mean" [d_model].
  py::array_t<float> forward(const py::handle& input, const std::string& output, PyState* state);
  // Many pages as one pass over the weights: a list of [T_i, d_model] arrays for "all", one
  // [pages, d_model] array for "last" and "mean".
  py::object forward_batch(const py::list& pages, const std::string& output, const py::object& states);
  // Embeddings (engine/embed.h) of a text, a list of texts, a sequence of token ids or a list of
  // them: [d_model] for one input, [inputs, d_model] for a list; pooling "mean" or "last".
  py::array_t<float> embed(const py::handle& input, const std::string& pooling, bool normalize);
  // [vocab_size] at the last position, or [T, vocab_size] with all_positions.
  py::array_t<float> logits(const py::handle& ids, bool all_positions, PyState* state);

 private:
  std::shared_ptr<Engine> engine_;
};

// The bindings of each part of the module; generation adds its methods to the Model class.
py::class_<PyModel> bind_model(py::module_& m);
void bind_generation(py::class_<PyModel>& model_class);

}  // namespace mb::python
