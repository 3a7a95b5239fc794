// SPDX-License-Identifier: MIT
// A progress line for long jobs (loading a model, above all with quantization; `mambacpp
// quantize`; make-model): one line on stderr, rewritten in place with "\r", saying what is done
// of the total, the rate and the time left:
//
//   loading: 213.4 / 516.6 MB (41%), 85.2 MB/s, ETA 4 s
//
// It shows only where stderr is a terminal, and only once the job has run longer than
// kProgressDelaySeconds, so short jobs, logs, pipes and files never see it; it is erased when the
// job ends (clear(), or the destructor), so what the job prints next starts on a clean line.
// Not thread-safe: one thread reports (the loops that split work across threads report between
// their parallel regions).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

namespace mb {

// How long a job runs before its line appears.
inline constexpr double kProgressDelaySeconds = 2.0;
// The line is redrawn at most this often.
inline constexpr double kProgressIntervalSeconds = 0.25;

enum class ProgressUnit { Bytes, Tensors };

// Where a progress line goes; tests substitute a fake terminal and clock.
struct ProgressSink {
  bool is_terminal = false;
  std::function<double()> seconds;              // a monotonic clock
  std::function<void(std::string_view)> write;  // unbuffered output
};

// The process's stderr: a terminal when isatty(2), the steady clock, fwrite.
ProgressSink stderr_progress_sink();

class ProgressLine {
 public:
  // `label` starts the line ("loading", "quantizing").
  explicit ProgressLine(std::string label, ProgressSink sink = stderr_progress_sink());
  ~ProgressLine();
  ProgressLine(const ProgressLine&) = delete;
  ProgressLine& operator=(const ProgressLine&) = delete;

  // Starts a stage of the job (the delay still counts from the job's start): `stage` names it
  // ("" for a job of one stage), `total` is what advance() counts up to in `unit` (0 when
  // unknown: the line then names the stage only).
  void start(std::string stage, uint64_t total, ProgressUnit unit);
  void advance(uint64_t amount);
  // Erases the line if it is shown.
  void clear();

  bool shown() const { return width_ > 0; }

 private:
  void draw(bool force);

  std::string label_, stage_;
  ProgressSink sink_;
  ProgressUnit unit_ = ProgressUnit::Bytes;
  uint64_t total_ = 0, done_ = 0;
  double job_start_ = 0, stage_start_ = 0, last_draw_ = 0;
  size_t width_ = 0;  // characters of the line on screen (0: nothing shown)
};

// The line's text (without "\r" or padding): `seconds` is the time since the stage started.
// Exposed for tests.
std::string progress_text(std::string_view label, std::string_view stage, uint64_t done, uint64_t total,
                          ProgressUnit unit, double seconds);

}  // namespace mb
