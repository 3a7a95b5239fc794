// SPDX-License-Identifier: MIT
// mambacpp: command-line entry point. Every failure is one readable line on stderr and a
// non-zero exit status.
#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <map>
#include <new>
#include <stdexcept>
#include <string>

#include "commands.h"

namespace {

// "mambacpp logits": the command that was running, for errors that carry no context of their own.
std::string subcommand_name(const CLI::App& app) {
  const auto commands = app.get_subcommands();
  return commands.empty() ? std::string("mambacpp") : "mambacpp " + commands.front()->get_name();
}

// CLI11 converts an empty value to 0 (`-n ''` generated nothing) and an integer beyond its type
// to the type's limit (strtoll saturates: `--seed 99999999999999999999` became INT64_MAX). Every
// numeric option of every command refuses both before conversion.
void refuse_unclear_numbers(CLI::App& app) {
  for (CLI::Option* option : app.get_options()) {
    const std::string type = option->get_type_name();
    if (type != "INT" && type != "UINT" && type != "FLOAT") continue;
    option->check(CLI::Validator(
        [type](std::string& value) -> std::string {
          if (value.empty()) return "an empty value is not a number";
          errno = 0;
          char* end = nullptr;
          if (type == "INT") std::strtoll(value.c_str(), &end, 0);
          if (type == "UINT") std::strtoull(value.c_str(), &end, 0);
          if (errno == ERANGE) return "'" + value + "' is out of range";
          return "";
        },
        ""));
  }
  for (CLI::App* command : app.get_subcommands({})) refuse_unclear_numbers(*command);
}

// An empty value given on purpose (`--dtype ''`, often an unset shell variable) was read as the
// flag's default, or as no stop string at all, or as a file named ''. These flags name a thing, so
// every command refuses an empty one before it runs.
void refuse_empty_names(CLI::App& app) {
  static const std::map<std::string, std::string> why = {
      {"--dtype", "leave the flag out to keep the stored dtype"},
      {"--stop", "an empty stop string would end every reply before it starts"},
      {"--out", "it names no file"},
      {"--state-in", "it names no file"},
      {"--state-out", "it names no file"}};
  for (CLI::Option* option : app.get_options()) {
    const std::vector<std::string>& names = option->get_lnames();  // without their dashes
    const auto named = std::find_if(why.begin(), why.end(), [&](const auto& entry) {
      return std::find(names.begin(), names.end(), entry.first.substr(2)) != names.end();
    });
    if (named == why.end()) continue;
    const std::string reason = named->second;
    option->check(CLI::Validator(
        [reason](std::string& value) -> std::string {
          return value.empty() ? "an empty value: " + reason : "";
        },
        ""));
  }
  for (CLI::App* command : app.get_subcommands({})) refuse_empty_names(*command);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"mambacpp: exact, fast inference for Mamba-family models on CPU"};
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string("mambacpp ") + MB_VERSION, "Print the version and exit");
  // Parse errors are one line too, in the same form as the commands' own errors.
  // A mistyped flag or command also gets the closest real one.
  app.failure_message([&app, argc, argv](const CLI::App*, const CLI::Error& e) {
    const std::string hint = mb::cli::parse_error_hint(app, argc, argv);
    return std::string("error: ") + e.what() + (hint.empty() ? "" : "; " + hint) + " (see --help)\n";
  });
  mb::cli::add_make_model(app);
  mb::cli::add_logits(app);
  mb::cli::add_generate(app);
  mb::cli::add_run(app);
  mb::cli::add_chat(app);
  mb::cli::add_tokenize(app);
  mb::cli::add_bench(app);
  mb::cli::add_devices(app);
  mb::cli::add_quantize(app);
  mb::cli::add_quant_accuracy(app);
#ifdef MB_HAVE_SERVER
  mb::cli::add_serve(app);
#endif
  refuse_unclear_numbers(app);
  refuse_empty_names(app);
  try {
#ifdef MB_HAVE_SERVER
    mb::cli::normalize_serve_arguments(argc, argv);
#endif
    mb::cli::normalize_llama_arguments(argc, argv);
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const std::bad_alloc&) {
    // Commands name what they were doing where they can (loading a model); anything else that
    // runs out of memory is still one line naming the command, never an abort.
    std::fprintf(stderr, "error: out of memory running '%s' (a memory allocation failed)\n",
                 subcommand_name(app).c_str());
    return 1;
  } catch (const std::length_error&) {
    std::fprintf(stderr, "error: out of memory running '%s' (a size beyond what can be allocated)\n",
                 subcommand_name(app).c_str());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  return 0;
}
