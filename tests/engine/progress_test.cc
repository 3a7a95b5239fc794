// SPDX-License-Identifier: MIT
// ProgressLine (core/progress.h) against a fake terminal and clock: silence where stderr is no
// terminal and for short jobs, the text of the line, its redraw rate and its erasure.
#include "core/progress.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace mb {
namespace {

struct FakeTerminal {
  double now = 100.0;
  int clock_reads = 0;
  std::vector<std::string> writes;

  ProgressSink sink(bool terminal) {
    return {terminal,
            [this] {
              ++clock_reads;
              return now;
            },
            [this](std::string_view text) { writes.emplace_back(text); }};
  }
};

// "\r", `text`, then spaces up to `width` characters.
std::string drawn(const std::string& text, size_t width) {
  std::string line = "\r";
  line += text;
  line.append(width - text.size(), ' ');
  return line;
}

TEST(ProgressLine, SilentWhereStderrIsNoTerminal) {
  FakeTerminal fake;
  {
    ProgressLine line("loading", fake.sink(false));
    line.start("", 1000, ProgressUnit::Bytes);
    for (int i = 0; i < 10; ++i) {
      fake.now += 5.0;
      line.advance(100);
    }
    EXPECT_FALSE(line.shown());
  }
  EXPECT_TRUE(fake.writes.empty());
  EXPECT_EQ(fake.clock_reads, 0);
}

TEST(ProgressLine, SilentForJobsShorterThanTheDelay) {
  FakeTerminal fake;
  {
    ProgressLine line("loading", fake.sink(true));
    line.start("", 1000, ProgressUnit::Bytes);
    for (int i = 0; i < 10; ++i) {
      fake.now += 0.19;
      line.advance(100);
    }
  }
  EXPECT_TRUE(fake.writes.empty());
}

TEST(ProgressLine, DrawsAfterTheDelayAtMostEveryIntervalAndErasesItself) {
  FakeTerminal fake;
  {
    ProgressLine line("loading", fake.sink(true));
    line.start("", 516'600'000, ProgressUnit::Bytes);
    fake.now += 1.0;
    line.advance(100'000'000);
    EXPECT_TRUE(fake.writes.empty());
    fake.now += 1.5;  // 2.5 s: past the delay
    line.advance(113'400'000);
    ASSERT_EQ(fake.writes.size(), 1u);
    EXPECT_EQ(fake.writes[0], "\rloading: 213.4 / 516.6 MB (41%), 85.4 MB/s, ETA 4 s");
    EXPECT_TRUE(line.shown());
    fake.now += 0.1;  // within the redraw interval
    line.advance(1'000'000);
    EXPECT_EQ(fake.writes.size(), 1u);
    fake.now += 0.4;
    line.advance(302'200'000);  // all done: no ETA
    ASSERT_EQ(fake.writes.size(), 2u);
    const std::string done_text = "loading: 516.6 / 516.6 MB (100%), 172.2 MB/s";
    EXPECT_EQ(fake.writes[1], drawn(done_text, fake.writes[0].size() - 1));
    // A new stage draws at once; the shorter text is padded over the longer one.
    line.start("writing", 0, ProgressUnit::Bytes);
    ASSERT_EQ(fake.writes.size(), 3u);
    const std::string stage_text = "loading: writing";
    EXPECT_EQ(fake.writes[2], drawn(stage_text, fake.writes[0].size() - 1));
  }
  ASSERT_EQ(fake.writes.size(), 4u);  // the destructor erases the line
  const size_t width = fake.writes[0].size() - 1;
  EXPECT_EQ(fake.writes[3], drawn("", width) + "\r");
}

TEST(ProgressLine, ClearErasesOnceAndOnlyWhatWasShown) {
  FakeTerminal fake;
  ProgressLine line("quantizing", fake.sink(true));
  line.clear();
  EXPECT_TRUE(fake.writes.empty());
  fake.now += 3.0;
  line.start("", 10, ProgressUnit::Tensors);
  ASSERT_EQ(fake.writes.size(), 1u);
  line.clear();
  line.clear();
  ASSERT_EQ(fake.writes.size(), 2u);
  EXPECT_EQ(fake.writes[1], drawn("", fake.writes[0].size() - 1) + "\r");
  EXPECT_FALSE(line.shown());
}

TEST(ProgressText, Formats) {
  EXPECT_EQ(progress_text("loading", "", 213'400'000, 516'600'000, ProgressUnit::Bytes, 2.5),
            "loading: 213.4 / 516.6 MB (41%), 85.4 MB/s, ETA 4 s");
  EXPECT_EQ(progress_text("quantizing", "", 12, 123, ProgressUnit::Tensors, 3.0),
            "quantizing: 12 / 123 tensors (9%), 4.0 tensors/s, ETA 28 s");
  EXPECT_EQ(progress_text("make-model", "writing model.safetensors", 0, 0, ProgressUnit::Bytes, 12.2),
            "make-model: writing model.safetensors");
  EXPECT_EQ(progress_text("x", "drawing", 1, 1000, ProgressUnit::Bytes, 1.0),
            "x: drawing 0.0 / 1.0 kB (0%), 1 B/s, ETA 16 min 39 s");
  EXPECT_EQ(progress_text("x", "", 1, 10000, ProgressUnit::Tensors, 1.0),
            "x: 1 / 10000 tensors (0%), 1.0 tensors/s, ETA 2 h 46 min");
  EXPECT_EQ(progress_text("x", "", 500, 999, ProgressUnit::Bytes, 0.0), "x: 500 / 999 B (50%)");
  EXPECT_EQ(progress_text("x", "", 12, 10, ProgressUnit::Tensors, 1.0),
            "x: 10 / 10 tensors (100%), 10.0 tensors/s");
  EXPECT_EQ(progress_text("x", "", 3'000'000'000, 10'800'000'000, ProgressUnit::Bytes, 30.0),
            "x: 3.0 / 10.8 GB (27%), 100.0 MB/s, ETA 1 min 18 s");
}

}  // namespace
}  // namespace mb
