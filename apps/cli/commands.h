// Subcommands of the `mambacpp` CLI. Each registers its options and its action on the app.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <string>
#include <vector>

#include "core/threading.h"
#include "model/model.h"

namespace mb::cli {

void add_make_model(CLI::App& app);
void add_logits(CLI::App& app);
void add_generate(CLI::App& app);
void add_run(CLI::App& app);
void add_tokenize(CLI::App& app);
void add_bench(CLI::App& app);

// "1,2,3" -> ids; throws mb::Error naming the bad item.
std::vector<int32_t> parse_token_list(const std::string& text);
std::string join_ids(const std::vector<int32_t>& ids);
ComputeContext make_context(int threads);
LoadOptions make_load_options(const std::string& dtype);
// "sequential" | "chunked" | "auto" of --scan; throws mb::Error naming the flag.
ScanForm parse_scan_form(const std::string& text);

}  // namespace mb::cli
