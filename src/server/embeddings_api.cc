// SPDX-License-Identifier: MIT
#include "server/embeddings_api.h"

#include <bit>
#include <limits>

#include "server/openai_api.h"

namespace mb::server {

using json = nlohmann::json;

namespace {

// Counts an input's tokens against the request's limits, naming the input that passes one.
void charge_tokens(size_t index, size_t count, const EmbeddingsLimits& limits, int64_t& total) {
  const std::string which = "input[" + std::to_string(index) + "]";
  if (count == 0) throw invalid_request(which + " is empty: every input needs at least one token");
  if (limits.max_input_tokens > 0 && static_cast<int64_t>(count) > limits.max_input_tokens)
    throw invalid_request(which + " has " + std::to_string(count) +
                          " tokens, more than the context limit of " +
                          std::to_string(limits.max_input_tokens) + " tokens per input (-c)");
  total += static_cast<int64_t>(count);
  if (total > limits.max_total_tokens)
    throw invalid_request("the inputs hold more than " + std::to_string(limits.max_total_tokens) +
                          " tokens in all (the limit per embeddings request); send them in smaller requests");
}

std::vector<int32_t> ids_of(const json& list, size_t index, int64_t vocab_size) {
  std::vector<int32_t> ids;
  ids.reserve(list.size());
  for (const json& id : list) {
    if (!id.is_number_integer())
      throw invalid_request("input[" + std::to_string(index) + "] must hold only integer token ids, found " +
                            std::string(id.type_name()));
    const int64_t value = id.is_number_unsigned() && id.get<uint64_t>() > uint64_t{INT64_MAX}
                              ? std::numeric_limits<int64_t>::max()
                              : id.get<int64_t>();
    if (value < 0 || value >= vocab_size)
      throw invalid_request("input[" + std::to_string(index) + "]: token id " + std::to_string(value) +
                            " is outside the vocabulary [0, " + std::to_string(vocab_size) + ")");
    ids.push_back(static_cast<int32_t>(value));
  }
  return ids;
}

std::vector<int32_t> text_ids(const json& text, size_t index, const EmbeddingsModel& model) {
  const auto& s = text.get_ref<const std::string&>();
  if (s.empty()) throw invalid_request("input[" + std::to_string(index) + "] is an empty string");
  if (model.tokenizer == nullptr)
    throw invalid_request("this server has no tokenizer: send token ids as input, not text");
  return model.tokenizer->encode(s);
}

// The inputs as token sequences: each input is checked against the limits as it is read, so a
// request far past them is refused before most of it is tokenized.
std::vector<std::vector<int32_t>> read_inputs(const json& input, const EmbeddingsModel& model,
                                              const EmbeddingsLimits& limits, int64_t& total) {
  std::vector<std::vector<int32_t>> inputs;
  const auto add = [&](std::vector<int32_t> ids) {
    charge_tokens(inputs.size(), ids.size(), limits, total);
    inputs.push_back(std::move(ids));
  };
  if (input.is_string()) {
    add(text_ids(input, 0, model));
    return inputs;
  }
  if (!input.is_array())
    throw invalid_request(
        "'input' must be a string, a list of strings, a list of token ids or a list of lists of "
        "token ids, not " +
        std::string(input.type_name()));
  if (input.empty()) throw invalid_request("'input' is an empty list: give at least one input");
  // A list of integers is one input; a list of strings or of lists is one input per element.
  if (input.front().is_number()) {
    add(ids_of(input, 0, model.vocab_size));
    return inputs;
  }
  if (input.size() > limits.max_inputs)
    throw invalid_request("'input' holds " + std::to_string(input.size()) +
                          " inputs, more than the limit of " + std::to_string(limits.max_inputs) +
                          " per request");
  const bool texts = input.front().is_string();
  for (size_t i = 0; i < input.size(); ++i) {
    const json& item = input[i];
    if (texts && item.is_string()) {
      add(text_ids(item, i, model));
    } else if (!texts && item.is_array()) {
      add(ids_of(item, i, model.vocab_size));
    } else {
      throw invalid_request("input[" + std::to_string(i) + "] is " + std::string(item.type_name()) +
                            ": a list of inputs holds only strings or only lists of token ids");
    }
  }
  return inputs;
}

}  // namespace

EmbeddingsRequest parse_embeddings_request(std::string_view body, const EmbeddingsModel& model,
                                           const EmbeddingsLimits& limits, const std::string& model_id) {
  const json request = parse_request_body(body);
  EmbeddingsRequest result;
  result.model = model_id;
  if (const auto it = request.find("model"); it != request.end() && !it->is_null()) {
    if (!it->is_string()) throw invalid_request("'model' must be a string");
    result.model = it->get<std::string>();
  }
  if (const auto it = request.find("encoding_format"); it != request.end() && !it->is_null()) {
    if (!it->is_string() || (*it != "float" && *it != "base64"))
      throw invalid_request("'encoding_format' must be \"float\" or \"base64\", got " + it->dump());
    result.base64 = *it == "base64";
  }
  if (const auto it = request.find("dimensions"); it != request.end() && !it->is_null()) {
    if (!it->is_number_integer() || *it != model.d_model)
      throw invalid_request("'dimensions' must equal the model's embedding width, " +
                            std::to_string(model.d_model) + " (this model cannot shorten its vectors), got " +
                            it->dump());
  }
  const auto input = request.find("input");
  if (input == request.end() || input->is_null()) throw invalid_request("'input' is required");
  result.inputs = read_inputs(*input, model, limits, result.prompt_tokens);
  return result;
}

void add_embeddings_meta(json& models, const EmbeddingsModel& model, Pooling pooling) {
  if (model.d_model == 0) return;
  for (json& entry : models["data"]) {
    entry["meta"]["n_embd"] = model.d_model;
    entry["meta"]["pooling"] = pooling_name(pooling);
  }
}

std::string base64_floats(const std::vector<float>& values) {
  static constexpr char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::vector<uint8_t> bytes;
  bytes.reserve(values.size() * 4);
  for (float v : values) {
    const auto bits = std::bit_cast<uint32_t>(v);
    for (int shift = 0; shift < 32; shift += 8) bytes.push_back(static_cast<uint8_t>(bits >> shift));
  }
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  for (size_t i = 0; i < bytes.size(); i += 3) {
    const size_t n = std::min<size_t>(3, bytes.size() - i);
    const uint32_t group = (uint32_t{bytes[i]} << 16) | (n > 1 ? uint32_t{bytes[i + 1]} << 8 : 0) |
                           (n > 2 ? uint32_t{bytes[i + 2]} : 0);
    out += kAlphabet[(group >> 18) & 63];
    out += kAlphabet[(group >> 12) & 63];
    out += n > 1 ? kAlphabet[(group >> 6) & 63] : '=';
    out += n > 2 ? kAlphabet[group & 63] : '=';
  }
  return out;
}

json embeddings_response(const EmbeddingsRequest& request,
                         const std::vector<std::vector<float>>& embeddings) {
  json data = json::array();
  for (size_t i = 0; i < embeddings.size(); ++i) {
    json vector = request.base64 ? json(base64_floats(embeddings[i])) : json(embeddings[i]);
    data.push_back({{"object", "embedding"}, {"index", i}, {"embedding", std::move(vector)}});
  }
  return {{"object", "list"},
          {"data", std::move(data)},
          {"model", request.model},
          {"usage", {{"prompt_tokens", request.prompt_tokens}, {"total_tokens", request.prompt_tokens}}}};
}

}  // namespace mb::server
