// SPDX-License-Identifier: MIT
// Generation from Python: completions and chat completions in the OpenAI API's shapes, streamed
// or whole. A request goes through exactly what the server runs (server/openai_api.h parses
// and validates the body, renders the chat template and formats the chunks; the engine's
// Scheduler generates), so the Python package and `mambacpp serve` answer alike, with the
// same prefix cache: a chat's follow-up turn resumes from its cached prefix.
//
// There is no background thread: reading a request's next chunk runs scheduler steps on the
// reading thread, under the engine's lock with the GIL released, until that request has news.
// Between steps the GIL is taken back to let Ctrl-C through: KeyboardInterrupt cancels the
// request, whose slot is freed at the next step.
#include <chrono>
#include <deque>
#include <mutex>
#include <random>

#include "core/error.h"
#include "engine.h"
#include "server/openai_api.h"
#include "server/request_surface.h"

namespace mb::python {

namespace {

using server::ApiKind;

uint64_t random_u64() {
  std::random_device device;
  return (static_cast<uint64_t>(device()) << 32) ^ device();
}

class PyCompletion {
 public:
  // `max_context` > 0 is a context window, as the server's -c (mambacpp.Llama's n_ctx).
  PyCompletion(std::shared_ptr<Engine> engine, ApiKind kind, const std::string& body, bool stream,
               int64_t max_context)
      : engine_(std::move(engine)), stream_(stream), events_(std::make_shared<Events>()) {
    py::gil_scoped_release release;
    const Tokenizer& tokenizer = engine_->require_tokenizer();
    if (max_context < 0)
      throw Error("the context size must be >= 0 (0 = no limit), got " + std::to_string(max_context));
    server::ApiDefaults defaults;
    defaults.max_context = max_context;
    server::ApiRequest request = server::prepare_api_request(kind, body, tokenizer, engine_->chat, defaults,
                                                             random_u64(), engine_->path);
    Scheduler* scheduler = nullptr;
    {
      std::lock_guard lock(engine_->mutex);
      scheduler = &engine_->scheduler_locked();
    }
    scheduler_ = scheduler;
    id_ = scheduler->submit(std::move(request.serve), [events = events_](const ServeEvent& event) {
      std::lock_guard lock(events->mutex);
      events->queue.push_back(event);
      return true;
    });
    const auto created =
        std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch())
            .count();
    formatter_ = std::make_unique<server::ChoicesFormatter>(request, tokenizer,
                                                            server::response_id(kind, random_u64()), created);
    if (stream_)
      for (const auto& prelude : formatter_->prelude_chunks()) pending_.push_back(dump(prelude));
  }

  PyCompletion(const PyCompletion&) = delete;
  PyCompletion& operator=(const PyCompletion&) = delete;
  ~PyCompletion() { cancel(); }

  // Streaming: the next chunk's JSON text, or nothing after the last.
  std::optional<std::string> next_chunk() {
    fill();
    if (pending_.empty()) return std::nullopt;
    std::string chunk = std::move(pending_.front());
    pending_.pop_front();
    return chunk;
  }

  // Whole: runs to the end and returns the response body's JSON text.
  std::string response() {
    while (!finished_) fill();
    return dump(formatter_->response());
  }

  // Stops generating; the slot is freed at the next step. Idempotent.
  void cancel() {
    if (!finished_ && scheduler_) scheduler_->cancel(id_);
    finished_ = true;
  }

 private:
  struct Events {
    std::mutex mutex;
    std::deque<ServeEvent> queue;
  };

  static std::string dump(const nlohmann::json& value) {
    return value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  }

  // Runs steps until this request has something to return or has finished.
  void fill() {
    while (pending_.empty() && !finished_) {
      bool idle = false;
      {
        py::gil_scoped_release release;
        std::lock_guard lock(engine_->mutex);
        if (!has_events()) idle = !scheduler_->step();
      }
      take_events();
      if (idle && pending_.empty() && !finished_ && !has_events())
        throw Error("the scheduler went idle before the request ended");
      if (PyErr_CheckSignals() != 0) {
        cancel();
        throw py::error_already_set();
      }
    }
  }

  bool has_events() {
    std::lock_guard lock(events_->mutex);
    return !events_->queue.empty();
  }

  void take_events() {
    std::deque<ServeEvent> events;
    {
      std::lock_guard lock(events_->mutex);
      events.swap(events_->queue);
    }
    for (const ServeEvent& event : events) {
      if (finished_) break;
      if (event.kind == ServeEvent::Kind::Error) {
        finished_ = true;
        throw Error(event.error);
      }
      if (stream_) {
        for (const auto& chunk : formatter_->stream_chunks(event)) pending_.push_back(dump(chunk));
      } else {
        formatter_->collect(event);
      }
      // With n > 1 choices the request ends with the last choice's Done.
      if (formatter_->finished()) finished_ = true;
    }
  }

  std::shared_ptr<Engine> engine_;
  bool stream_;
  std::shared_ptr<Events> events_;  // shared with the sink, which may outlive this object
  Scheduler* scheduler_ = nullptr;
  RequestId id_ = 0;
  std::unique_ptr<server::ChoicesFormatter> formatter_;
  std::deque<std::string> pending_;  // formatted chunks not yet returned
  bool finished_ = false;            // Done or Error seen, or cancelled
};

ApiKind api_kind(const std::string& kind) {
  if (kind == "completion") return ApiKind::Completion;
  if (kind == "chat") return ApiKind::Chat;
  throw Error("kind must be 'completion' or 'chat', got '" + kind + "'");
}

}  // namespace

void bind_generation(py::class_<PyModel>& model_class) {
  py::class_<PyCompletion>(model_class, "Completion",
                           "A streamed request: iterate for its chunks' JSON text.")
      .def(
          "__iter__", [](PyCompletion& self) -> PyCompletion& { return self; }, "The request itself.")
      .def(
          "__next__",
          [](PyCompletion& self) {
            auto chunk = self.next_chunk();
            if (!chunk) throw py::stop_iteration();
            return *chunk;
          },
          "Runs generation steps until the next chunk's JSON text is ready.")
      .def("close", &PyCompletion::cancel, "Cancels the request; its slot is freed at the next step.");
  model_class
      .def(
          "_complete",
          [](const PyModel& model, const std::string& kind, const std::string& body, int64_t max_context) {
            PyCompletion completion(model.engine(), api_kind(kind), body, false, max_context);
            return completion.response();
          },
          py::arg("kind"), py::arg("body"), py::arg("max_context") = 0,
          "Runs a request body to the end and returns the response's JSON text.")
      .def(
          "_stream",
          [](const PyModel& model, const std::string& kind, const std::string& body, int64_t max_context) {
            return std::make_unique<PyCompletion>(model.engine(), api_kind(kind), body, true, max_context);
          },
          py::arg("kind"), py::arg("body"), py::arg("max_context") = 0,
          "Queues a request body and returns its Completion, an iterator of chunk JSON texts.");
}

}  // namespace mb::python
