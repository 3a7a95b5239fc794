// SPDX-License-Identifier: MIT
// The thinking budget (src/engine/reasoning_budget.h): after N tokens inside the block only the
// close marker's tokens are allowed, one after the other; a block the model closes itself is left
// alone; a constraint that follows applies after the block; clones continue where they were.
#include "engine/reasoning_budget.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "core/error.h"

namespace mb {
namespace {

// The ids a mask left finite over a vocabulary of `n`.
std::vector<int32_t> budget_allowed(TokenConstraint& constraint, size_t n = 16) {
  std::vector<float> logits(n, 0.5f);
  constraint.mask(logits);
  std::vector<int32_t> allowed;
  for (size_t i = 0; i < n; ++i)
    if (std::isfinite(logits[i])) allowed.push_back(static_cast<int32_t>(i));
  return allowed;
}

// Allows only even ids, and must end after `length` tokens: a stand-in for a grammar.
class EvenIdsConstraint : public TokenConstraint {
 public:
  explicit EvenIdsConstraint(int length) : left_(length) {}
  void mask(std::span<float> logits) override {
    for (size_t i = 1; i < logits.size(); i += 2) logits[i] = -INFINITY;
  }
  void accept(int32_t token) override {
    if (token % 2 != 0) throw Error("odd token");
    --left_;
  }
  bool may_end() const override { return left_ <= 0; }
  bool must_end() const override { return left_ <= 0; }
  std::unique_ptr<TokenConstraint> clone() const override {
    return std::make_unique<EvenIdsConstraint>(*this);
  }

 private:
  int left_;
};

const std::vector<int32_t> kAll16 = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};

TEST(ReasoningBudget, ForcesTheCloseMarkerAfterTheBudget) {
  // Open marker [14], close marker [12, 13]; the prompt opened the block.
  ReasoningBudgetConstraint budget({{14}, {12, 13}, true, 3}, nullptr);
  for (int32_t token : {5, 6, 7}) {
    EXPECT_EQ(budget_allowed(budget), kAll16);
    EXPECT_TRUE(budget.may_end());
    budget.accept(token);
  }
  EXPECT_TRUE(budget.forcing());
  EXPECT_EQ(budget_allowed(budget), std::vector<int32_t>{12});
  EXPECT_FALSE(budget.may_end());
  EXPECT_THROW(budget.accept(5), Error);
  budget.accept(12);
  EXPECT_EQ(budget_allowed(budget), std::vector<int32_t>{13});
  budget.accept(13);
  // The answer is free.
  EXPECT_FALSE(budget.forcing());
  EXPECT_EQ(budget_allowed(budget), kAll16);
  budget.accept(3);
  EXPECT_EQ(budget_allowed(budget), kAll16);
  EXPECT_EQ(budget.thinking_tokens(), 3);
}

TEST(ReasoningBudget, ABlockClosedInTimeOrOpenedByTheModelIsCounted) {
  // The model closes the block itself within the budget: nothing is forced afterwards.
  ReasoningBudgetConstraint closed({{14}, {12, 13}, true, 4}, nullptr);
  for (int32_t token : {5, 12, 13, 1, 1, 1, 1, 1}) {
    EXPECT_EQ(budget_allowed(closed), kAll16);
    closed.accept(token);
  }
  EXPECT_EQ(closed.thinking_tokens(), 3);
  // The model opens the block itself: counting starts after the open marker.
  ReasoningBudgetConstraint opened({{14}, {12, 13}, false, 2}, nullptr);
  for (int32_t token : {1, 2, 14, 7}) {
    EXPECT_EQ(budget_allowed(opened), kAll16);
    opened.accept(token);
  }
  opened.accept(8);
  EXPECT_EQ(budget_allowed(opened), std::vector<int32_t>{12});
  // A close marker the model has begun is continued, not begun again.
  ReasoningBudgetConstraint begun({{14}, {12, 13}, true, 2}, nullptr);
  begun.accept(3);
  begun.accept(12);
  EXPECT_EQ(budget_allowed(begun), std::vector<int32_t>{13});
  // Budget 0: the close is the first token.
  ReasoningBudgetConstraint none({{14}, {12, 13}, true, 0}, nullptr);
  EXPECT_EQ(budget_allowed(none), std::vector<int32_t>{12});
  // Unlimited: never forced.
  ReasoningBudgetConstraint unlimited({{14}, {12, 13}, true, -1}, nullptr);
  for (int i = 0; i < 100; ++i) unlimited.accept(3);
  EXPECT_EQ(budget_allowed(unlimited), kAll16);
  EXPECT_THROW(ReasoningBudgetConstraint({{14}, {}, true, 1}, nullptr), Error);
}

TEST(ReasoningBudget, TheFollowingConstraintAppliesAfterTheBlockAndClonesContinue) {
  ReasoningBudgetConstraint budget({{14}, {12, 13}, true, 1}, std::make_unique<EvenIdsConstraint>(2));
  EXPECT_EQ(budget_allowed(budget), kAll16);  // thinking is free
  budget.accept(7);
  std::unique_ptr<TokenConstraint> copy = budget.clone();
  budget.accept(12);
  budget.accept(13);
  EXPECT_EQ(budget_allowed(budget), (std::vector<int32_t>{0, 2, 4, 6, 8, 10, 12, 14}));
  EXPECT_FALSE(budget.may_end());
  budget.accept(2);
  budget.accept(4);
  EXPECT_TRUE(budget.may_end());
  EXPECT_TRUE(budget.must_end());
  // The clone was taken before the close: it still forces it.
  EXPECT_EQ(budget_allowed(*copy), std::vector<int32_t>{12});
  // With a following constraint and a prompt that did not open a block, it applies at once.
  ReasoningBudgetConstraint direct({{14}, {12, 13}, false, 5}, std::make_unique<EvenIdsConstraint>(1));
  EXPECT_EQ(budget_allowed(direct), (std::vector<int32_t>{0, 2, 4, 6, 8, 10, 12, 14}));
}

}  // namespace
}  // namespace mb
