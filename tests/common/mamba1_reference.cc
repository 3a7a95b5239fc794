// SPDX-License-Identifier: MIT
#include "common/mamba1_reference.h"

#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <utility>

#include "io/mapped_file.h"
#include "common/ref_math.h"
#include "common/tensor_io.h"
#include "io/safetensors.h"

namespace mb::test {
namespace {

using nlohmann::json;

double rms_inverse(const std::vector<double>& x, double eps) {
  double sum = 0;
  for (double v : x) sum += v * v;
  return 1.0 / std::sqrt(sum / x.size() + eps);
}

}  // namespace

Mamba1Reference::Mamba1Reference(const std::string& dir, const DType* round_to) {
  const json config = json::parse(read_text_file(dir + "/config.json"));
  const bool hf = config.contains("hidden_size");
  const json ssm = hf ? json::object() : config.value("ssm_cfg", json::object());
  d_model_ = hf ? config["hidden_size"].get<int64_t>() : config["d_model"].get<int64_t>();
  const int64_t n_layer = hf ? config["num_hidden_layers"].get<int64_t>() : config["n_layer"].get<int64_t>();
  vocab_size_ = config["vocab_size"].get<int64_t>();
  d_state_ = hf ? config["state_size"].get<int64_t>() : ssm.value("d_state", 16);
  d_conv_ = hf ? config["conv_kernel"].get<int64_t>() : ssm.value("d_conv", 4);
  const int64_t expand = hf ? config.value("expand", 2) : ssm.value("expand", 2);
  d_inner_ = expand * d_model_;
  const json rank = hf ? config.value("time_step_rank", json("auto")) : ssm.value("dt_rank", json("auto"));
  dt_rank_ = rank.is_string() ? (d_model_ + 15) / 16 : rank.get<int64_t>();
  eps_ = hf ? config.value("layer_norm_epsilon", 1e-5) : 1e-5;
  const bool tied = hf ? config.value("tie_word_embeddings", true) : config.value("tie_embeddings", true);
  mixer_rms_norm_ = config.value("model_type", "") == "falcon_mamba";
  mixer_rms_eps_ = config.value("mixer_rms_eps", 1e-6);

  const TensorSet set = TensorSet::open_dir(dir);
  // Lookups read the embedding as stored; only the LM head is held in the engine's storage dtype.
  const std::string embedding_name = set.find("backbone.embeddings.weight") ? "backbone.embeddings.weight" : "backbone.embedding.weight";
  embedding_ = read_tensor_values(set, embedding_name, nullptr);
  lm_head_ = read_tensor_values(set, tied ? embedding_name : "lm_head.weight", round_to);
  norm_f_ = read_tensor_values(set, "backbone.norm_f.weight", nullptr);
  input_proj_ = read_tensor_values(set, "input_proj.weight", round_to);
  input_proj_bias_ = read_tensor_values(set, "input_proj.bias", nullptr);
  for (int64_t l = 0; l < n_layer; ++l) {
    const std::string p = "backbone.layers." + std::to_string(l) + ".";
    const std::string m = p + "mixer.";
    Layer layer;
    layer.norm = read_tensor_values(set, p + "norm.weight", nullptr);
    layer.in_proj = read_tensor_values(set, m + "in_proj.weight", round_to);
    layer.in_proj_bias = read_tensor_values(set, m + "in_proj.bias", nullptr);
    layer.conv_w = read_tensor_values(set, m + "conv1d.weight", nullptr);
    layer.conv_b = read_tensor_values(set, m + "conv1d.bias", nullptr);
    layer.x_proj = read_tensor_values(set, m + "x_proj.weight", round_to);
    layer.dt_proj = read_tensor_values(set, m + "dt_proj.weight", round_to);
    layer.dt_bias = read_tensor_values(set, m + "dt_proj.bias", nullptr);
    layer.a_log = read_tensor_values(set, m + "A_log", nullptr);
    layer.d = read_tensor_values(set, m + "D", nullptr);
    layer.out_proj = read_tensor_values(set, m + "out_proj.weight", round_to);
    layer.out_proj_bias = read_tensor_values(set, m + "out_proj.bias", nullptr);
    layer.conv_state.assign(d_inner_ * d_conv_, 0.0);
    layer.ssm.assign(d_inner_ * d_state_, 0.0);
    layers_.push_back(std::move(layer));
  }
}

std::vector<double> Mamba1Reference::step(int token) {
  return step_hidden(std::vector<double>(embedding_.begin() + token * d_model_, embedding_.begin() + (token + 1) * d_model_));
}

std::vector<double> Mamba1Reference::step_features(const std::vector<float>& features) {
  const int64_t d = d_model_, in = static_cast<int64_t>(features.size());
  std::vector<double> h(d);
  for (int64_t o = 0; o < d; ++o) {
    double s = input_proj_bias_.empty() ? 0.0 : input_proj_bias_[o];
    for (int64_t k = 0; k < in; ++k) s += input_proj_[o * in + k] * features[k];
    h[o] = s;
  }
  return step_hidden(std::move(h));
}

std::vector<double> Mamba1Reference::step_hidden(std::vector<double> h) {
  const int64_t d = d_model_, D = d_inner_, N = d_state_, K = d_conv_, R = dt_rank_;
  for (Layer& L : layers_) {
    const double inv = rms_inverse(h, eps_);
    std::vector<double> xn(d);
    for (int64_t k = 0; k < d; ++k) xn[k] = h[k] * inv * L.norm[k];
    std::vector<double> xz(2 * D);
    for (int64_t o = 0; o < 2 * D; ++o) {
      double s = L.in_proj_bias.empty() ? 0.0 : L.in_proj_bias[o];
      for (int64_t k = 0; k < d; ++k) s += L.in_proj[o * d + k] * xn[k];
      xz[o] = s;
    }
    std::vector<double> u(D);
    for (int64_t c = 0; c < D; ++c) {
      double* window = &L.conv_state[c * K];
      for (int64_t k = 0; k + 1 < K; ++k) window[k] = window[k + 1];
      window[K - 1] = xz[c];
      double s = L.conv_b.empty() ? 0.0 : L.conv_b[c];
      for (int64_t k = 0; k < K; ++k) s += L.conv_w[c * K + k] * window[k];
      u[c] = silu(s);
    }
    std::vector<double> xdbl(R + 2 * N);
    for (int64_t o = 0; o < R + 2 * N; ++o) {
      double s = 0;
      for (int64_t k = 0; k < D; ++k) s += L.x_proj[o * D + k] * u[k];
      xdbl[o] = s;
    }
    if (mixer_rms_norm_) {
      // rms_forward(h) = h * rsqrt(mean(h^2) + eps) on each of dt_low, B and C separately.
      for (const auto& [begin, width] : {std::pair<int64_t, int64_t>{0, R}, {R, N}, {R + N, N}}) {
        std::vector<double> part(xdbl.begin() + begin, xdbl.begin() + begin + width);
        const double inv = rms_inverse(part, mixer_rms_eps_);
        for (int64_t k = 0; k < width; ++k) xdbl[begin + k] *= inv;
      }
    }
    std::vector<double> y(D);
    for (int64_t c = 0; c < D; ++c) {
      double dt = L.dt_bias[c];
      for (int64_t r = 0; r < R; ++r) dt += L.dt_proj[c * R + r] * xdbl[r];
      dt = softplus(dt);
      double out = 0;
      for (int64_t n = 0; n < N; ++n) {
        const double a = -std::exp(L.a_log[c * N + n]);
        double& state = L.ssm[c * N + n];
        state = std::exp(dt * a) * state + dt * xdbl[R + n] * u[c];
        out += state * xdbl[R + N + n];
      }
      out += L.d[c] * u[c];
      y[c] = out * silu(xz[D + c]);
    }
    for (int64_t o = 0; o < d; ++o) {
      double s = L.out_proj_bias.empty() ? 0.0 : L.out_proj_bias[o];
      for (int64_t k = 0; k < D; ++k) s += L.out_proj[o * D + k] * y[k];
      h[o] += s;
    }
  }
  const double inv = rms_inverse(h, eps_);
  last_hidden_.assign(d, 0.0);
  for (int64_t k = 0; k < d; ++k) last_hidden_[k] = h[k] * inv * norm_f_[k];
  std::vector<double> logits(vocab_size_);
  for (int64_t v = 0; v < vocab_size_; ++v) {
    double s = 0;
    for (int64_t k = 0; k < d; ++k) s += lm_head_[v * d + k] * last_hidden_[k];
    logits[v] = s;
  }
  return logits;
}

}  // namespace mb::test
