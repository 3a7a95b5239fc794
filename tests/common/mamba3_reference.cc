// SPDX-License-Identifier: MIT
#include "common/mamba3_reference.h"

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "io/mapped_file.h"
#include "common/ref_math.h"
#include "common/tensor_io.h"
#include "io/safetensors.h"

namespace mb::test {
namespace {

using nlohmann::json;

// x * (1 / sqrt(mean(x^2) + eps)) * w over n values starting at x.
std::vector<double> rms_norm(const double* x, int64_t n, const double* w, double eps) {
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) sum += x[i] * x[i];
  const double inv = 1.0 / std::sqrt(sum / n + eps);
  std::vector<double> y(n);
  for (int64_t i = 0; i < n; ++i) y[i] = x[i] * inv * w[i];
  return y;
}

double sigmoid(double x) {
  return 1.0 / (1.0 + std::exp(-x));
}

// y[o] = sum_i W[o][i] x[i] with W in the PyTorch [out, in] layout.
std::vector<double> linear(const std::vector<double>& w, const std::vector<double>& x, int64_t out) {
  const int64_t in = static_cast<int64_t>(x.size());
  std::vector<double> y(out, 0.0);
  for (int64_t o = 0; o < out; ++o)
    for (int64_t i = 0; i < in; ++i) y[o] += w[o * in + i] * x[i];
  return y;
}

}  // namespace

Mamba3Reference::Mamba3Reference(const std::string& dir, const DType* round_to) {
  const json config = json::parse(read_text_file(dir + "/config.json"));
  const json ssm = config.at("ssm_cfg");
  d_model_ = config.at("d_model").get<int64_t>();
  const int64_t n_layer = config.at("n_layer").get<int64_t>();
  vocab_size_ = config.at("vocab_size").get<int64_t>();
  d_state_ = ssm.at("d_state").get<int64_t>();
  d_inner_ = ssm.at("expand").get<int64_t>() * d_model_;
  headdim_ = ssm.at("headdim").get<int64_t>();
  heads_ = d_inner_ / headdim_;
  groups_ = ssm.at("ngroups").get<int64_t>();
  angles_ = static_cast<int64_t>(std::floor(d_state_ * ssm.at("rope_fraction").get<double>())) / 2;
  a_floor_ = ssm.at("A_floor").get<double>();
  outproj_norm_ = ssm.at("is_outproj_norm").get<bool>();
  const bool tied = config.value("tie_embeddings", true);

  const TensorSet set = TensorSet::open_dir(dir);
  // Lookups read the embedding as stored; only the LM head is held in the engine's storage dtype.
  embedding_ = read_tensor_values(set, "backbone.embedding.weight", nullptr, true);
  lm_head_ = read_tensor_values(set, tied ? "backbone.embedding.weight" : "lm_head.weight", round_to, true);
  norm_f_ = read_tensor_values(set, "backbone.norm_f.weight", nullptr, true);
  for (int64_t l = 0; l < n_layer; ++l) {
    const std::string p = "backbone.layers." + std::to_string(l) + ".";
    const std::string m = p + "mixer.";
    Layer layer;
    layer.norm = read_tensor_values(set, p + "norm.weight", nullptr, true);
    layer.in_proj = read_tensor_values(set, m + "in_proj.weight", round_to, true);
    layer.dt_bias = read_tensor_values(set, m + "dt_bias", nullptr, true);
    layer.b_bias = read_tensor_values(set, m + "B_bias", nullptr, true);
    layer.c_bias = read_tensor_values(set, m + "C_bias", nullptr, true);
    layer.b_norm = read_tensor_values(set, m + "B_norm.weight", nullptr, true);
    layer.c_norm = read_tensor_values(set, m + "C_norm.weight", nullptr, true);
    layer.d = read_tensor_values(set, m + "D", nullptr, true);
    if (outproj_norm_) layer.gate_norm = read_tensor_values(set, m + "norm.weight", nullptr, true);
    layer.out_proj = read_tensor_values(set, m + "out_proj.weight", round_to, true);
    layer.ssm.assign(heads_ * headdim_ * d_state_, 0.0);
    layer.k.assign(heads_ * d_state_, 0.0);
    layer.v.assign(heads_ * headdim_, 0.0);
    layer.angle.assign(heads_ * angles_, 0.0);
    layers_.push_back(std::move(layer));
  }
}

