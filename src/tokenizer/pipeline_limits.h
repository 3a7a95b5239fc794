// SPDX-License-Identifier: MIT
// Limits on a tokenizer.json's normalizer, pre-tokenizer and decoder pipelines, which come from
// untrusted files: a Sequence of 40 Replace steps that each double the text, or 100,000
// ByteLevel steps, would otherwise run for minutes and exhaust memory on any prompt.
#pragma once

#include <cstddef>
#include <string>

namespace mb::tok {

// Steps of one stage in all, nested Sequences counted by their steps; real files have at most
// a handful.
constexpr size_t kMaxPipelineSteps = 64;
// Sequences within Sequences.
constexpr int kMaxPipelineNesting = 8;
// The text a normalizer or pre-tokenizer builds from an input of n bytes may be at most
// kMaxPipelineGrowth * n + kPipelineSlackBytes bytes long after every step (NFKC expands the
// densest character, U+FDFA, elevenfold; "▁" for every space triples a text), and all its steps
// together may write at most kPipelineWorkFactor times that.
constexpr size_t kMaxPipelineGrowth = 16;
constexpr size_t kPipelineSlackBytes = 4096;
constexpr size_t kPipelineWorkFactor = 8;
// The longest Split pattern (real ones are under 300 bytes). Split regexes are bounded in their
// backtracking as well, by RegexSearchLimits of onig_regex.h: 10 million steps at one start
// position, as Oniguruma and Hugging Face allow, and for all the searches of one encode 1
// million plus 256 per byte searched, so a hostile pattern backtracks at most linearly.
constexpr size_t kMaxSplitPatternBytes = 65536;

// Refuses a Sequence of `entries` steps past kMaxPipelineSteps, or one `depth` Sequences deep
// (the outermost has depth 1) past kMaxPipelineNesting; the message names `source`, the stage
// and the limit.
void check_sequence(const std::string& source, const char* stage, size_t entries, int depth);
// Refuses a stage that has grown to `steps` steps, past kMaxPipelineSteps.
void check_step_count(const std::string& source, const char* stage, size_t steps);

// The length and work budget of one normalizer or pre-tokenizer run over `input_bytes`.
class PipelineBudget {
 public:
  PipelineBudget(const std::string& source, const char* stage, size_t input_bytes);

  // The longest text a step may produce.
  size_t max_bytes() const { return max_bytes_; }
  // Counts a step's output of `bytes`; throws mb::Error when it is longer than max_bytes() or
  // when the steps so far have written more than the work limit.
  void charge(size_t bytes);
  // Throws the length error for a step that would have produced more than max_bytes().
  [[noreturn]] void fail_length() const;

 private:
  const std::string& source_;
  const char* stage_;
  size_t input_bytes_;
  size_t max_bytes_;
  size_t work_left_;
};

}  // namespace mb::tok
