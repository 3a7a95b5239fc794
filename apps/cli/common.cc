// SPDX-License-Identifier: MIT
#include <charconv>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <new>

#include "commands.h"
#include "core/error.h"
#include "model/make_model.h"

namespace mb::cli {

std::vector<int32_t> parse_token_list(const std::string& text) {
  std::vector<int32_t> ids;
  size_t pos = 0;
  while (pos <= text.size()) {
    const size_t comma = text.find(',', pos);
    const std::string item = text.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    const size_t first = item.find_first_not_of(' ');
    const size_t last = item.find_last_not_of(' ');
    const std::string trimmed = first == std::string::npos ? "" : item.substr(first, last - first + 1);
    int64_t value = 0;
    const auto [end, error] = std::from_chars(trimmed.data(), trimmed.data() + trimmed.size(), value);
    if (trimmed.empty() || error != std::errc() || end != trimmed.data() + trimmed.size() ||
        value < INT32_MIN || value > INT32_MAX)
      throw Error("--tokens: '" + trimmed +
                  "' is not a token id (expected a comma-separated list like 1,2,3)");
    ids.push_back(static_cast<int32_t>(value));
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  return ids;
}

std::string join_ids(const std::vector<int32_t>& ids) {
  std::string text;
  for (size_t i = 0; i < ids.size(); ++i) text += (i ? " " : "") + std::to_string(ids[i]);
  return text;
}

void check_flag_range(const std::string& flag, int64_t value, int64_t min, int64_t max,
                      const std::string& note) {
  if (value >= min && value <= max) return;
  std::string requirement = max == INT64_MAX
                                ? ">= " + std::to_string(min)
                                : "in [" + std::to_string(min) + ", " + std::to_string(max) + "]";
  if (!note.empty()) requirement += " (" + note + ")";
  throw Error(flag + " must be " + requirement + ", got " + std::to_string(value));
}

ComputeContext make_context(int threads) {
  check_flag_range("-t/--threads", threads, 0, kMaxThreads, "0 = all cores");
  ComputeContext ctx;
  ctx.n_threads = threads == 0 ? default_thread_count() : threads;
  return ctx;
}

ScanForm parse_scan_form(const std::string& text) {
  if (text == "sequential") return ScanForm::Sequential;
  if (text == "chunked") return ScanForm::Chunked;
  if (text == "auto") return ScanForm::Auto;
  throw Error("--scan must be sequential, chunked or auto, got '" + text + "'");
}

void add_device_option(CLI::App* cmd, std::string& device) {
  cmd->add_option("--device", device, "Where to run: cpu | vulkan | vulkan:N (`mambacpp devices` lists them)")
      ->capture_default_str();
  add_gpu_layers_option(cmd, device);
}

std::string model_or_demo(const std::string& model) {
  if (!model.empty()) return model;
  // The trained demo (data/demo-model, made by tools/train_demo/): from the source tree as the
  // working folder, as README's first command runs it, or else from the tree this program was
  // built from, so `run` speaks English wherever it is started while that tree exists.
  for (const std::string& dir : {std::string("data/demo-model"), std::string(MB_DEMO_MODEL_DIR)})
    if (std::filesystem::exists(dir + "/config.json")) return dir;
  const std::string dir = "models/demo-tiny";
  if (!std::filesystem::exists(dir + "/config.json")) {
    std::fprintf(stderr,
                 "no --model given and no trained demo model found: writing a random tiny demo model to %s\n",
                 dir.c_str());
    MakeModelOptions o;
    o.config = preset_config("tiny");
    make_model(dir, o);
  }
  return dir;
}

std::string device_description(const Model& model) {
  return model.backend().description();
}

std::unique_ptr<Model> load_model(const std::string& path, const std::string& dtype,
                                  const std::string& device) {
  LoadOptions options = make_load_options(dtype, device);
  // A load taking more than a moment (a large checkpoint, quantization) shows its progress on a
  // terminal; the line is erased when the load returns.
  ProgressLine progress("loading");
  options.progress = &progress;
  try {
    return Model::load(path, options);
  } catch (const std::bad_alloc&) {
    throw Error("out of memory loading the model '" + path + "'" +
                (dtype.empty() || dtype == "auto" ? "" : " as " + dtype));
  }
}

LoadOptions make_load_options(const std::string& dtype, const std::string& device) {
  LoadOptions options;
  options.device = parse_device(device);
  if (!dtype.empty() && dtype != "auto") options.weight_dtype = parse_dtype(dtype);
  return options;
}

}  // namespace mb::cli