std::vector<double> Mamba3Reference::step(int token) {
  const int64_t d = d_model_, di = d_inner_, N = d_state_, P = headdim_, H = heads_, G = groups_,
                na = angles_;
  const int64_t in_proj_dim = 2 * di + 2 * G * N + 3 * H + na;
  std::vector<double> hidden(embedding_.begin() + token * d, embedding_.begin() + (token + 1) * d);
  for (Layer& layer : layers_) {
    const std::vector<double> u = rms_norm(hidden.data(), d, layer.norm.data(), eps_);
    const std::vector<double> proj = linear(layer.in_proj, u, in_proj_dim);
    // Split (spec §4): z | x | B | C | dd_dt | dd_A | trap | angles.
    const double* z = proj.data();
    const double* x = z + di;
    const double* b_raw = x + di;
    const double* c_raw = b_raw + G * N;
    const double* dd_dt = c_raw + G * N;
    const double* dd_a = dd_dt + H;
    const double* trap = dd_a + H;
    const double* ang = trap + H;
    std::vector<double> gated(di);
    for (int64_t h = 0; h < H; ++h) {
      const int64_t g = h / (H / G);
      // Per-head activations (spec §4): dt = softplus(dd_dt + dt_bias), A = min(-heavy_tail(dd_A),
      // -A_floor), lambda = sigmoid(trap).
      const double dt = softplus(dd_dt[h] + layer.dt_bias[h]);
      const double heavy_tail = dd_a[h] >= 0 ? 1.0 + dd_a[h] : 1.0 / (1.0 - dd_a[h]);
      const double A = std::min(-heavy_tail, -a_floor_);
      const double lam = sigmoid(trap[h]);
      // BCNorm then the per-head bias (spec §5): one RMSNorm weight per B and C, shared by groups.
      const std::vector<double> bn = rms_norm(b_raw + g * N, N, layer.b_norm.data(), eps_);
      const std::vector<double> cn = rms_norm(c_raw + g * N, N, layer.c_norm.data(), eps_);
      std::vector<double> k(N), q(N);
      for (int64_t n = 0; n < N; ++n) {
        k[n] = bn[n] + layer.b_bias[h * N + n];
        q[n] = cn[n] + layer.c_bias[h * N + n];
      }
      // RoPE (spec §6.2, §6.3): the angle advances by tanh(raw) * pi * dt before use, and angle a
      // rotates the adjacent pair (2a, 2a + 1) of k and q, not (a, a + N/2).
      for (int64_t a = 0; a < na; ++a) {
        double& theta = layer.angle[h * na + a];
        theta = std::fmod(theta + std::tanh(ang[a]) * M_PI * dt, 2 * M_PI);
        const double c = std::cos(theta), s = std::sin(theta);
        const double k0 = k[2 * a], k1 = k[2 * a + 1], q0 = q[2 * a], q1 = q[2 * a + 1];
        k[2 * a] = c * k0 - s * k1;
        k[2 * a + 1] = s * k0 + c * k1;
        q[2 * a] = c * q0 - s * q1;
        q[2 * a + 1] = s * q0 + c * q1;
      }
      // Trapezoidal recurrence (spec §7).
      const double alpha = std::exp(A * dt), beta = alpha * dt * (1 - lam), gamma = lam * dt;
      std::vector<double> y(P);
      for (int64_t p = 0; p < P; ++p) {
        double sum = 0;
        for (int64_t n = 0; n < N; ++n) {
          double& s = layer.ssm[(h * P + p) * N + n];
          s = alpha * s + beta * layer.v[h * P + p] * layer.k[h * N + n] + gamma * x[h * P + p] * k[n];
          sum += s * q[n];
        }
        y[p] = sum + layer.d[h] * x[h * P + p];
      }
      // Output gate (spec §8.1: y * silu(z); §8.2: with is_outproj_norm, RMSNorm of each head's P
      // channels first, times its weight: the norm comes before the gate and is grouped per head).
      double rstd = 1;
      if (outproj_norm_) {
        double sum = 0;
        for (double v : y) sum += v * v;
        rstd = 1 / std::sqrt(sum / P + eps_);
      }
      for (int64_t p = 0; p < P; ++p) {
        const int64_t c = h * P + p;
        const double w = outproj_norm_ ? layer.gate_norm[c] * rstd : 1.0;
        gated[c] = y[p] * w * z[c] * sigmoid(z[c]);
      }
      for (int64_t n = 0; n < N; ++n) layer.k[h * N + n] = k[n];
      for (int64_t p = 0; p < P; ++p) layer.v[h * P + p] = x[h * P + p];
    }
    const std::vector<double> out = linear(layer.out_proj, gated, d);
    for (int64_t i = 0; i < d; ++i) hidden[i] += out[i];
  }
  const std::vector<double> normed = rms_norm(hidden.data(), d, norm_f_.data(), eps_);
  return linear(lm_head_, normed, vocab_size_);
}

}  // namespace mb::test
