// SPDX-License-Identifier: MIT
// What users of llama.cpp type out of habit: its multi-letter short flags, the flags that mean
// nothing here (refused with the reason), and "did you mean" for a mistyped flag or command.
#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "commands.h"
#include "core/error.h"

namespace mb::cli {
namespace {

// llama.cpp flags that have no meaning in mambacpp, and why. They are refused before parsing, so
// the user learns what happened rather than reading "not expected".
struct UnsupportedFlag {
  const char* names[2];
  const char* reason;
};
constexpr UnsupportedFlag kUnsupportedFlags[] = {
    {{"--mlock", nullptr},
     "the weights are packed into memory at load rather than mapped from the file, so there is no "
     "mapping to lock"},
    {{"-fa", "--flash-attn"},
     "the attention layers always run mambacpp's own fused attention kernel; there is nothing to "
     "switch"},
    {{"--no-mmap", nullptr}, "the weights are always read into memory at load (nothing stays mapped)"},
    {{"--numa", nullptr}, "mambacpp does no NUMA placement; use numactl to bind the process"},
};

// Options whose value is free text, which is never taken for a flag ("-p '--mlock'").
bool takes_text(const std::string& arg) {
  static const char* const kText[] = {"-p",       "--prompt", "--system", "--stop", "--chat-template-kwargs",
                                      "--grammar"};
  return std::any_of(std::begin(kText), std::end(kText), [&](const char* name) { return arg == name; });
}

size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

// Every spelling of the options of `app`: "--temp", "-t", ...
std::vector<std::string> option_spellings(const CLI::App& app) {
  std::vector<std::string> names;
  for (const CLI::Option* option : app.get_options()) {
    for (const std::string& name : option->get_lnames()) names.push_back("--" + name);
    for (const std::string& name : option->get_snames()) names.push_back("-" + name);
  }
  return names;
}

bool is_number(const std::string& text) {
  char* end = nullptr;
  std::strtod(text.c_str(), &end);
  return !text.empty() && end == text.c_str() + text.size();
}

bool knows_flag(const CLI::App& app, const std::string& flag) {
  if (app.get_option_no_throw(flag) != nullptr) return true;
  // "-n16", "-t2": a short name with its value attached.
  return flag.size() > 2 && flag[1] != '-' && app.get_option_no_throw(flag.substr(0, 2)) != nullptr;
}

}  // namespace

std::string did_you_mean(const std::string& typed, const std::vector<std::string>& candidates) {
  std::string best;
  size_t best_distance = SIZE_MAX;
  for (const std::string& candidate : candidates) {
    const size_t distance = edit_distance(typed, candidate);
    if (distance < best_distance) {
      best_distance = distance;
      best = candidate;
    }
  }
  // Close enough to be a typo: two edits, or a third of a long name.
  const size_t limit = std::max<size_t>(2, typed.size() / 3);
  return best_distance <= limit && best_distance > 0 ? best : "";
}

void normalize_llama_arguments(int argc, char** argv) {
  static char gpu_layers[] = "--n-gpu-layers";
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--") return;
    if (takes_text(arg)) {
      ++i;
      continue;
    }
    // CLI11 takes one-letter short names only, so llama.cpp's "-ngl" becomes its long name.
    if (arg == "-ngl") argv[i] = gpu_layers;
    const std::string name = arg.substr(0, arg.find('='));
    for (const UnsupportedFlag& flag : kUnsupportedFlags)
      for (const char* spelling : flag.names)
        if (spelling != nullptr && name == spelling) throw Error(name + " is not supported: " + flag.reason);
  }
}

std::string parse_error_hint(const CLI::App& app, int argc, char** argv) {
  if (argc < 2) return "";
  const std::string first = argv[1];
  if (first.empty() || first[0] == '-') return "";
  const CLI::App* command = nullptr;
  std::vector<std::string> commands;
  for (const CLI::App* sub : app.get_subcommands({})) {
    commands.push_back(sub->get_name());
    if (sub->get_name() == first) command = sub;
  }
  if (command == nullptr) {
    const std::string guess = did_you_mean(first, commands);
    return "'" + first + "' is not a command" + (guess.empty() ? "" : "; did you mean '" + guess + "'?");
  }
  for (int i = 2; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--") break;
    if (takes_text(arg)) {
      ++i;
      continue;
    }
    if (arg.size() < 2 || arg[0] != '-' || is_number(arg)) continue;
    const std::string flag = arg.substr(0, arg.find('='));
    if (knows_flag(*command, flag) || knows_flag(app, flag)) continue;
    const std::string guess = did_you_mean(flag, option_spellings(*command));
    return "'" + flag + "' is not an option of '" + first + "'" +
           (guess.empty() ? "" : "; did you mean '" + guess + "'?");
  }
  return "";
}

void add_gpu_layers_option(CLI::App* cmd, std::string& device) {
  cmd->add_option_function<int>(
         "--n-gpu-layers",
         [&device](int layers) {
           check_flag_range("-ngl/--n-gpu-layers", layers, 0, INT32_MAX);
           if (layers == 0 || device != "cpu") return;
           device = "vulkan";
           std::fprintf(stderr,
                        "-ngl %d: running on the GPU (--device vulkan); mambacpp keeps the whole model on "
                        "one device, so any -ngl above 0 means every layer\n",
                        layers);
         },
         "As llama.cpp's -ngl: above 0 runs the model on the GPU (--device vulkan), 0 on the CPU")
      ->type_name("INT");
}

void add_jinja_flag(CLI::App* cmd) {
  static const std::string kHelp = "Accepted as llama.cpp's: chat templates are always rendered as Jinja";
  cmd->add_flag("--jinja", kHelp);
}

}  // namespace mb::cli
