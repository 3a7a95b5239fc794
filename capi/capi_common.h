// SPDX-License-Identifier: MIT
// What the C API's translation units share: the structs behind the opaque handles of
// include/mambacpp.h, and the boundary that turns every C++ exception into an mb_status and a
// thread-local message.
#pragma once

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "engine/request_decoder.h"
#include "engine/sampler.h"
#include "mambacpp.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"

namespace mb::capi {

// A loaded model with what its calls share: the tokenizer, the thread count and one Workspace,
// which is why calls that run the model take `mutex` (see Lock).
struct LoadedModel {
  std::string path;  // the checkpoint, where a chat finds its template
  std::unique_ptr<Model> model;
  std::optional<Tokenizer> tokenizer;
  std::mutex mutex;
  // The thread inside a locked call, so a callback that calls back into the same model gets an
  // error instead of a deadlock.
  std::atomic<std::thread::id> owner{};
  std::atomic<int> n_threads{1};
  Workspace workspace;  // guarded by mutex
};

// The calls' ComputeContext: `n_threads` threads, the CPU's widest instruction set.
inline ComputeContext context_of(const LoadedModel& model) {
  ComputeContext ctx;
  ctx.n_threads = model.n_threads.load();
  return ctx;
}

// Holds a model's lock for one call; throws CallError when the calling thread already holds it.
class Lock {
 public:
  explicit Lock(LoadedModel& model);
  ~Lock();
  Lock(const Lock&) = delete;
  Lock& operator=(const Lock&) = delete;

 private:
  LoadedModel& model_;
};

// An error of the C layer itself (a NULL argument, a state of another model), with its status.
class CallError : public std::exception {
 public:
  CallError(mb_status status, std::string message) : status_(status), message_(std::move(message)) {}
  const char* what() const noexcept override { return message_.c_str(); }
  mb_status status() const { return status_; }

 private:
  mb_status status_;
  std::string message_;
};

// Throws MB_ERR_INVALID_ARGUMENT naming `what` when `pointer` is NULL.
void require(const void* pointer, const char* what);

// Records `message` as this thread's last error and returns `status`.
mb_status fail(mb_status status, const std::string& message);

// Runs `body` and maps what it throws: a CallError to its status, an mb::Error to `user_status`
// (what a bad input of this call is: MB_ERR_IO for files, MB_ERR_INVALID_ARGUMENT otherwise) or
// MB_ERR_INTERNAL for a failed internal check, std::bad_alloc to MB_ERR_OUT_OF_MEMORY, and
// anything else to MB_ERR_INTERNAL.
template <class Body>
mb_status guard(const char* function, mb_status user_status, Body&& body) noexcept {
  try {
    body();
    return MB_OK;
  } catch (const CallError& e) {
    return fail(e.status(), std::string(function) + ": " + e.what());
  } catch (const Error& e) {
    const std::string message = e.what();
    const bool internal = message.rfind("internal check failed", 0) == 0;
    return fail(internal ? MB_ERR_INTERNAL : user_status, std::string(function) + ": " + message);
  } catch (const std::bad_alloc&) {
    return fail(MB_ERR_OUT_OF_MEMORY, std::string(function) + ": out of memory");
  } catch (const std::exception& e) {
    return fail(MB_ERR_INTERNAL, std::string(function) + ": " + e.what());
  } catch (...) {
    return fail(MB_ERR_INTERNAL, std::string(function) + ": unknown exception");
  }
}

// Copies `count` elements into a malloc'ed array the caller frees with free() (mb_free_*);
// NULL when count is 0. Throws std::bad_alloc when malloc fails.
template <class T>
T* copy_to_malloc(const T* values, size_t count) {
  if (count == 0) return nullptr;
  void* memory = std::malloc(count * sizeof(T));
  if (memory == nullptr) throw std::bad_alloc();
  std::memcpy(memory, values, count * sizeof(T));
  return static_cast<T*>(memory);
}
// A NUL-terminated malloc'ed copy of `text`.
char* copy_string(const std::string& text);

// The engine's sampling parameters of `s` (checked where they are used).
SamplingParams sampling_params(const mb_sampling& s);
// The C API's stop reason of the engine's (it sets no stop strings, so that one never occurs).
mb_stop_reason stop_reason(StopReason reason);

}  // namespace mb::capi

struct mb_model {
  std::shared_ptr<mb::capi::LoadedModel> impl;
};

struct mb_state {
  std::shared_ptr<mb::capi::LoadedModel> model;  // keeps the weights alive while the state is
  mb::SequenceState state;
};
