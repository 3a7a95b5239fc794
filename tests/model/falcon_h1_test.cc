// SPDX-License-Identifier: MIT
// Falcon-H1 (model/families/falcon_h1.cc, model/blocks/falcon_h1_block.*): its config keys and
// refusals; its logits against a plain double-precision reference of transformers' modeling code
// (FalconH1ForCausalLM, ../shared/specs/hybrids.md section 4.4) for each form of the Mamba
// branch's gate (no norm; norm after the gate; norm before it), biases everywhere and tied
// embeddings; and the bitwise contract (prefill == decode, threads, rounds across the KV
// handoff, batches), compared with memcmp.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <nlohmann/json.hpp>

#include "common/model_fixture.h"
#include "common/test_util.h"
#include "core/error.h"
#include "engine/state_file.h"
#include "io/file_io.h"
#include "io/safetensors.h"
#include "model/families/falcon_h1.h"
#include "model/make_model.h"
#include "model/model.h"
#include "ops/quant.h"

namespace mb {
namespace {

using nlohmann::json;

json falcon_h1_json(const json& overrides = json::object()) {
  json j = falcon_h1_family().example(48, 3, 131);
  for (const auto& [key, value] : overrides.items()) j[key] = value;
  return j;
}

ModelConfig falcon_h1_cfg(const json& overrides = json::object()) {
  return parse_model_config(falcon_h1_json(overrides), "falcon-h1 test config");
}

std::string falcon_h1_error(const json& overrides) {
  try {
    falcon_h1_cfg(overrides);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(FalconH1Config, ReadsTheGoldensKeysAndTransformersDefaults) {
  const ModelConfig c = load_model_config(std::string(MB_TEST_DATA_DIR) + "/goldens/falcon-h1");
  EXPECT_EQ(c.family, ModelFamily::FalconH1);
  EXPECT_EQ(c.d_model, 64);
  EXPECT_EQ(c.ssm.d_inner, 96);
  EXPECT_EQ(c.ssm.headdim, 16);
  EXPECT_EQ(c.ssm.n_heads(), 6);
  EXPECT_EQ(c.ssm.ngroups, 2);
  EXPECT_EQ(c.hybrid.attention.head_dim, 24);
  EXPECT_DOUBLE_EQ(c.hybrid.attention.scale, 1.0 / std::sqrt(24.0));
  EXPECT_DOUBLE_EQ(c.hybrid.attention.rope_theta, 10000.0);
  EXPECT_TRUE(c.falcon.mamba_rms_norm);
  EXPECT_FALSE(c.falcon.norm_before_gate);
  EXPECT_DOUBLE_EQ(c.falcon.ssm_multipliers[3], 1.4);
  EXPECT_DOUBLE_EQ(c.falcon.mlp_multipliers[1], 0.5859375);
  EXPECT_DOUBLE_EQ(c.hybrid.embedding_multiplier, 4.0);
  EXPECT_DOUBLE_EQ(c.falcon.key, 0.390625);
  EXPECT_FALSE(c.tie_embeddings);
  EXPECT_EQ(c.blocks().size(), 8u);

  // transformers' defaults: no gated norm, norm before the gate, multipliers 1, theta 1e11.
  json bare = falcon_h1_json();
  for (const char* key : {"mamba_rms_norm", "mamba_norm_before_gate", "ssm_multipliers", "mlp_multipliers",
                          "key_multiplier", "rope_theta", "head_dim", "lm_head_multiplier"})
    bare.erase(key);
  const ModelConfig d = parse_model_config(bare, "bare");
  EXPECT_FALSE(d.falcon.mamba_rms_norm);
  EXPECT_TRUE(d.falcon.norm_before_gate);
  EXPECT_EQ(d.falcon.ssm_multipliers, std::vector<double>(5, 1.0));
  EXPECT_EQ(d.falcon.mlp_multipliers, std::vector<double>(2, 1.0));
  EXPECT_DOUBLE_EQ(d.falcon.key, 1.0);
  EXPECT_DOUBLE_EQ(d.hybrid.attention.rope_theta, 1e11);
  EXPECT_EQ(d.hybrid.attention.head_dim, 48 / 4);
}

TEST(FalconH1Config, RefusesWhatItCannotRunNamingTheKey) {
  const std::vector<std::pair<json, std::string>> cases = {
      {{{"rope_scaling", {{"type", "linear"}, {"factor", 2.0}}}}, "rope_scaling"},
      {{{"rope_parameters", {{"rope_type", "yarn"}}}}, "rope_parameters.rope_type"},
      {{{"ssm_multipliers", {1.0, 1.0, 1.0, 1.0}}}, "ssm_multipliers"},
      {{{"mlp_multipliers", {1.0}}}, "mlp_multipliers"},
      {{{"mlp_multipliers", "x"}}, "mlp_multipliers"},
      {{{"mamba_n_heads", 5}}, "mamba_n_heads"},
      {{{"mamba_n_groups", 4}}, "mamba_n_groups"},
      {{{"hidden_act", "gelu"}}, "hidden_act"},
      {{{"head_dim", 7}}, "head_dim"},
      {{{"key_multiplier", "big"}}, "key_multiplier"},
      {{{"lm_head_multiplier", 0.0}}, "lm_head_multiplier"},
      {{{"mamba_rms_norm", 1}}, "mamba_rms_norm"},
      {{{"time_step_limit", {0.5, 0.1}}}, "time_step_limit"},
  };
  for (const auto& [overrides, key] : cases) {
    const std::string message = falcon_h1_error(overrides);
    EXPECT_NE(message.find(key), std::string::npos) << overrides.dump() << " -> '" << message << "'";
  }
  json missing = falcon_h1_json();
  missing.erase("intermediate_size");
  EXPECT_THROW(
      {
        try {
          parse_model_config(missing, "missing");
        } catch (const Error& e) {
          EXPECT_NE(std::string(e.what()).find("intermediate_size"), std::string::npos) << e.what();
          throw;
        }
      },
      Error);
}

// The fingerprint that guards state and slot files covers every multiplier and gate option: a
// state saved by the model is refused by one that differs in any of them.
TEST(FalconH1Config, AStateOfAModelWithOtherMultipliersIsRefused) {
  MakeModelOptions options;
  options.config = falcon_h1_cfg();
  options.seed = 9;
  const std::string dir = test::write_model(options, "falcon_h1_fingerprint");
  const auto model = Model::load(dir);
  const auto tokens = test::random_tokens(6, model->config().vocab_size, 3);
  save_state(dir + "/a.state", *model, test::state_after(*model, tokens));
  EXPECT_EQ(load_state(dir + "/a.state", *model).position, 6);
  const json original = json::parse(read_text_file(dir + "/config.json"));
  const std::vector<std::pair<std::string, json>> changes = {
      {"key_multiplier", 0.5},
      {"ssm_multipliers", {0.3535533905932738, 0.5, 0.6, 1.4, 0.7}},
      {"mlp_multipliers", {0.8838834764831844, 0.5}},
      {"lm_head_multiplier", 0.25},
      {"mamba_norm_before_gate", true},
      {"rope_theta", 1e6}};
  for (const auto& [key, value] : changes) {
    json changed = original;
    changed[key] = value;
    write_file_atomically(dir + "/config.json", changed.dump());
    const auto other = Model::load(dir);
    EXPECT_NE(other->fingerprint(), model->fingerprint()) << key;
    EXPECT_THROW(load_state(dir + "/a.state", *other), Error) << key;
  }
}

// ---- The double-precision reference ----

class FalconH1Reference {
 public:
  FalconH1Reference(const ModelConfig& c, const std::string& dir)
      : c_(c), tensors_(TensorSet::open_file(dir + "/model.safetensors")) {}

  // Logits [T, vocab] of `tokens` from the start, as transformers computes them (in double).
  std::vector<double> logits(const std::vector<int32_t>& tokens) {
    const int64_t d = c_.d_model, L = c_.n_layer;
    layers_.assign(static_cast<size_t>(L), {});
    std::vector<double> out;
    for (size_t t = 0; t < tokens.size(); ++t) {
      std::vector<double> h = row("model.embed_tokens.weight", tokens[t], d);
      for (double& v : h) v *= c_.hybrid.embedding_multiplier;
      for (int64_t l = 0; l < L; ++l) layer(l, static_cast<int64_t>(t), h);
      const std::vector<double> hf = rms(h, get("model.final_layernorm.weight"));
      const std::string head = c_.tie_embeddings ? "model.embed_tokens.weight" : "lm_head.weight";
      std::vector<double> logit = matvec(head, hf, "");
      for (int64_t v = 0; v < c_.vocab_size; ++v) out.push_back(logit[v] * c_.falcon.lm_head);
    }
    return out;
  }

 private:
  struct LayerState {
    std::vector<std::vector<double>> conv_inputs;  // every position's conv input
    std::vector<double> ssm;                       // [H, P, N]
    std::vector<std::vector<double>> keys, values;
  };

  std::vector<double> get(const std::string& name) const {
    const StoredTensor* t = tensors_.find(name);
    if (t == nullptr) return {};
    std::vector<float> f(static_cast<size_t>(t->element_count()));
    dequantize_row(*t->dtype, t->data, t->element_count(), f.data());
    return {f.begin(), f.end()};
  }
  std::vector<double> row(const std::string& name, int64_t r, int64_t width) const {
    const std::vector<double> all = get(name);
    return {all.begin() + r * width, all.begin() + (r + 1) * width};
  }
  std::vector<double> matvec(const std::string& name, const std::vector<double>& x,
                             const std::string& bias) const {
    const std::vector<double> w = get(name), b = bias.empty() ? std::vector<double>() : get(bias);
    const size_t cols = x.size(), rows = w.size() / cols;
    std::vector<double> y(rows, 0.0);
    for (size_t r = 0; r < rows; ++r) {
      for (size_t k = 0; k < cols; ++k) y[r] += w[r * cols + k] * x[k];
      if (!b.empty()) y[r] += b[r];
    }
    return y;
  }
  // RMSNorm of each group of x's channels, times w.
  std::vector<double> rms(std::vector<double> x, const std::vector<double>& w, int64_t groups = 1) const {
    const size_t g = x.size() / static_cast<size_t>(groups);
    for (size_t s = 0; s < x.size(); s += g) {
      double ms = 0;
      for (size_t i = s; i < s + g; ++i) ms += x[i] * x[i];
      const double inv = 1.0 / std::sqrt(ms / static_cast<double>(g) + c_.norm_eps);
      for (size_t i = s; i < s + g; ++i) x[i] = x[i] * inv * w[i];
    }
    return x;
  }
  static double silu(double v) { return v / (1.0 + std::exp(-v)); }

  std::vector<double> mamba(int64_t l, const std::vector<double>& x) {
    const std::string p = "model.layers." + std::to_string(l) + ".mamba.";
    const FalconH1Config& f = c_.falcon;
    const int64_t di = c_.ssm.d_inner, G = c_.ssm.ngroups, N = c_.ssm.d_state, H = c_.ssm.n_heads(),
                  P = c_.ssm.headdim, W = di + 2 * G * N, K = c_.ssm.d_conv;
    std::vector<double> xs = x;
    for (double& v : xs) v *= f.ssm_in;
    std::vector<double> zx = matvec(p + "in_proj.weight", xs, c_.ssm.use_bias ? p + "in_proj.bias" : "");
    const int64_t bounds[] = {0, di, 2 * di, 2 * di + G * N, 2 * di + 2 * G * N, 2 * di + 2 * G * N + H};
    for (int s = 0; s < 5; ++s)
      for (int64_t i = bounds[s]; i < bounds[s + 1]; ++i) zx[i] *= f.ssm_multipliers[s];
    LayerState& st = layers_[l];
    st.conv_inputs.emplace_back(zx.begin() + di, zx.begin() + di + W);
    const std::vector<double> cw = get(p + "conv1d.weight"), cb = get(p + "conv1d.bias");
    std::vector<double> xbc(W);
    const int64_t t = static_cast<int64_t>(st.conv_inputs.size()) - 1;
    for (int64_t ch = 0; ch < W; ++ch) {
      double acc = cb.empty() ? 0.0 : cb[ch];
      for (int64_t k = 0; k < K; ++k) {
        const int64_t src = t - (K - 1) + k;
        if (src >= 0) acc += cw[ch * K + k] * st.conv_inputs[src][ch];
      }
      xbc[ch] = silu(acc);
    }
    if (st.ssm.empty()) st.ssm.assign(static_cast<size_t>(H * P * N), 0.0);
    const std::vector<double> dt_bias = get(p + "dt_bias"), a_log = get(p + "A_log"), dskip = get(p + "D");
    std::vector<double> y(di);
    for (int64_t h = 0; h < H; ++h) {
      const int64_t g = h / (H / G);
      const double raw = zx[2 * di + 2 * G * N + h] + dt_bias[h];
      const double dt = raw > 20.0 ? raw : std::log1p(std::exp(raw));
      const double decay = std::exp(dt * -std::exp(a_log[h]));
      for (int64_t q = 0; q < P; ++q) {
        const double xv = xbc[h * P + q];
        double acc = 0;
        for (int64_t n = 0; n < N; ++n) {
          double& s = st.ssm[(h * P + q) * N + n];
          s = s * decay + dt * xv * xbc[di + g * N + n];
          acc += s * xbc[di + G * N + g * N + n];
        }
        y[h * P + q] = acc + dskip[h] * xv;
      }
    }
    const std::vector<double> norm_w = get(p + "norm.weight");
    if (!f.mamba_rms_norm) {
      for (int64_t i = 0; i < di; ++i) y[i] *= silu(zx[i]);
    } else if (!f.norm_before_gate) {
      for (int64_t i = 0; i < di; ++i) y[i] *= silu(zx[i]);
      y = rms(y, norm_w, G);
    } else {
      y = rms(y, norm_w, G);
      for (int64_t i = 0; i < di; ++i) y[i] *= silu(zx[i]);
    }
    std::vector<double> out = matvec(p + "out_proj.weight", y, f.projectors_bias ? p + "out_proj.bias" : "");
    for (double& v : out) v *= f.ssm_out;
    return out;
  }

  std::vector<double> attention(int64_t l, int64_t pos, const std::vector<double>& x) {
    const std::string p = "model.layers." + std::to_string(l) + ".self_attn.";
    const AttentionConfig& a = c_.hybrid.attention;
    const auto bias = [&](const char* n) { return a.bias ? p + n + ".bias" : std::string(); };
    std::vector<double> xa = x;
    for (double& v : xa) v *= c_.falcon.attention_in;
    std::vector<double> q = matvec(p + "q_proj.weight", xa, bias("q_proj"));
    std::vector<double> k = matvec(p + "k_proj.weight", xa, bias("k_proj"));
    const std::vector<double> v = matvec(p + "v_proj.weight", xa, bias("v_proj"));
    for (double& e : k) e *= c_.falcon.key;
    const int64_t hd = a.head_dim, half = hd / 2;
    const auto rotate = [&](std::vector<double>& rows) {
      for (size_t base = 0; base < rows.size(); base += static_cast<size_t>(hd))
        for (int64_t i = 0; i < half; ++i) {
          const double angle = static_cast<double>(pos) / std::pow(a.rope_theta, 2.0 * i / hd);
          const double x0 = rows[base + i], x1 = rows[base + i + half];
          rows[base + i] = x0 * std::cos(angle) - x1 * std::sin(angle);
          rows[base + i + half] = x1 * std::cos(angle) + x0 * std::sin(angle);
        }
    };
    rotate(q);
    rotate(k);
    LayerState& st = layers_[l];
    st.keys.push_back(k);
    st.values.push_back(v);
    std::vector<double> o(q.size(), 0.0);
    const int64_t per_kv = a.n_heads / a.n_kv_heads;
    for (int64_t h = 0; h < a.n_heads; ++h) {
      const int64_t kvh = h / per_kv;
      std::vector<double> s;
      double top = -INFINITY, sum = 0;
      for (const auto& key : st.keys) {
        double dot = 0;
        for (int64_t i = 0; i < hd; ++i) dot += q[h * hd + i] * key[kvh * hd + i];
        s.push_back(dot * a.scale);
        top = std::max(top, s.back());
      }
      for (double& e : s) sum += (e = std::exp(e - top));
      for (size_t j = 0; j < s.size(); ++j)
        for (int64_t i = 0; i < hd; ++i) o[h * hd + i] += s[j] / sum * st.values[j][kvh * hd + i];
    }
    std::vector<double> out = matvec(p + "o_proj.weight", o, bias("o_proj"));
    for (double& e : out) e *= c_.falcon.attention_out;
    return out;
  }

  void layer(int64_t l, int64_t pos, std::vector<double>& h) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    const std::vector<double> x = rms(h, get(p + "input_layernorm.weight"));
    const std::vector<double> m = mamba(l, x), a = attention(l, pos, x);
    for (size_t i = 0; i < h.size(); ++i) h[i] += m[i] + a[i];
    const std::vector<double> x2 = rms(h, get(p + "pre_ff_layernorm.weight"));
    const auto bias = [&](const char* n) {
      return c_.hybrid.mlp.bias ? p + "feed_forward." + n + ".bias" : std::string();
    };
    const std::vector<double> gate = matvec(p + "feed_forward.gate_proj.weight", x2, bias("gate_proj"));
    std::vector<double> up = matvec(p + "feed_forward.up_proj.weight", x2, bias("up_proj"));
    for (size_t i = 0; i < up.size(); ++i) up[i] *= silu(gate[i] * c_.falcon.mlp_multipliers[0]);
    const std::vector<double> down = matvec(p + "feed_forward.down_proj.weight", up, bias("down_proj"));
    for (size_t i = 0; i < h.size(); ++i) h[i] += down[i] * c_.falcon.mlp_multipliers[1];
  }

  const ModelConfig& c_;
  TensorSet tensors_;
  std::vector<LayerState> layers_;
};

struct FalconH1Variant {
  std::string name;
  json overrides;
};

class FalconH1Logits : public ::testing::TestWithParam<FalconH1Variant> {};

TEST_P(FalconH1Logits, MatchTheDoubleReferenceOfTransformersCode) {
  MakeModelOptions options;
  options.config = falcon_h1_cfg(GetParam().overrides);
  options.seed = 42;
  const std::string dir = test::write_model(options, "falcon_h1_ref");
  const auto model = Model::load(dir);
  const auto tokens = test::random_tokens(40, model->config().vocab_size, 5);
  FalconH1Reference reference(model->config(), dir);
  const std::vector<double> expected = reference.logits(tokens);
  SequenceState state = model->new_state();
  const std::vector<float> ours =
      test::prefill(*model, ComputeContext{2, best_isa()}, tokens, state, {OutputKind::LogitsAll, 0});
  ASSERT_EQ(ours.size(), expected.size());
  double peak = 0, diff = 0;
  for (size_t i = 0; i < expected.size(); ++i) {
    peak = std::max(peak, std::fabs(expected[i]));
    diff = std::max(diff, std::fabs(ours[i] - expected[i]));
  }
  EXPECT_LE(diff / peak, 1e-5) << GetParam().name;
  std::printf("[ falcon-h1 ] %-24s max|diff|/max|ref| = %.3g\n", GetParam().name.c_str(), diff / peak);
}

INSTANTIATE_TEST_SUITE_P(
    Forms, FalconH1Logits,
    ::testing::Values(
        FalconH1Variant{"norm_after_gate", json::object()},
        FalconH1Variant{"norm_before_gate", {{"mamba_norm_before_gate", true}, {"mamba_n_groups", 6}}},
        FalconH1Variant{"gate_only_tied", {{"mamba_rms_norm", false}, {"tie_word_embeddings", true}}},
        FalconH1Variant{"biases_rope_1e11",
                        {{"attention_bias", true},
                         {"mlp_bias", true},
                         {"mamba_proj_bias", true},
                         {"projectors_bias", true},
                         {"mamba_conv_bias", false},
                         {"num_key_value_heads", 1},
                         {"rope_theta", 1e11}}}),
    [](const auto& info) { return info.param.name; });

// ---- The bitwise contract ----

struct FalconH1Shape {
  std::string name;
  json overrides;
  DType dtype;
  int64_t max_length;
};

const Model& falcon_h1_model_for(const FalconH1Shape& shape) {
  static std::map<std::string, std::unique_ptr<Model>> models;
  auto it = models.find(shape.name);
  if (it == models.end()) {
    MakeModelOptions options;
    options.config = falcon_h1_cfg(shape.overrides);
    options.dtype = shape.dtype;
    options.seed = 77;
    it = models.emplace(shape.name, Model::load(test::write_model(options, "falcon_h1"))).first;
  }
  return *it->second;
}

class FalconH1Exactness : public ::testing::TestWithParam<FalconH1Shape> {};

TEST_P(FalconH1Exactness, PrefillEqualsDecodeStepsForEveryLength) {
  test::expect_prefill_equals_steps_for_every_length(falcon_h1_model_for(GetParam()), GetParam().max_length);
}

TEST_P(FalconH1Exactness, ThreadCountsRoundSizesAndInstructionSetsChangeNoBit) {
  const Model& model = falcon_h1_model_for(GetParam());
  // Rounds of 1, 7 and 64 positions hand the KV cache over between rounds inside and across its
  // blocks of positions; the chunked scan's rounds are whole chunks (mamba_chunk_size 32), where
  // its SSD chunks start the same way whatever the round.
  const auto tokens = test::random_tokens(100, model.config().vocab_size, 4);
  test::expect_threads_rounds_and_isas_change_no_bit(model, tokens, {0, 1, 7, 64});
  test::expect_threads_rounds_and_isas_change_no_bit(model, tokens, {0, 32}, ScanForm::Chunked);
}

TEST_P(FalconH1Exactness, EachSequenceOfABatchEqualsItAlone) {
  const Model& model = falcon_h1_model_for(GetParam());
  const std::vector<size_t> lengths = {1, 5, 17, 70, 3, 90};
  std::vector<std::vector<int32_t>> prompts;
  for (size_t i = 0; i < lengths.size(); ++i)
    prompts.push_back(test::random_tokens(lengths[i], model.config().vocab_size, 30 + i));
  test::expect_batch_equals_each_alone(model, prompts, {OutputKind::LogitsLast, OutputKind::LogitsAll},
                                       {0, 4});
  test::expect_batched_steps_equal_solo(model, ComputeContext{2, best_isa()}, prompts.size(), 12);
}

TEST_P(FalconH1Exactness, PrefillThenDecodeContinuesLikeDecodeAllTheWay) {
  test::expect_prefill_then_decode_equals_decode(falcon_h1_model_for(GetParam()),
                                                 ComputeContext{2, best_isa()}, {OutputKind::None, 8});
}

INSTANTIATE_TEST_SUITE_P(Shapes, FalconH1Exactness,
                         ::testing::Values(FalconH1Shape{"f32", json::object(), DType::F32, 200},
                                           FalconH1Shape{
                                               "bf16_norm_before_gate",
                                               {{"mamba_norm_before_gate", true}, {"num_key_value_heads", 1}},
                                               DType::BF16,
                                               100}),
                         [](const auto& info) { return info.param.name; });

}  // namespace
}  // namespace mb
