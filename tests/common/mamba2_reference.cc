// SPDX-License-Identifier: MIT
#include "common/mamba2_reference.h"

#include <algorithm>
#include <cmath>

#include "common/ref_math.h"
#include "common/tensor_io.h"
#include "io/safetensors.h"

namespace mb::test {
namespace {

// x * (1 / sqrt(mean(x^2) + eps)) over [begin, begin + n).
void rms_scale(std::vector<double>& x, int64_t begin, int64_t n, double eps) {
  double sum = 0;
  for (int64_t i = begin; i < begin + n; ++i) sum += x[i] * x[i];
  const double inv = 1.0 / std::sqrt(sum / n + eps);
  for (int64_t i = begin; i < begin + n; ++i) x[i] *= inv;
}

}  // namespace

Mamba2Reference::Mamba2Reference(const std::string& dir, const DType* round_to)
    : config_(load_model_config(dir)) {
  const TensorSet set = TensorSet::open_dir(dir);
  const std::string embedding_name =
      set.find("backbone.embeddings.weight") ? "backbone.embeddings.weight" : "backbone.embedding.weight";
  embedding_ = read_tensor_values(set, embedding_name, nullptr, true);
  lm_head_ =
      read_tensor_values(set, config_.tie_embeddings ? embedding_name : "lm_head.weight", round_to, true);
  norm_f_ = read_tensor_values(set, "backbone.norm_f.weight", nullptr, true);
  const ModelConfig& c = config_;
  const int64_t H = c.ssm.d_inner / c.ssm.headdim, W = c.ssm.d_inner + 2 * c.ssm.ngroups * c.ssm.d_state;
  for (int64_t l = 0; l < c.n_layer; ++l) {
    const std::string p = "backbone.layers." + std::to_string(l) + ".";
    const std::string m = p + "mixer.";
    Layer layer;
    layer.norm = read_tensor_values(set, p + "norm.weight", nullptr, true);
    layer.in_proj = read_tensor_values(set, m + "in_proj.weight", round_to, true);
    layer.in_proj_bias = read_tensor_values(set, m + "in_proj.bias", nullptr);
    layer.conv_w = read_tensor_values(set, m + "conv1d.weight", nullptr, true);
    layer.conv_b = read_tensor_values(set, m + "conv1d.bias", nullptr);
    layer.dt_bias = read_tensor_values(set, m + "dt_bias", nullptr, true);
    layer.a_log = read_tensor_values(set, m + "A_log", nullptr, true);
    layer.d = read_tensor_values(set, m + "D", nullptr, true);
    layer.gate_norm = read_tensor_values(set, m + "norm.weight", nullptr);
    layer.out_proj = read_tensor_values(set, m + "out_proj.weight", round_to, true);
    layer.out_proj_bias = read_tensor_values(set, m + "out_proj.bias", nullptr);
    layer.conv_state.assign(W * c.ssm.d_conv, 0.0);
    layer.ssm.assign(H * c.ssm.headdim * c.ssm.d_state, 0.0);
    layers_.push_back(std::move(layer));
  }
}

std::vector<double> Mamba2Reference::step(int token) {
  const ModelConfig& c = config_;
  const int64_t d = c.d_model, di = c.ssm.d_inner, N = c.ssm.d_state, P = c.ssm.headdim, G = c.ssm.ngroups, K = c.ssm.d_conv;
  const int64_t H = di / P, W = di + 2 * G * N, ip = di + W + H;
  std::vector<double> h(embedding_.begin() + token * d, embedding_.begin() + (token + 1) * d);
  for (Layer& L : layers_) {
    std::vector<double> xn(h);
    rms_scale(xn, 0, d, c.norm_eps);
    for (int64_t k = 0; k < d; ++k) xn[k] *= L.norm[k];
    std::vector<double> zxbcdt(ip);
    for (int64_t o = 0; o < ip; ++o) {
      double s = L.in_proj_bias.empty() ? 0.0 : L.in_proj_bias[o];
      for (int64_t k = 0; k < d; ++k) s += L.in_proj[o * d + k] * xn[k];
      zxbcdt[o] = s;
    }
    // Causal depthwise conv over xBC, then SiLU.
    std::vector<double> xbc(W);
    for (int64_t ch = 0; ch < W; ++ch) {
      double* window = &L.conv_state[ch * K];
      for (int64_t k = 0; k + 1 < K; ++k) window[k] = window[k + 1];
      window[K - 1] = zxbcdt[di + ch];
      double s = L.conv_b.empty() ? 0.0 : L.conv_b[ch];
      for (int64_t k = 0; k < K; ++k) s += L.conv_w[ch * K + k] * window[k];
      xbc[ch] = silu(s);
    }
    // The SSM per head; head hd reads group hd / (H / G).
    std::vector<double> y(di);
    for (int64_t hd = 0; hd < H; ++hd) {
      const int64_t g = hd / (H / G);
      const double dt =
          std::clamp(softplus(zxbcdt[di + W + hd] + L.dt_bias[hd]), c.ssm.dt_limit_min, c.ssm.dt_limit_max);
      const double decay = std::exp(dt * -std::exp(L.a_log[hd]));
      for (int64_t p = 0; p < P; ++p) {
        const double x = xbc[hd * P + p];
        double out = 0;
        for (int64_t n = 0; n < N; ++n) {
          double& s = L.ssm[(hd * P + p) * N + n];
          s = decay * s + dt * x * xbc[di + g * N + n];
          out += s * xbc[di + G * N + g * N + n];
        }
        const double dskip = static_cast<int64_t>(L.d.size()) == di ? L.d[hd * P + p] : L.d[hd];
        y[hd * P + p] = out + dskip * x;
      }
    }
    // Gated RMSNorm, each group of d_inner / G channels on its own.
    for (int64_t k = 0; k < di; ++k) y[k] *= silu(zxbcdt[k]);
    if (!L.gate_norm.empty()) {
      for (int64_t g = 0; g < G; ++g) rms_scale(y, g * (di / G), di / G, c.norm_eps);
      for (int64_t k = 0; k < di; ++k) y[k] *= L.gate_norm[k];
    }
    for (int64_t o = 0; o < d; ++o) {
      double s = L.out_proj_bias.empty() ? 0.0 : L.out_proj_bias[o];
      for (int64_t k = 0; k < di; ++k) s += L.out_proj[o * di + k] * y[k];
      h[o] += s;
    }
  }
  rms_scale(h, 0, d, c.norm_eps);
  for (int64_t k = 0; k < d; ++k) h[k] *= norm_f_[k];
  std::vector<double> logits(c.vocab_size);
  for (int64_t v = 0; v < c.vocab_size; ++v) {
    double s = 0;
    for (int64_t k = 0; k < d; ++k) s += lm_head_[v * d + k] * h[k];
    logits[v] = s;
  }
  return logits;
}

}  // namespace mb::test
