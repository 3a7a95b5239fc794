#include "model/random.h"
#include "model/generated_tensors.h"

#include <cmath>

#include "model/mamba3.h"

namespace mb {
namespace {


}  // namespace

std::vector<GeneratedTensor> make_mamba3_layer_tensors(const ModelConfig& c, uint64_t seed) {
  SeededRandom rng(seed);
  const int64_t d = c.d_model, di = c.d_inner, N = c.d_state, H = c.n_heads(), G = c.ngroups;
  const int64_t na = mamba3_rope_angles(N, c.rope_fraction);
  const int64_t in_proj_dim = 2 * di + 2 * G * N + 3 * H + na;
  std::vector<GeneratedTensor> out;
  for (int64_t l = 0; l < c.n_layer; ++l) {
    const std::string p = "backbone.layers." + std::to_string(l) + ".";
    const std::string m = p + "mixer.";
    out.push_back({p + "norm.weight", {d}, std::vector<float>(d, 1.0f), false});
    // Unit-variance outputs for unit-variance inputs (uniform, bound sqrt(3 / fan_in)): z and x
    // are O(1), dd_dt moves softplus around the dt_bias, dd_A gives A of order -1, and the
    // trapezoid mix and the angle velocities cover their ranges.
    out.push_back({m + "in_proj.weight",
                   {in_proj_dim, d},
                   rng.uniform_values(in_proj_dim * d, std::sqrt(3.0 / d)),
                   false});
    std::vector<float> dt_bias(H);
    for (float& b : dt_bias) {
      const double dt = std::exp(std::log(1e-3) + rng.uniform() * (std::log(1e-1) - std::log(1e-3)));
      b = static_cast<float>(dt + std::log(-std::expm1(-dt)));  // softplus^-1(dt)
    }
    out.push_back({m + "dt_bias", {H}, dt_bias, true});
    out.push_back({m + "B_bias", {H, 1, N}, rng.uniform_values(H * N, 0.1), true});
    out.push_back({m + "C_bias", {H, 1, N}, rng.uniform_values(H * N, 0.1), true});
    out.push_back({m + "B_norm.weight", {N}, std::vector<float>(N, 1.0f), false});
    out.push_back({m + "C_norm.weight", {N}, std::vector<float>(N, 1.0f), false});
    out.push_back({m + "D", {H}, std::vector<float>(H, 1.0f), true});
    if (c.is_outproj_norm) out.push_back({m + "norm.weight", {di}, std::vector<float>(di, 1.0f), false});
    // Residual branches are scaled by 1/sqrt(n_layer) so the stream stays O(1) with depth.
    const double out_bound = std::sqrt(3.0 / di) / std::sqrt(double(c.n_layer));
    out.push_back({m + "out_proj.weight", {d, di}, rng.uniform_values(d * di, out_bound), false});
  }
  return out;
}

}  // namespace mb
