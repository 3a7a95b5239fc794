// SPDX-License-Identifier: MIT
// The extension module mambacpp._mambacpp: the engine's Model, State and generation, with the
// engine's errors raised as mambacpp.Error (a ValueError: nearly all of them name bad input).
// python/mambacpp/__init__.py is the documented interface over it.
#include <pybind11/pybind11.h>

#include <new>

#include "core/error.h"
#include "engine.h"
#include "engine/gguf_tokenizer.h"
#include "model/device.h"

namespace mb::python {

const Tokenizer& Engine::require_tokenizer() const {
  if (!tokenizer)
    throw Error("'" + path +
                "' has no tokenizer (no tokenizer.json, vocab.json + merges.txt or "
                "GGUF tokenizer): pass token ids");
  return *tokenizer;
}

Scheduler& Engine::scheduler_locked() {
  if (!scheduler) {
    // The server's defaults: a few sequences at once, prompts prefilled in chunks of 512 with
    // a cached state every 512 tokens, so a chat's follow-up turn resumes from its prefix.
    SchedulerOptions options;
    scheduler = std::make_unique<Scheduler>(*model, tokenizer ? &*tokenizer : nullptr, ctx, options);
  }
  return *scheduler;
}

std::shared_ptr<Engine> load_engine(const std::string& path, const std::string& device,
                                    const std::optional<std::string>& dtype, int threads) {
  if (threads < 0 || threads > kMaxThreads)
    throw Error("threads must be in [0, " + std::to_string(kMaxThreads) + "] (0 = all cores), got " +
                std::to_string(threads));
  auto engine = std::make_shared<Engine>();
  engine->path = path;
  engine->ctx.n_threads = threads == 0 ? default_thread_count() : threads;
  LoadOptions options;
  options.device = parse_device(device);
  if (dtype && *dtype != "auto") options.weight_dtype = parse_dtype(*dtype);
  try {
    engine->model = Model::load(path, options);
  } catch (const std::bad_alloc&) {
    throw Error("out of memory loading the model '" + path + "'");
  }
  engine->tokenizer = find_tokenizer(path);
  // As the server does: completions keep working, chat calls report why its template cannot be used.
  engine->chat = server::load_served_chat_template(path);
  return engine;
}

}  // namespace mb::python

PYBIND11_MODULE(_mambacpp, m) {
  namespace py = pybind11;
  m.doc() = "mambacpp's engine (use the mambacpp package, which documents it)";
  py::register_exception<mb::Error>(m, "Error", PyExc_ValueError);
  auto model = mb::python::bind_model(m);
  mb::python::bind_generation(model);
#ifdef MB_VERSION
  m.attr("__version__") = MB_VERSION;
#endif
}
