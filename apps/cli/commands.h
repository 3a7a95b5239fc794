// SPDX-License-Identifier: MIT
// Subcommands of the `mambacpp` CLI. Each registers its options and its action on the app.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/threading.h"
#include "engine/gguf_tokenizer.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"

namespace mb::cli {

void add_make_model(CLI::App& app);
void add_logits(CLI::App& app);
void add_generate(CLI::App& app);
void add_run(CLI::App& app);
void add_chat(CLI::App& app);
void add_tokenize(CLI::App& app);
void add_bench(CLI::App& app);
void add_devices(CLI::App& app);
void add_quantize(CLI::App& app);
void add_quant_accuracy(CLI::App& app);
#ifdef MB_HAVE_SERVER
void add_serve(CLI::App& app);
// Maps llama-server's "-np" to "--parallel" in the arguments of `serve` (CLI11 has no
// multi-letter short names).
void normalize_serve_arguments(int argc, char** argv);
#endif

// llama.cpp habits (cli_habits.cc). The closest of `candidates` to `typed` by edit distance when
// it is close enough to be a typo, else "".
std::string did_you_mean(const std::string& typed, const std::vector<std::string>& candidates);
// Maps llama.cpp's multi-letter short flags to their long names (-ngl) and throws mb::Error
// "FLAG is not supported: why" for its flags that mean nothing here (--mlock, -fa, ...).
void normalize_llama_arguments(int argc, char** argv);
// After a parse error: "'X' is not a command; did you mean 'Y'?" or the same for a flag of the
// command, or "" when the error is about something else.
std::string parse_error_hint(const CLI::App& app, int argc, char** argv);
// -ngl/--n-gpu-layers N on a command with --device: N > 0 selects the GPU, and says so.
void add_gpu_layers_option(CLI::App* cmd, std::string& device);
// --jinja, accepted and ignored, on the commands that render chat templates.
void add_jinja_flag(CLI::App* cmd);

// "1,2,3" -> ids; throws mb::Error naming the bad item.
std::vector<int32_t> parse_token_list(const std::string& text);
std::string join_ids(const std::vector<int32_t>& ids);
// The context for -t/--threads (0 = every core); throws mb::Error naming the flag when the
// count is negative or above kMaxThreads.
ComputeContext make_context(int threads);
// Throws mb::Error "FLAG must be ..., got VALUE" unless min <= value <= max (max = INT64_MAX
// for no upper bound). `flag` is every spelling the user may have typed, e.g. "-n/--n-predict";
// `note` (may be empty) says what the special values mean, e.g. "0 = the whole prompt".
void check_flag_range(const std::string& flag, int64_t value, int64_t min, int64_t max,
                      const std::string& note = "");
// The longest SSD chunk --ssd-chunk accepts, as a config's chunk_size (the kernels clamp it to the
// input's length as well, so a long chunk never allocates more than the input needs).
inline constexpr int64_t kMaxSsdChunk = int64_t{1} << 16;

// Model::load of `path` with --dtype and --device, where running out of memory is an mb::Error
// naming the model ("out of memory loading ...") rather than a bare std::bad_alloc.
std::unique_ptr<Model> load_model(const std::string& path, const std::string& dtype,
                                  const std::string& device = "cpu");
// The load options of --dtype and --device ("cpu", "vulkan", "vulkan:N"); throws mb::Error for
// an unknown device (an index out of range, or Vulkan in a build without it, fail at load).
LoadOptions make_load_options(const std::string& dtype, const std::string& device = "cpu");
// Registers --device on a subcommand that loads a model.
void add_device_option(CLI::App* cmd, std::string& device);
// Where `model` runs, as bench and serve report it: "cpu" or the device's description.
std::string device_description(const Model& model);
// `model`, or when it is empty the demo model of `run` and `chat`: the trained one of
// data/demo-model (in the working folder, else in the source tree of the build), or where neither
// exists models/demo-tiny, written (random weights, the tiny preset) on first use.
std::string model_or_demo(const std::string& model);
// "sequential" | "chunked" | "auto" of --scan; throws mb::Error naming the flag.
ScanForm parse_scan_form(const std::string& text);

}  // namespace mb::cli
