#include "engine/benchmark.h"

#include <algorithm>
#include <chrono>
#include <vector>

#include "core/error.h"

namespace mb {
namespace {

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  return n % 2 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
}

template <class F>
double time_seconds(F&& body) {
  const auto start = std::chrono::steady_clock::now();
  body();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

int32_t argmax(const std::vector<float>& logits) {
  return static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
}

}  // namespace

BenchResult run_benchmark(const Model& model, const ComputeContext& ctx, const BenchOptions& o) {
  if (o.prompt_len < 1 || o.gen_len < 1 || o.repeats < 1)
    throw Error("bench: prompt_len, gen_len and repeats must be positive");
  if (o.step_tokens < 0) throw Error("bench: step_tokens must be >= 0 (0 = min(prompt_len, 128))");
  if (o.batch < 1) throw Error("bench: the decode batch must be >= 1");
  std::vector<int32_t> prompt(o.prompt_len);
  uint64_t x = o.seed * 0x9e3779b97f4a7c15ull + 1;
  for (auto& token : prompt) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    token = static_cast<int32_t>(x % model.config().vocab_size);
  }
  BenchResult result;
  result.prefill_phases = PhaseProfile(model.phase_names());
  result.step_tokens =
      o.step_tokens > 0 ? std::min(o.step_tokens, o.prompt_len) : std::min<int64_t>(o.prompt_len, 128);
  Workspace ws;
  std::vector<std::vector<float>> out;
  std::vector<double> prefill, decode, step, speedup;
  for (int run = 0; run <= o.repeats; ++run) {  // run 0 is the warm-up
    SequenceState state = model.new_state();
    SequenceInput input{&state, prompt, {}};
    ComputeContext prefill_ctx = ctx;
    if (o.profile && run > 0) prefill_ctx.profile = &result.prefill_phases;
    const double prefill_s = time_seconds([&] {
      model.forward(prefill_ctx, std::span(&input, 1), {OutputKind::LogitsLast, o.chunk, o.scan, o.ssd_chunk},
                    ws, out);
    });
    if (model.on_device() && run == o.repeats) result.device_prefill = model.device_timings(ws);
    // The other sequences of a decode batch are prefilled untimed, as one batch, so that their
    // states are where the first one's is (on the device, for a device model).
    std::vector<SequenceState> states(o.batch);
    states[0] = std::move(state);
    std::vector<SequenceInput> batch;
    for (int64_t b = 1; b < o.batch; ++b) {
      states[b] = model.new_state();
      batch.push_back({&states[b], prompt, {}});
    }
    std::vector<std::vector<float>> others;
    if (!batch.empty())
      model.forward(ctx, batch, {OutputKind::LogitsLast, o.chunk, o.scan, o.ssd_chunk}, ws, others);
    std::vector<int32_t> tokens(o.batch, argmax(out[0]));
    batch.resize(o.batch);
    const double decode_s = time_seconds([&] {
      for (int64_t i = 0; i < o.gen_len; ++i) {
        for (int64_t b = 0; b < o.batch; ++b) batch[b] = {&states[b], std::span(&tokens[b], 1), {}};
        // Greedy decode asks for the argmax alone: on a device only the chosen ids come back.
        model.forward(ctx, batch, {OutputKind::ArgmaxLast, 0}, ws, out);
        for (int64_t b = 0; b < o.batch; ++b) tokens[b] = static_cast<int32_t>(out[b][0]);
      }
    });
    if (model.on_device() && run == o.repeats) result.device_decode_step = model.device_timings(ws);
    SequenceState step_state = model.new_state();
    const double step_s = time_seconds([&] {
      for (int64_t i = 0; i < result.step_tokens; ++i) {
        SequenceInput next{&step_state, std::span(&prompt[i], 1), {}};
        model.forward(ctx, std::span(&next, 1), {OutputKind::LogitsLast, 0}, ws, out);
      }
    });
    if (run == 0) continue;
    prefill.push_back(o.prompt_len / prefill_s);
    decode.push_back(o.batch * o.gen_len / decode_s);
    step.push_back(result.step_tokens / step_s);
    speedup.push_back(prefill.back() / step.back());
  }
  for (double& seconds : result.prefill_phases.seconds) seconds /= o.repeats;
  result.prefill_tok_s = median(prefill);
  result.decode_tok_s = median(decode);
  result.step_prefill_tok_s = median(step);
  result.prefill_speedup = median(speedup);
  return result;
}

}  // namespace mb
