// SPDX-License-Identifier: MIT
// n > 1 choices: one prefill, then the prompt's state forked into one sequence per choice.
#include "engine/scheduler_impl.h"

namespace mb {

using scheduler_detail::Phase;

int Scheduler::Impl::slots_held(const Sequence& seq) {
  // Before the fork the first choice holds the slots its siblings will take.
  return seq.phase == Phase::Prefill ? seq.request.n : 1;
}

void Scheduler::Impl::start_decoding(Sequence& seq, std::span<const float> logits) {
  seq.phase = Phase::Decode;
  // The forks are made before the first choice samples, so each starts from the prompt's state
  // and its logits row, exactly as a request of its own whose prompt was all cached would. Choice
  // i draws from its own stream, seeded with seed + i: the request with n = 1 and that seed gives
  // the same tokens, and a fixed seed still gives n different answers.
  std::vector<Sequence*> choices{&seq};
  for (int i = 1; i < seq.request.n; ++i) {
    ServeRequest request = seq.request;
    request.n = 1;
    request.sampling.seed = seq.request.sampling.seed + static_cast<uint64_t>(i);
    try {
      RequestDecoder decoder(scheduler_detail::decode_settings(request), request.prompt, vocabulary,
                             tokenizer);
      active.push_back(std::make_unique<Sequence>(
          Sequence{seq.id, std::move(request), seq.sink, seq.state, std::move(decoder)}));
    } catch (const std::exception& e) {
      // The settings passed validation with choice 0's seed, so only a failed state copy (out of
      // memory) lands here: the choices made so far go on, this one reports the error.
      ServeEvent error;
      error.kind = ServeEvent::Kind::Error;
      error.choice = i;
      error.error =
          std::string("cannot fork the prompt's state for choice ") + std::to_string(i) + ": " + e.what();
      try {
        seq.sink(error);
      } catch (...) {
      }
      continue;
    }
    Sequence& fork = *active.back();
    fork.phase = Phase::Decode;
    fork.cached = seq.cached;
    fork.choice = i;
    choices.push_back(&fork);
  }
  for (Sequence* choice : choices) sample_next(*choice, logits);
}

}  // namespace mb
