// SPDX-License-Identifier: MIT
#include "tokenizer/decoder.h"

#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <optional>

#include "core/error.h"
#include "tokenizer/pipeline.h"
#include "tokenizer/pipeline_json.h"
#include "tokenizer/pipeline_limits.h"
#include "tokenizer/utf8.h"

namespace mb::tok {

namespace {

using nlohmann::json;

constexpr const char* kStage = "decoder";
constexpr std::string_view kReplacementUtf8 = "\xEF\xBF\xBD";

// How Hugging Face's ByteFallback decoder recognises a byte token: exactly six bytes, "<0x",
// two characters that u8::from_str_radix(.., 16) accepts (which allows a leading '+'), ">".
std::optional<unsigned char> byte_fallback_value(std::string_view token) {
  if (token.size() != 6 || !token.starts_with("<0x") || token.back() != '>') return std::nullopt;
  const auto digit = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  const char high = token[3];
  const int low = digit(token[4]);
  if (low < 0) return std::nullopt;
  if (high == '+') return static_cast<unsigned char>(low);
  if (digit(high) < 0) return std::nullopt;
  return static_cast<unsigned char>(digit(high) * 16 + low);
}

// A step that needs each token whole, as opposed to the pieces of it a stream may hand on.
bool needs_whole_tokens(const DecodeStep& step) {
  if (std::holds_alternative<ByteFallbackDecodeStep>(step)) return true;
  if (const auto* replace = std::get_if<ReplaceDecodeStep>(&step)) {
    size_t pos = 0;
    next_code_point(replace->pattern, pos);
    return pos != replace->pattern.size();
  }
  return false;
}

// Returns false for ByteLevel, which only combines with other ByteLevel decoders. `depth` counts
// the Sequences around `config`.
bool parse_step(const json& config, const std::string& source, std::vector<DecodeStep>& steps,
                int depth = 0) {
  const std::string type = stage_type(config, source, kStage);
  if (type == "ByteLevel") return false;
  if (type == "Sequence") {
    const json& decoders = array_field(config, "decoders", source, kStage);
    if (decoders.empty()) throw Error(source + ": a decoder Sequence is empty");
    check_sequence(source, kStage, decoders.size(), depth + 1);
    bool all_byte_level = true;
    bool any_byte_level = false;
    for (const json& step : decoders) {
      const bool chain_step = parse_step(step, source, steps, depth + 1);
      check_step_count(source, kStage, steps.size());
      all_byte_level = all_byte_level && !chain_step;
      any_byte_level = any_byte_level || !chain_step;
    }
    if (any_byte_level && !all_byte_level) {
      throw Error(source + ": a decoder Sequence may not mix ByteLevel with other decoders");
    }
    return !all_byte_level;
  }
  if (type == "Replace") {
    steps.emplace_back(ReplaceDecodeStep{string_pattern(config, source, kStage),
                                         string_field(config, "content", source, kStage)});
  } else if (type == "ByteFallback") {
    steps.emplace_back(ByteFallbackDecodeStep{});
  } else if (type == "Fuse") {
    steps.emplace_back(FuseDecodeStep{});
  } else if (type == "Strip") {
    steps.emplace_back(StripDecodeStep{char_field(config, "content", source, kStage),
                                       count_field(config, "start", source, kStage),
                                       count_field(config, "stop", source, kStage)});
  } else if (type == "Metaspace") {
    const MetaspaceOptions options = metaspace_options(config, source, kStage);
    steps.emplace_back(MetaspaceDecodeStep{options.replacement, options.prepend != PrependScheme::Never});
  } else {
    throw Error(source + ": unsupported decoder type '" + type +
                "' (supported: ByteLevel, Replace, ByteFallback, Fuse, Strip, Metaspace, Sequence)");
  }
  return true;
}

// Hugging Face's Strip on one token. Where the two cuts would cross (a token of only `content`
// characters, shorter than start + stop), Hugging Face panics; the result here is empty.
std::string strip_whole_token(const StripDecodeStep& strip, const std::string& token) {
  std::vector<size_t> starts;  // byte offset of every character, then the end
  for (size_t pos = 0; pos < token.size();) {
    starts.push_back(pos);
    next_code_point(token, pos);
  }
  const size_t count = starts.size();
  starts.push_back(token.size());
  const auto is_content = [&](size_t i) {
    size_t pos = starts[i];
    return next_code_point(token, pos) == strip.content;
  };
  size_t first = 0;
  while (first < std::min(strip.start, count) && is_content(first)) ++first;
  size_t end = count;
  while (count - end < strip.stop && end > 0 && is_content(end - 1)) --end;
  if (end <= first) return std::string();
  return token.substr(starts[first], starts[end] - starts[first]);
}

// Every decoder step but Replace keeps or shrinks the text, and a Replace grows it at most by its
// content's length over its pattern's (occurrences do not overlap), so the product bounds what
// a chain makes of a token; the decoder has no budget of its own to stop a chain that doubles
// each token's text at every step.
void check_replace_growth(const std::vector<DecodeStep>& steps, const std::string& source) {
  double growth = 1.0;
  for (const DecodeStep& step : steps) {
    if (const auto* replace = std::get_if<ReplaceDecodeStep>(&step))
      growth *= std::max(1.0, static_cast<double>(replace->content.size()) / replace->pattern.size());
  }
  if (growth > static_cast<double>(kMaxPipelineGrowth)) {
    char factor[32];
    std::snprintf(factor, sizeof factor, "%.3g", growth);
    throw Error(source + ": the decoder's Replace steps can make a token's text " + factor +
                " times longer, more than " + std::to_string(kMaxPipelineGrowth));
  }
}

}  // namespace

Decoder Decoder::from_json(const json& config, const std::string& source) {
  if (config.is_null()) return Decoder{};
  Decoder decoder;
  if (!parse_step(config, source, decoder.steps)) return byte_level();
  decoder.kind = DecoderKind::Chain;
  check_replace_growth(decoder.steps, source);
  bool fused = false;
  for (const DecodeStep& step : decoder.steps) {
    if (fused && needs_whole_tokens(step)) {
      throw Error(source +
                  ": unsupported decoder order: ByteFallback, or a Replace of more than one character, "
                  "after Fuse");
    }
    fused = fused || std::holds_alternative<FuseDecodeStep>(step);
  }
  return decoder;
}

ChainDecodeStream::ChainDecodeStream(const std::vector<DecodeStep>& steps)
    : steps_(&steps), states_(steps.size()), fused_before_(steps.size(), false) {
  for (size_t step = 1; step < steps.size(); ++step) {
    fused_before_[step] = fused_before_[step - 1] || std::holds_alternative<FuseDecodeStep>(steps[step - 1]);
  }
}

void ChainDecodeStream::push(std::string_view token, std::string& out) {
  feed(0, std::string(token), true, out);
}

void ChainDecodeStream::finish(std::string& out) {
  // Each step's held text goes through the steps after it before those are flushed in turn.
  for (size_t step = 0; step < steps_->size(); ++step) flush(step, out);
}

void ChainDecodeStream::flush(size_t step, std::string& out) {
  StepState& state = states_[step];
  const DecodeStep& config = (*steps_)[step];
  if (std::holds_alternative<ByteFallbackDecodeStep>(config)) {
    if (state.fallback_count == 0) return;
    std::string bytes = std::move(state.fallback_bytes);
    const size_t count = state.fallback_count;
    state.fallback_bytes.clear();
    state.fallback_count = 0;
    // Like Hugging Face: the run becomes one token when it is valid UTF-8 as a whole, and
    // otherwise one U+FFFD per byte, even where part of the run would form valid characters.
    if (is_valid_utf8(bytes)) {
      feed(step + 1, std::move(bytes), true, out);
    } else {
      for (size_t i = 0; i < count; ++i) feed(step + 1, std::string(kReplacementUtf8), true, out);
    }
  } else if (const auto* strip = std::get_if<StripDecodeStep>(&config)) {
    // The token has ended: its last `stop` held characters were trailing and are dropped.
    const size_t keep = state.held_count - std::min(state.held_count, strip->stop);
    std::string kept;
    for (size_t i = 0; i < keep; ++i) append_utf8(kept, strip->content);
    state.held.clear();
    state.held_count = 0;
    if (!kept.empty()) feed(step + 1, std::move(kept), false, out);
  }
}

void ChainDecodeStream::feed(size_t step, std::string text, bool starts_token, std::string& out) {
  if (step == steps_->size()) {
    out += text;
    return;
  }
  StepState& state = states_[step];
  const DecodeStep& config = (*steps_)[step];
  if (const auto* replace = std::get_if<ReplaceDecodeStep>(&config)) {
    replace_all(text, replace->pattern, replace->content);
    feed(step + 1, std::move(text), starts_token, out);
  } else if (std::holds_alternative<ByteFallbackDecodeStep>(config)) {
    if (const auto byte = byte_fallback_value(text)) {
      state.fallback_bytes.push_back(static_cast<char>(*byte));
      ++state.fallback_count;
      return;
    }
    flush(step, out);
    feed(step + 1, std::move(text), starts_token, out);
  } else if (std::holds_alternative<FuseDecodeStep>(config)) {
    const bool first = state.tokens_seen == 0;
    state.tokens_seen = 1;
    feed(step + 1, std::move(text), first, out);
  } else if (const auto* strip = std::get_if<StripDecodeStep>(&config)) {
    if (!fused_before_[step]) {
      // Before any Fuse every piece is a whole token, stripped at once.
      feed(step + 1, strip_whole_token(*strip, text), starts_token, out);
      return;
    }
    if (starts_token) {
      flush(step, out);
      state.leading_left = strip->start;
    }
    std::string kept;
    size_t pos = 0;
    while (pos < text.size()) {
      const size_t begin = pos;
      const char32_t c = next_code_point(text, pos);
      if (state.leading_left > 0 && c == strip->content) {
        --state.leading_left;
        continue;
      }
      state.leading_left = 0;
      if (strip->stop > 0 && c == strip->content) {
        state.held.append(text, begin, pos - begin);
        ++state.held_count;
        continue;
      }
      kept += state.held;
      state.held.clear();
      state.held_count = 0;
      kept.append(text, begin, pos - begin);
    }
    // A token the strip empties still counts as a token for the steps after it.
    if (starts_token || !kept.empty()) feed(step + 1, std::move(kept), starts_token, out);
  } else if (const auto* metaspace = std::get_if<MetaspaceDecodeStep>(&config)) {
    if (starts_token) ++state.tokens_seen;
    const bool drop = metaspace->drop_in_first_token && state.tokens_seen == 1;
    std::string replaced;
    size_t pos = 0;
    while (pos < text.size()) {
      const size_t begin = pos;
      const char32_t c = next_code_point(text, pos);
      if (c != metaspace->replacement) {
        replaced.append(text, begin, pos - begin);
      } else if (!drop) {
        replaced.push_back(' ');
      }
    }
    feed(step + 1, std::move(replaced), starts_token, out);
  }
}

}  // namespace mb::tok
