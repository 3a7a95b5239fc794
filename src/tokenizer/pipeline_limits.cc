// SPDX-License-Identifier: MIT
#include "tokenizer/pipeline_limits.h"

#include "core/error.h"

namespace mb::tok {

void check_sequence(const std::string& source, const char* stage, size_t entries, int depth) {
  if (depth > kMaxPipelineNesting)
    throw Error(source + ": " + stage + " Sequences nest deeper than " + std::to_string(kMaxPipelineNesting) +
                " levels");
  if (entries > kMaxPipelineSteps)
    throw Error(source + ": " + stage + " Sequence has " + std::to_string(entries) + " steps, more than " +
                std::to_string(kMaxPipelineSteps));
}

void check_step_count(const std::string& source, const char* stage, size_t steps) {
  if (steps > kMaxPipelineSteps)
    throw Error(source + ": " + stage + " has more than " + std::to_string(kMaxPipelineSteps) + " steps");
}

PipelineBudget::PipelineBudget(const std::string& source, const char* stage, size_t input_bytes)
    : source_(source),
      stage_(stage),
      input_bytes_(input_bytes),
      max_bytes_(kMaxPipelineGrowth * input_bytes + kPipelineSlackBytes),
      work_left_(kPipelineWorkFactor * max_bytes_) {}

void PipelineBudget::charge(size_t bytes) {
  if (bytes > max_bytes_) fail_length();
  if (bytes > work_left_)
    throw Error(source_ + ": the " + stage_ + " writes more than " +
                std::to_string(kPipelineWorkFactor * max_bytes_) + " bytes in all for a " +
                std::to_string(input_bytes_) + "-byte text (its work limit: " +
                std::to_string(kPipelineWorkFactor) + " times its length limit)");
  work_left_ -= bytes;
}

void PipelineBudget::fail_length() const {
  throw Error(source_ + ": the " + stage_ + " turns a " + std::to_string(input_bytes_) +
              "-byte text into more than " + std::to_string(max_bytes_) +
              " bytes (its limit: " + std::to_string(kMaxPipelineGrowth) + " times the text plus " +
              std::to_string(kPipelineSlackBytes) + ")");
}

}  // namespace mb::tok
