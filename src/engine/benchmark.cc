// SPDX-License-Identifier: MIT
#include "engine/benchmark.h"

#include <algorithm>
#include <chrono>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"
#include "model/blocks/block.h"

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

const char* block_kind_name(BlockKind kind) {
  switch (kind) {
    case BlockKind::Mamba1Mixer:
      return "mamba1";
    case BlockKind::Mamba2Mixer:
      return "mamba2";
    case BlockKind::Mamba3Mixer:
      return "mamba3";
    case BlockKind::Attention:
      return "attention";
    case BlockKind::Mlp:
      return "mlp";
    case BlockKind::Moe:
      return "moe";
    case BlockKind::JambaFfn:
      return "jamba ffn";
    case BlockKind::FalconH1Mixer:
      return "falcon-h1 attention+mamba2";
    case BlockKind::FalconH1Mlp:
      return "falcon-h1 mlp";
    case BlockKind::ShortConv:
      return "short_conv";
    case BlockKind::Lfm2Attention:
      return "attention";
    case BlockKind::Lfm2Mlp:
      return "mlp";
    case BlockKind::Lfm2Moe:
      return "moe";
    case BlockKind::Zamba2Shared:
      return "zamba2 shared";
    case BlockKind::GatedDeltaNet:
      return "gated delta net";
    case BlockKind::GatedAttention:
      return "gated attention";
    case BlockKind::Custom:
      break;
  }
  return "custom";
}

// Splits the profiled prefill time by the kind of block whose phase it is. Blocks of one kind
// share their phase ids (Model::add_block), so each id is counted once.
void block_shares(const Model& model, BenchResult& r) {
  const PhaseProfile& p = r.prefill_phases;
  const double total = p.total();
  if (total <= 0) return;
  std::vector<char> counted(p.seconds.size(), 0);
  double blocks = 0;
  for (const auto& block : model.blocks()) {
    const std::string kind = block_kind_name(block->kind());
    const std::span<const std::string_view> names = block->phase_names();
    double seconds = 0;
    for (size_t i = 0; i < names.size(); ++i) {
      const size_t id = static_cast<size_t>(block->first_phase()) + i;
      if (id >= p.seconds.size() || counted[id]) continue;
      counted[id] = 1;
      seconds += p.seconds[id];
      if ((block->kind() == BlockKind::Attention || block->kind() == BlockKind::Lfm2Attention) &&
          names[i] == "attention")
        r.prefill_attention_core_share += p.seconds[id] / total;
    }
    auto& shares = r.prefill_block_shares;
    auto entry = std::find_if(shares.begin(), shares.end(), [&](const auto& e) { return e.first == kind; });
    if (entry == shares.end()) entry = shares.insert(shares.end(), {kind, 0.0});
    entry->second += seconds / total;
    blocks += seconds;
  }
  r.prefill_block_shares.push_back({"head", (total - blocks) / total});
}

}  // namespace

BenchResult run_benchmark(const Model& model, const ComputeContext& ctx, const BenchOptions& o) {
  if (o.prompt_len < 1 || o.gen_len < 1 || o.repeats < 1)
    throw Error("bench: prompt_len, gen_len and repeats must be positive");
  if (o.step_tokens < 0) throw Error("bench: step_tokens must be >= 0 (0 = min(prompt_len, 128))");
  if (o.batch < 1) throw Error("bench: the decode batch must be >= 1");
  if (o.warmups < 0) throw Error("bench: warmups must be >= 0");
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
  for (int run = 0; run < o.warmups + o.repeats; ++run) {  // the first `warmups` runs are untimed
    const bool timed = run >= o.warmups;
    SequenceState state = model.new_state();
    SequenceInput input{&state, prompt, {}};
    ComputeContext prefill_ctx = ctx;
    if (o.profile && timed) prefill_ctx.profile = &result.prefill_phases;
    const double prefill_s = time_seconds([&] {
      model.forward(prefill_ctx, std::span(&input, 1), {OutputKind::LogitsLast, o.chunk, o.scan, o.ssd_chunk},
                    ws, out);
    });
    if (model.on_device() && run == o.warmups + o.repeats - 1)
      result.device_prefill = model.device_timings(ws);
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
    if (model.on_device() && run == o.warmups + o.repeats - 1)
      result.device_decode_step = model.device_timings(ws);
    SequenceState step_state = model.new_state();
    const double step_s = time_seconds([&] {
      for (int64_t i = 0; i < result.step_tokens; ++i) {
        SequenceInput next{&step_state, std::span(&prompt[i], 1), {}};
        model.forward(ctx, std::span(&next, 1), {OutputKind::LogitsLast, 0}, ws, out);
      }
    });
    if (!timed) continue;
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
  if (o.profile) block_shares(model, result);

  const StateShape shape = model.state_layout().shape();
  int64_t kv_floats = 0;
  for (const int64_t floats : shape.growing) kv_floats += floats;
  result.step_matrix_bytes = model.step_matrix_bytes();
  result.kv_bytes_per_position = static_cast<size_t>(kv_floats) * sizeof(float);
  result.fixed_state_bytes = static_cast<size_t>(shape.fixed_floats) * sizeof(float);
  // The decode steps run at positions prompt_len .. prompt_len + gen_len - 1, each attending over
  // its position + 1 keys: (gen_len + 1) / 2 past the prompt on average.
  const double mean_keys = static_cast<double>(o.prompt_len) + 0.5 * static_cast<double>(o.gen_len + 1);
  if (o.batch == 1)
    result.decode_read_bytes = static_cast<double>(result.step_matrix_bytes) +
                               mean_keys * static_cast<double>(result.kv_bytes_per_position) +
                               2.0 * static_cast<double>(result.fixed_state_bytes);
  return result;
}

}  // namespace mb
