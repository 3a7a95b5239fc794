// SPDX-License-Identifier: MIT
// `mambacpp quant-accuracy`: how far a quantized load of a checkpoint is from a reference load
// (by default the stored dtype) over the same positions: largest logit difference, mean and
// largest KL divergence of the next-token distributions, and top-1 agreement.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <random>

#include "commands.h"
#include "core/error.h"

namespace mb::cli {
namespace {

std::vector<float> all_logits(const Model& model, const ComputeContext& ctx,
                              const std::vector<int32_t>& tokens) {
  SequenceState state = model.new_state();
  SequenceInput input{&state, tokens, {}};
  Workspace ws;
  std::vector<std::vector<float>> out;
  model.forward(ctx, std::span(&input, 1), {OutputKind::LogitsAll, 0}, ws, out);
  return std::move(out[0]);
}

// log softmax of one row, in double.
std::vector<double> log_probabilities(const float* logits, int64_t n) {
  double max = -INFINITY;
  for (int64_t i = 0; i < n; ++i) max = std::max(max, double(logits[i]));
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) sum += std::exp(double(logits[i]) - max);
  const double log_sum = max + std::log(sum);
  std::vector<double> out(n);
  for (int64_t i = 0; i < n; ++i) out[i] = double(logits[i]) - log_sum;
  return out;
}

int64_t argmax(const float* v, int64_t n) {
  int64_t best = 0;
  for (int64_t i = 1; i < n; ++i)
    if (v[i] > v[best]) best = i;
  return best;
}

}  // namespace

void add_quant_accuracy(CLI::App& app) {
  struct Args {
    std::string model, dtype, reference_dtype;
    int64_t positions = 256;
    uint64_t seed = 1;
    int threads = 0;
    bool json = false;
  };
  auto args = std::make_shared<Args>();
  CLI::App* cmd = app.add_subcommand(
      "quant-accuracy", "Compare the logits of a quantized load with a reference load over random tokens");
  cmd->add_option("-m,--model", args->model, "Checkpoint folder")->required();
  cmd->add_option("--dtype", args->dtype, "Dtype under test: q8_0 | q4_0 | q4_k | q6_k (or any dtype)")
      ->required();
  cmd->add_option("--reference-dtype", args->reference_dtype, "Reference dtype (default: as stored)");
  cmd->add_option("--positions", args->positions, "Positions compared")->capture_default_str();
  cmd->add_option("--seed", args->seed, "Seed of the random token sequence")->capture_default_str();
  cmd->add_option("-t,--threads", args->threads, "Threads (0 = all cores)");
  cmd->add_flag("--json", args->json, "Print one JSON object");
  cmd->callback([args] {
    check_flag_range("--positions", args->positions, 1, int64_t{1} << 20);
    const auto ctx = make_context(args->threads);
    auto reference = load_model(args->model, args->reference_dtype);
    auto tested = load_model(args->model, args->dtype);
    const int64_t V = reference->config().vocab_size;
    std::mt19937_64 rng(args->seed);
    std::uniform_int_distribution<int32_t> pick(0, static_cast<int32_t>(V - 1));
    std::vector<int32_t> tokens(args->positions);
    for (int32_t& t : tokens) t = pick(rng);
    const std::vector<float> want = all_logits(*reference, ctx, tokens);
    const std::vector<float> got = all_logits(*tested, ctx, tokens);
    double max_diff = 0.0, kl_sum = 0.0, kl_max = 0.0;
    int64_t agree = 0;
    for (int64_t t = 0; t < args->positions; ++t) {
      const float* p = want.data() + t * V;
      const float* q = got.data() + t * V;
      for (int64_t i = 0; i < V; ++i) max_diff = std::max(max_diff, std::fabs(double(p[i]) - q[i]));
      const std::vector<double> log_p = log_probabilities(p, V), log_q = log_probabilities(q, V);
      double kl = 0.0;
      for (int64_t i = 0; i < V; ++i) kl += std::exp(log_p[i]) * (log_p[i] - log_q[i]);
      kl_sum += kl;
      kl_max = std::max(kl_max, kl);
      agree += argmax(p, V) == argmax(q, V);
    }
    const nlohmann::json out = {{"model", args->model},
                                {"dtype", std::string(dtype_name(tested->matrix_dtype()))},
                                {"reference_dtype", std::string(dtype_name(reference->matrix_dtype()))},
                                {"positions", args->positions},
                                {"max_logit_diff", max_diff},
                                {"mean_kl", kl_sum / args->positions},
                                {"max_kl", kl_max},
                                {"top1_agreement", double(agree) / args->positions}};
    if (args->json) {
      std::printf("%s\n", out.dump().c_str());
    } else {
      std::printf(
          "%s vs %s over %lld positions: max logit diff %.4g | KL mean %.4g max %.4g | top-1 %.2f%%\n",
          out["dtype"].get<std::string>().c_str(), out["reference_dtype"].get<std::string>().c_str(),
          static_cast<long long>(args->positions), max_diff, kl_sum / args->positions, kl_max,
          100.0 * agree / args->positions);
    }
  });
}

}  // namespace mb::cli
