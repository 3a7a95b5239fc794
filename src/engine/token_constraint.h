// SPDX-License-Identifier: MIT
// A rule over which tokens may come next: a grammar (response_format, GBNF), a forced tool call
// (tool_choice "required" or a named function), a thinking budget. RequestDecoder applies it to
// each row of logits before sampling, so the server, the CLI and the Python package share it.
//
// A constraint only masks. A token it allows keeps its logit bit for bit, so the exactness
// contract (prefill == decode, threads, batch, chunks) is untouched, and a constrained request
// draws from exactly the distribution the unconstrained one would, restricted to the allowed ids
// and renormalised by the sampler as any filter is.
#pragma once

#include <cstdint>
#include <memory>
#include <span>

namespace mb {

class TokenConstraint {
 public:
  virtual ~TokenConstraint() = default;

  // Sets to -infinity the logit of every id in [0, logits.size()) that may not come next. The
  // end-of-sequence ids are the decoder's business (see may_end): the decoder keeps their logits
  // when may_end() and masks them otherwise, whatever mask() did to them.
  virtual void mask(std::span<float> logits) = 0;
  // Advances past `token`, which the last mask() allowed. Throws mb::Error for a token it did not.
  virtual void accept(int32_t token) = 0;
  // Whether what was accepted so far is complete, so an end-of-sequence id may be sampled now.
  virtual bool may_end() const = 0;
  // Whether nothing may follow what was accepted: the decoder ends the request (StopReason::Eos,
  // finish_reason "stop") without sampling again.
  virtual bool must_end() const = 0;
  // An independent copy in the same position, for requests that fork (n > 1 choices).
  virtual std::unique_ptr<TokenConstraint> clone() const = 0;
};

}  // namespace mb
