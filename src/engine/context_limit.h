// SPDX-License-Identifier: MIT
// The context a server gives each request when -c is not set: what keeps one request (no key, no
// max_tokens) from growing a model's state without bound. A hybrid's attention layers keep every
// position's keys and values, so its state grows with the context; the Mamba families' state is
// the same size at any position and needs no limit.
#pragma once

#include <cstdint>
#include <string>

#include "model/model.h"

namespace mb {

struct ContextLimit {
  int64_t tokens = 0;  // prompt + reply per request; 0: no limit
  std::string source;  // where it comes from, for the start-up line "context N tokens (from ...)"
};

// The default context of `model` serving `slots` requests at once. A model whose state grows gets
// its trained length `trained` (0: unknown) where the config states it, unless
// `slots` such states would not fit in half of `available_bytes`: then, as where no length is
// known, as many positions as do fit (at least kMinDefaultContext). A model whose state does not
// grow gets no limit (0); its replies are bounded by max_tokens (a request's, or the server's
// defaults). `available_bytes` 0 means unknown: the trained length, or kUnknownMemoryContext.
inline constexpr int64_t kMinDefaultContext = 256;
inline constexpr int64_t kUnknownMemoryContext = 4096;
ContextLimit default_context_limit(const Model& model, int64_t slots, uint64_t available_bytes,
                                   int64_t trained);

// The trained context length a checkpoint states, or 0 where it states none: a folder's config.json
// max_position_embeddings (a positive integer), a GGUF file's <arch>.context_length below 2^20.
// The model's parsed config does not carry it, as nothing else computes with it.
int64_t trained_context_length(const std::string& model_path);

// The memory the system can still give without swapping (Linux's MemAvailable), or 0 when unknown.
uint64_t available_memory_bytes();

}  // namespace mb
