// mambacpp: command-line entry point. Every failure is one readable line on stderr and a
// non-zero exit status.
#include <cstdio>
#include <exception>

#include "commands.h"

int main(int argc, char** argv) {
  CLI::App app{"mambacpp: exact, fast inference for Mamba-family models on CPU"};
  app.require_subcommand(1);
  mb::cli::add_make_model(app);
  mb::cli::add_logits(app);
  mb::cli::add_generate(app);
  mb::cli::add_run(app);
  mb::cli::add_tokenize(app);
  mb::cli::add_bench(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  return 0;
}
