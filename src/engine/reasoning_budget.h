// SPDX-License-Identifier: MIT
// The thinking budget (`--reasoning-budget N`, a request's thinking_budget_tokens): once N tokens
// have been generated inside the thinking block, the block's close marker is forced, token by
// token of its tokenization, as llama-server does. A constraint that follows (a grammar: a forced
// tool call, response_format) applies after the thinking block is closed, so the reply's answer
// is constrained and its thinking is not.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "engine/token_constraint.h"

namespace mb {

struct ReasoningBudgetSpec {
  std::vector<int32_t> open_ids;   // the open marker's tokens, as the model writes it
  std::vector<int32_t> close_ids;  // the close marker's tokens, forced when the budget runs out
  bool starts_inside = false;      // the prompt opened the block: the first token is thinking
  int budget = -1;                 // tokens of thinking allowed; -1 = unlimited
};

// Counts the tokens of the (first) thinking block and forces its close after `budget` of them.
// `after` (may be null) is the constraint for what follows the block; while no block has been
// opened (and the prompt did not open one) it applies from the first token, as if there were no
// thinking. Throws mb::Error when close_ids is empty.
class ReasoningBudgetConstraint : public TokenConstraint {
 public:
  ReasoningBudgetConstraint(ReasoningBudgetSpec spec, std::unique_ptr<TokenConstraint> after);

  void mask(std::span<float> logits) override;
  void accept(int32_t token) override;
  bool may_end() const override;
  bool must_end() const override;
  std::unique_ptr<TokenConstraint> clone() const override;

  // Tokens generated inside the block so far, and whether its close is being forced now.
  int thinking_tokens() const { return thinking_; }
  bool forcing() const { return forced_ >= 0; }

 private:
  enum class Phase { Before, Inside, After };
  bool ends_with(const std::vector<int32_t>& marker) const;

  ReasoningBudgetSpec spec_;
  std::unique_ptr<TokenConstraint> after_;
  Phase phase_;
  int thinking_ = 0;
  int forced_ = -1;              // the index in close_ids of the next forced token; -1 when not forcing
  std::vector<int32_t> recent_;  // the last tokens, to find the markers the model writes itself
};

}  // namespace mb
