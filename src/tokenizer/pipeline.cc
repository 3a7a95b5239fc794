#include "tokenizer/pipeline.h"

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "tokenizer/byte_level.h"

namespace mb::tok {

namespace {

using nlohmann::json;

std::string type_of(const json& config, const std::string& source, const char* stage) {
  if (!config.is_object()) throw Error(source + ": " + stage + " must be an object or null");
  const auto it = config.find("type");
  if (it == config.end() || !it->is_string()) throw Error(source + ": " + stage + " has no string 'type'");
  return it->get<std::string>();
}

bool bool_field(const json& config, const char* key, bool fallback, const std::string& source,
                const char* stage) {
  const auto it = config.find(key);
  if (it == config.end() || it->is_null()) return fallback;
  if (!it->is_boolean()) throw Error(source + ": " + stage + " field '" + key + "' must be a boolean");
  return it->get<bool>();
}

const json& array_field(const json& config, const char* key, const std::string& source, const char* stage) {
  const auto it = config.find(key);
  if (it == config.end() || !it->is_array()) {
    throw Error(source + ": " + stage + " Sequence needs an array '" + key + "'");
  }
  return *it;
}

void parse_normalizer(const json& config, const std::string& source, std::vector<NormalForm>& forms) {
  if (config.is_null()) return;
  const std::string type = type_of(config, source, "normalizer");
  if (type == "NFC") {
    forms.push_back(NormalForm::NFC);
  } else if (type == "NFD") {
    forms.push_back(NormalForm::NFD);
  } else if (type == "NFKC") {
    forms.push_back(NormalForm::NFKC);
  } else if (type == "NFKD") {
    forms.push_back(NormalForm::NFKD);
  } else if (type == "Sequence") {
    for (const json& step : array_field(config, "normalizers", source, "normalizer")) {
      parse_normalizer(step, source, forms);
    }
  } else {
    throw Error(source + ": unsupported normalizer type '" + type +
                "' (supported: NFC, NFD, NFKC, NFKD, Sequence)");
  }
}

void parse_pre_tokenizer(const json& config, const std::string& source,
                         std::vector<std::variant<SplitStep, ByteLevelStep>>& steps) {
  if (config.is_null()) return;
  const char* stage = "pre_tokenizer";
  const std::string type = type_of(config, source, stage);
  if (type == "ByteLevel") {
    steps.emplace_back(ByteLevelStep{bool_field(config, "add_prefix_space", true, source, stage),
                                     bool_field(config, "use_regex", true, source, stage)});
  } else if (type == "Split") {
    const auto pattern = config.find("pattern");
    if (pattern == config.end() || !pattern->is_object() || !pattern->contains("Regex") ||
        !pattern->at("Regex").is_string()) {
      throw Error(
          source +
          ": Split pre-tokenizer needs a {\"Regex\": ...} pattern (string patterns are not supported)");
    }
    const std::string regex = pattern->at("Regex").get<std::string>();
    const auto recognized = recognize_split_pattern(regex);
    if (!recognized) {
      throw Error(source + ": unsupported Split regex '" + regex +
                  "' (supported: the GPT-2, Llama-3 and Qwen2 patterns)");
    }
    const auto behavior = config.find("behavior");
    if (behavior != config.end() && *behavior != "Isolated") {
      throw Error(source + ": unsupported Split behavior " + behavior->dump() +
                  " (only \"Isolated\" is supported)");
    }
    if (bool_field(config, "invert", false, source, stage)) {
      throw Error(source + ": inverted Split pre-tokenizers are not supported");
    }
    steps.emplace_back(SplitStep{*recognized});
  } else if (type == "Sequence") {
    for (const json& step : array_field(config, "pretokenizers", source, stage)) {
      parse_pre_tokenizer(step, source, steps);
    }
  } else {
    throw Error(source + ": unsupported pre_tokenizer type '" + type +
                "' (supported: ByteLevel, Split, Sequence)");
  }
}

void apply_step(const SplitStep& step, std::string_view piece, std::vector<std::string>& out) {
  std::vector<std::string_view> parts;
  split_isolated(piece, step.pattern, parts);
  for (std::string_view part : parts) out.emplace_back(part);
}

void apply_step(const ByteLevelStep& step, std::string_view piece, std::vector<std::string>& out) {
  std::string prefixed;
  if (step.add_prefix_space && (piece.empty() || piece.front() != ' ')) {
    prefixed = " ";
    prefixed += piece;
    piece = prefixed;
  }
  std::vector<std::string_view> parts;
  if (step.use_regex) {
    split_isolated(piece, SplitPattern::Gpt2, parts);
  } else if (!piece.empty()) {
    parts.push_back(piece);
  }
  for (std::string_view part : parts) {
    std::string mapped;
    mapped.reserve(part.size() * 2);
    append_byte_level(mapped, part);
    out.push_back(std::move(mapped));
  }
}

}  // namespace

Normalizer Normalizer::from_json(const json& config, const std::string& source) {
  Normalizer normalizer;
  parse_normalizer(config, source, normalizer.forms_);
  return normalizer;
}

std::string Normalizer::apply(std::string_view valid_text) const {
  std::string text(valid_text);
  for (NormalForm form : forms_) text = normalize(text, form);
  return text;
}

PreTokenizer PreTokenizer::from_json(const json& config, const std::string& source) {
  PreTokenizer pre_tokenizer;
  parse_pre_tokenizer(config, source, pre_tokenizer.steps_);
  return pre_tokenizer;
}

PreTokenizer PreTokenizer::gpt2() {
  PreTokenizer pre_tokenizer;
  pre_tokenizer.steps_.emplace_back(ByteLevelStep{false, true});
  return pre_tokenizer;
}

void PreTokenizer::apply(std::string_view text, std::vector<std::string>& words) const {
  if (text.empty()) return;
  std::vector<std::string> pieces{std::string(text)};
  std::vector<std::string> next;
  for (const auto& step : steps_) {
    next.clear();
    for (const std::string& piece : pieces) {
      std::visit([&](const auto& s) { apply_step(s, piece, next); }, step);
    }
    pieces.swap(next);
  }
  for (std::string& piece : pieces) {
    if (!piece.empty()) words.push_back(std::move(piece));
  }
}

DecoderKind decoder_from_json(const json& config, const std::string& source) {
  if (config.is_null()) return DecoderKind::JoinWithSpaces;
  const std::string type = type_of(config, source, "decoder");
  if (type == "ByteLevel") return DecoderKind::ByteLevel;
  if (type == "Sequence") {
    const json& steps = array_field(config, "decoders", source, "decoder");
    if (steps.empty()) throw Error(source + ": the decoder Sequence is empty");
    for (const json& step : steps) {
      if (decoder_from_json(step, source) != DecoderKind::ByteLevel) {
        throw Error(source + ": a decoder Sequence may only contain ByteLevel decoders");
      }
    }
    return DecoderKind::ByteLevel;
  }
  throw Error(source + ": unsupported decoder type '" + type +
              "' (supported: ByteLevel, Sequence of ByteLevel)");
}

}  // namespace mb::tok
