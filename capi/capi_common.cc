// SPDX-License-Identifier: MIT
#include "capi_common.h"

#include <string_view>

// The header's version macros are written by hand; the build's version comes from CMakeLists.txt.
static_assert(std::string_view(MB_VERSION) == MAMBACPP_VERSION_STRING,
              "include/mambacpp.h's MAMBACPP_VERSION_* must be the project version");

namespace mb::capi {

namespace {

// The last error of the calling thread. It is the one piece of process state the C API keeps:
// C has no exceptions, so the message of a failed call must outlive the call, and a thread-local
// string is what lets each thread read its own without any handle to pass.
std::string& last_error() {
  thread_local std::string message;
  return message;
}

}  // namespace

Lock::Lock(LoadedModel& model) : model_(model) {
  if (model.owner.load() == std::this_thread::get_id())
    throw CallError(MB_ERR_INVALID_ARGUMENT,
                    "the model is already running a call on this thread (a generate callback may not "
                    "call mb_forward or mb_generate on its own model)");
  model.mutex.lock();
  model.owner.store(std::this_thread::get_id());
}

Lock::~Lock() {
  model_.owner.store(std::thread::id());
  model_.mutex.unlock();
}

void require(const void* pointer, const char* what) {
  if (pointer == nullptr) throw CallError(MB_ERR_INVALID_ARGUMENT, std::string(what) + " is NULL");
}

mb_status fail(mb_status status, const std::string& message) {
  try {
    last_error() = message;
  } catch (...) {
    // Without memory for the message the status alone has to do; an old message would mislead.
    last_error().clear();
  }
  return status;
}

char* copy_string(const std::string& text) {
  char* copy = static_cast<char*>(std::malloc(text.size() + 1));
  if (copy == nullptr) throw std::bad_alloc();
  std::memcpy(copy, text.data(), text.size());
  copy[text.size()] = '\0';
  return copy;
}

mb::SamplingParams sampling_params(const mb_sampling& s) {
  mb::SamplingParams params;
  params.temperature = s.temperature;
  params.top_k = s.top_k;
  params.top_p = s.top_p;
  params.min_p = s.min_p;
  params.repeat_penalty = s.repeat_penalty;
  params.repeat_last_n = s.repeat_last_n;
  params.seed = s.seed;
  return params;
}

mb_stop_reason stop_reason(mb::StopReason reason) {
  switch (reason) {
    case mb::StopReason::Eos:
      return MB_STOP_EOS;
    case mb::StopReason::Callback:
      return MB_STOP_CALLBACK;
    default:
      // The C API sets no stop strings, so the remaining reason is the token limit.
      return MB_STOP_MAX_TOKENS;
  }
}

}  // namespace mb::capi

extern "C" {

const char* mb_last_error(void) {
  return mb::capi::last_error().c_str();
}

const char* mb_version(void) {
  return MB_VERSION;
}

const char* mb_status_name(mb_status status) {
  switch (status) {
    case MB_OK:
      return "MB_OK";
    case MB_ERR_INVALID_ARGUMENT:
      return "MB_ERR_INVALID_ARGUMENT";
    case MB_ERR_IO:
      return "MB_ERR_IO";
    case MB_ERR_OUT_OF_MEMORY:
      return "MB_ERR_OUT_OF_MEMORY";
    case MB_ERR_UNSUPPORTED:
      return "MB_ERR_UNSUPPORTED";
    case MB_ERR_INTERNAL:
      return "MB_ERR_INTERNAL";
    case MB_STATUS_FORCE_INT:
      break;
  }
  return "unknown status";
}

}  // extern "C"
