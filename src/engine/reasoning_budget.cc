// SPDX-License-Identifier: MIT
#include "engine/reasoning_budget.h"

#include <algorithm>
#include <limits>
#include <string>

#include "core/error.h"

namespace mb {

ReasoningBudgetConstraint::ReasoningBudgetConstraint(ReasoningBudgetSpec spec,
                                                     std::unique_ptr<TokenConstraint> after)
    : spec_(std::move(spec)), after_(std::move(after)) {
  if (spec_.close_ids.empty()) throw Error("a thinking budget needs the close marker's tokens");
  // With a constraint to follow and a prompt that did not open the block, the reply is the
  // constrained answer from its first token: it cannot open a block the grammar would have to
  // allow.
  phase_ = spec_.starts_inside ? Phase::Inside : after_ ? Phase::After : Phase::Before;
  if (phase_ == Phase::Inside && spec_.budget == 0) forced_ = 0;
}

bool ReasoningBudgetConstraint::ends_with(const std::vector<int32_t>& marker) const {
  return !marker.empty() && recent_.size() >= marker.size() &&
         std::equal(marker.begin(), marker.end(), recent_.end() - static_cast<ptrdiff_t>(marker.size()));
}

void ReasoningBudgetConstraint::mask(std::span<float> logits) {
  if (phase_ == Phase::After) {
    if (after_) after_->mask(logits);
    return;
  }
  if (forced_ < 0) return;
  const int32_t only = spec_.close_ids[static_cast<size_t>(forced_)];
  for (size_t i = 0; i < logits.size(); ++i)
    if (static_cast<int32_t>(i) != only) logits[i] = -std::numeric_limits<float>::infinity();
}

void ReasoningBudgetConstraint::accept(int32_t token) {
  if (phase_ == Phase::After) {
    if (after_) after_->accept(token);
    return;
  }
  if (forced_ >= 0) {
    if (token != spec_.close_ids[static_cast<size_t>(forced_)])
      throw Error("the thinking budget forced token " +
                  std::to_string(spec_.close_ids[static_cast<size_t>(forced_)]) + ", got " +
                  std::to_string(token));
    if (static_cast<size_t>(++forced_) == spec_.close_ids.size()) {
      forced_ = -1;
      phase_ = Phase::After;
    }
    return;
  }
  // Only the markers' length of history is needed to recognise them.
  recent_.push_back(token);
  const size_t keep = std::max(spec_.open_ids.size(), spec_.close_ids.size());
  if (recent_.size() > 2 * keep) recent_.erase(recent_.begin(), recent_.end() - static_cast<ptrdiff_t>(keep));
  if (phase_ == Phase::Before) {
    if (ends_with(spec_.open_ids)) {
      phase_ = Phase::Inside;
      recent_.clear();
      if (spec_.budget == 0) forced_ = 0;
    }
    return;
  }
  ++thinking_;
  if (ends_with(spec_.close_ids)) {
    phase_ = Phase::After;
    return;
  }
  if (spec_.budget >= 0 && thinking_ >= spec_.budget) {
    // Continue a close marker the model has begun rather than start another.
    forced_ = 0;
    for (size_t k = spec_.close_ids.size() - 1; k > 0; --k) {
      if (recent_.size() >= k &&
          std::equal(spec_.close_ids.begin(), spec_.close_ids.begin() + static_cast<ptrdiff_t>(k),
                     recent_.end() - static_cast<ptrdiff_t>(k))) {
        forced_ = static_cast<int>(k);
        break;
      }
    }
  }
}

bool ReasoningBudgetConstraint::may_end() const {
  if (forced_ >= 0) return false;
  if (phase_ == Phase::After && after_) return after_->may_end();
  return true;
}

bool ReasoningBudgetConstraint::must_end() const {
  return phase_ == Phase::After && after_ && after_->must_end();
}

std::unique_ptr<TokenConstraint> ReasoningBudgetConstraint::clone() const {
  auto copy = std::make_unique<ReasoningBudgetConstraint>(spec_, after_ ? after_->clone() : nullptr);
  copy->phase_ = phase_;
  copy->thinking_ = thinking_;
  copy->forced_ = forced_;
  copy->recent_ = recent_;
  return copy;
}

}  // namespace mb
