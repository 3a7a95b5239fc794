// SPDX-License-Identifier: MIT
#include "core/progress.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>

namespace mb {
namespace {

// "4 s", "2 min 05 s", "1 h 02 min" (whole seconds, rounded up: an ETA never says 0 s too early).
std::string duration_text(double seconds) {
  const int64_t s = static_cast<int64_t>(std::ceil(std::max(0.0, seconds)));
  char text[48];
  if (s < 60)
    std::snprintf(text, sizeof text, "%lld s", static_cast<long long>(s));
  else if (s < 3600)
    std::snprintf(text, sizeof text, "%lld min %02lld s", static_cast<long long>(s / 60),
                  static_cast<long long>(s % 60));
  else
    std::snprintf(text, sizeof text, "%lld h %02lld min", static_cast<long long>(s / 3600),
                  static_cast<long long>(s / 60 % 60));
  return text;
}

// The decimal unit `bytes` reads best in: its divisor and name.
std::pair<double, const char*> byte_unit(double bytes) {
  static const char* const names[] = {"B", "kB", "MB", "GB", "TB"};
  double divisor = 1;
  int unit = 0;
  while (unit < 4 && bytes >= 1000 * divisor) {
    divisor *= 1000;
    ++unit;
  }
  return {divisor, names[unit]};
}

std::string byte_text(double bytes, double divisor) {
  char text[32];
  std::snprintf(text, sizeof text, divisor == 1 ? "%.0f" : "%.1f", bytes / divisor);
  return text;
}

}  // namespace

std::string progress_text(std::string_view label, std::string_view stage, uint64_t done, uint64_t total,
                          ProgressUnit unit, double seconds) {
  std::string text(label);
  text += ':';
  if (!stage.empty()) {
    text += ' ';
    text += stage;
  }
  // Without a total there is nothing to count (a single blocking write): the stage alone.
  if (total == 0) return text;
  text += ' ';
  done = std::min(done, total);
  const double rate = seconds > 0 ? static_cast<double>(done) / seconds : 0.0;
  if (unit == ProgressUnit::Bytes) {
    const auto [divisor, name] = byte_unit(static_cast<double>(total));
    text += byte_text(static_cast<double>(done), divisor) + " / " +
            byte_text(static_cast<double>(total), divisor);
    text += ' ';
    text += name;
  } else {
    text += std::to_string(done) + " / " + std::to_string(total) + " tensors";
  }
  text += " (" + std::to_string(done * 100 / total) + "%)";
  if (rate > 0) {
    if (unit == ProgressUnit::Bytes) {
      const auto [divisor, name] = byte_unit(rate);
      text += ", " + byte_text(rate, divisor) + " " + name + "/s";
    } else {
      char per_second[48];
      std::snprintf(per_second, sizeof per_second, ", %.1f tensors/s", rate);
      text += per_second;
    }
    if (done < total) text += ", ETA " + duration_text(static_cast<double>(total - done) / rate);
  }
  return text;
}

ProgressSink stderr_progress_sink() {
  ProgressSink sink;
  sink.is_terminal = ::isatty(STDERR_FILENO) == 1;
  sink.seconds = [] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
  };
  sink.write = [](std::string_view text) {
    std::fwrite(text.data(), 1, text.size(), stderr);
    std::fflush(stderr);
  };
  return sink;
}

ProgressLine::ProgressLine(std::string label, ProgressSink sink)
    : label_(std::move(label)), sink_(std::move(sink)) {
  // A sink that is no terminal is never asked for the time either.
  if (sink_.is_terminal) job_start_ = stage_start_ = sink_.seconds();
}

ProgressLine::~ProgressLine() {
  clear();
}

void ProgressLine::start(std::string stage, uint64_t total, ProgressUnit unit) {
  stage_ = std::move(stage);
  total_ = total;
  unit_ = unit;
  done_ = 0;
  if (!sink_.is_terminal) return;
  stage_start_ = sink_.seconds();
  draw(true);
}

void ProgressLine::advance(uint64_t amount) {
  done_ += amount;
  draw(false);
}

void ProgressLine::clear() {
  if (width_ == 0) return;
  std::string blank(width_ + 2, ' ');
  blank.front() = blank.back() = '\r';
  sink_.write(blank);
  width_ = 0;
}

void ProgressLine::draw(bool force) {
  if (!sink_.is_terminal) return;
  const double now = sink_.seconds();
  if (now - job_start_ < kProgressDelaySeconds) return;
  if (!force && width_ > 0 && now - last_draw_ < kProgressIntervalSeconds) return;
  last_draw_ = now;
  const std::string text = progress_text(label_, stage_, done_, total_, unit_, now - stage_start_);
  // Spaces cover the rest of a longer line drawn before.
  std::string line = "\r";
  line += text;
  if (width_ > text.size()) line.append(width_ - text.size(), ' ');
  sink_.write(line);
  width_ = std::max(width_, text.size());
}

}  // namespace mb
