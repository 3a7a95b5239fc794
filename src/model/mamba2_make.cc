#include "model/generated_tensors.h"

#include <cmath>

#include "model/random.h"

namespace mb {

std::vector<GeneratedTensor> make_mamba2_layer_tensors(const ModelConfig& c, uint64_t seed) {
  SeededRandom rng(seed);
  const int64_t d = c.d_model, di = c.d_inner, N = c.d_state, H = c.n_heads(), G = c.ngroups, K = c.d_conv;
  const int64_t conv_width = di + 2 * G * N;
  const int64_t in_proj_dim = di + conv_width + H;
  std::vector<GeneratedTensor> out;
  for (int64_t l = 0; l < c.n_layer; ++l) {
    const std::string p = "backbone.layers." + std::to_string(l) + ".";
    const std::string m = p + "mixer.";
    out.push_back({p + "norm.weight", {d}, std::vector<float>(d, 1.0f), false});
    // Unit-variance outputs for unit-variance inputs (uniform, bound sqrt(3 / fan_in)).
    out.push_back({m + "in_proj.weight",
                   {in_proj_dim, d},
                   rng.uniform_values(in_proj_dim * d, std::sqrt(3.0 / d)),
                   false});
    if (c.use_bias)
      out.push_back({m + "in_proj.bias", {in_proj_dim}, rng.uniform_values(in_proj_dim, 0.1), false});
    out.push_back({m + "conv1d.weight",
                   {conv_width, 1, K},
                   rng.uniform_values(conv_width * K, 1.0 / std::sqrt(double(K))),
                   false});
    if (c.use_conv_bias)
      out.push_back({m + "conv1d.bias", {conv_width}, rng.uniform_values(conv_width, 0.1), false});
    std::vector<float> dt_bias(H), a_log(H);
    for (float& b : dt_bias) {
      const double dt = std::exp(std::log(1e-3) + rng.uniform() * (std::log(1e-1) - std::log(1e-3)));
      b = static_cast<float>(dt + std::log(-std::expm1(-dt)));  // softplus^-1(dt)
    }
    for (float& a : a_log) a = static_cast<float>(std::log(1.0 + 15.0 * rng.uniform()));
    out.push_back({m + "dt_bias", {H}, dt_bias, true});
    out.push_back({m + "A_log", {H}, a_log, true});
    out.push_back({m + "D", {H}, std::vector<float>(H, 1.0f), true});
    if (c.gated_norm) {
      std::vector<float> norm = rng.uniform_values(di, 0.5);
      for (float& w : norm) w += 1.0f;
      out.push_back({m + "norm.weight", {di}, norm, false});
    }
    // Residual branches are scaled by 1/sqrt(n_layer) so the stream stays O(1) with depth.
    const double out_bound = std::sqrt(3.0 / di) / std::sqrt(double(c.n_layer));
    out.push_back({m + "out_proj.weight", {d, di}, rng.uniform_values(d * di, out_bound), false});
    if (c.use_bias) out.push_back({m + "out_proj.bias", {d}, rng.uniform_values(d, 0.1), false});
  }
  return out;
}

}  // namespace mb
