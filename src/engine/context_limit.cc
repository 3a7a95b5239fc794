// SPDX-License-Identifier: MIT
#include "engine/context_limit.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "core/error.h"
#include "core/json_text.h"
#include "io/file_io.h"
#include "io/gguf.h"
#include "model/gguf_checkpoint.h"

namespace mb {
namespace {

std::string mib(uint64_t bytes) {
  return std::to_string(bytes >> 20) + " MiB";
}

}  // namespace

ContextLimit default_context_limit(const Model& model, int64_t slots, uint64_t available_bytes,
                                   int64_t trained) {
  int64_t floats_per_position = 0;
  for (int64_t floats : model.state_layout().shape().growing) floats_per_position += floats;
  if (floats_per_position == 0)
    return {0, "the model's state does not grow with the context; replies stop at max_tokens"};
  if (available_bytes == 0) {
    if (trained > 0) return {trained, "the model's max_position_embeddings"};
    return {kUnknownMemoryContext, "a fixed default: the free memory is unknown"};
  }
  // Half of what is free, for the states of every slot at once: the rest is the weights' pages, the
  // prefix cache and the scratch, and other processes.
  const uint64_t per_position = static_cast<uint64_t>(floats_per_position) * sizeof(float);
  const uint64_t per_slot = available_bytes / 2 / static_cast<uint64_t>(std::max<int64_t>(slots, 1));
  const int64_t fits = std::max<int64_t>(
      kMinDefaultContext, static_cast<int64_t>(std::min<uint64_t>(per_slot / per_position, INT32_MAX)));
  if (trained > 0 && trained <= fits) return {trained, "the model's max_position_embeddings"};
  std::string source = "half of the " + mib(available_bytes) + " of free memory over " +
                       std::to_string(slots) + " slot(s), " + std::to_string(per_position) +
                       " bytes of state per token";
  if (trained > 0)
    source += "; the model's max_position_embeddings " + std::to_string(trained) + " would not fit";
  return {fits, source};
}

int64_t trained_context_length(const std::string& model_path) {
  std::error_code error;
  if (is_gguf_file(model_path)) {
    try {
      // llama.cpp's converter writes the config's max_position_embeddings, or 2^20 ("unlimited")
      // for the hybrids without RoPE, which says nothing about what the model was trained on.
      const GgufFile file(model_path);
      const auto length =
          file.unsigned_if_present(file.string_value("general.architecture") + ".context_length");
      return length && *length > 0 && *length < (uint64_t{1} << 20) ? static_cast<int64_t>(*length) : 0;
    } catch (const Error&) {
      return 0;
    }
  }
  const std::string path = model_path + "/config.json";
  if (!std::filesystem::is_regular_file(path, error)) return 0;
  try {
    // The model has loaded from this folder, so its config.json is JSON the config parser accepted.
    const nlohmann::json config = parse_json_text(read_text_file(path), "'" + path + "'", 64);
    const auto found = config.find("max_position_embeddings");
    if (found == config.end() || !found->is_number_integer()) return 0;
    return std::clamp<int64_t>(found->get<int64_t>(), 0, INT32_MAX);
  } catch (const Error&) {
    return 0;
  }
}

uint64_t available_memory_bytes() {
  std::ifstream meminfo("/proc/meminfo");
  std::string line;
  while (std::getline(meminfo, line)) {
    unsigned long long kib = 0;
    if (std::sscanf(line.c_str(), "MemAvailable: %llu kB", &kib) == 1)
      return static_cast<uint64_t>(kib) << 10;
  }
  return 0;
}

}  // namespace mb
