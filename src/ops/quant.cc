// SPDX-License-Identifier: MIT
#include "ops/quant.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "core/error.h"
#include "ops/cpu/vec16.h"

namespace mb {
namespace {

// GGML's rounding for the K-quants: adding 1.5 * 2^23 leaves the integer, rounded to nearest
// even, in the low mantissa bits. Valid for |x| <= 2^22 - 1; outside, it returns what GGML's
// returns (the same bits), so the blocks still agree.
int nearest_int(float x) {
  const float shifted = x + 12582912.0f;
  int32_t bits;
  std::memcpy(&bits, &shifted, sizeof bits);
  return (bits & 0x007fffff) - 0x00400000;
}

// GGML treats a group whose largest magnitude is below this as all zero.
constexpr float kGroupMaxEps = 1e-15f;

void quantize_q8_0(const float* x, BlockQ8_0& block) {
  float amax = 0.0f;
  for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[j]));
  const float d = amax / 127.0f;
  const float inverse = d != 0.0f ? 1.0f / d : 0.0f;
  block.d = f32_to_f16(d);
  // std::round rounds halves away from zero, as C's roundf does.
  for (int j = 0; j < 32; ++j) block.qs[j] = static_cast<int8_t>(std::round(x[j] * inverse));
}

void quantize_q4_0(const float* x, BlockQ4_0& block) {
  // The scale maps the value of largest magnitude, with its sign, to -8: the asymmetric end of
  // the 4-bit range gets the extreme.
  float amax = 0.0f, extreme = 0.0f;
  for (int j = 0; j < 32; ++j) {
    if (amax < std::fabs(x[j])) {
      amax = std::fabs(x[j]);
      extreme = x[j];
    }
  }
  const float d = extreme / -8.0f;
  const float inverse = d != 0.0f ? 1.0f / d : 0.0f;
  block.d = f32_to_f16(d);
  for (int j = 0; j < 16; ++j) {
    // Truncation after + 8.5 (not rounding), as GGML does; the values are >= 0 here.
    const int low = std::min(15, static_cast<int>(static_cast<int8_t>(x[j] * inverse + 8.5f)));
    const int high = std::min(15, static_cast<int>(static_cast<int8_t>(x[j + 16] * inverse + 8.5f)));
    block.qs[j] = static_cast<uint8_t>(low | (high << 4));
  }
}

// GGML's make_qkx2_quants: levels 0..nmax with a scale and a min (min <= 0) for n weights,
// chosen by a weighted least-squares search over nstep + 1 candidate scales. Returns the scale;
// `neg_min` receives -min. The operation order is GGML's, so the result is bit-identical.
float search_scale_and_min(int n, int nmax, const float* x, const float* weights, uint8_t* levels,
                           float& neg_min, float rmin, float rdelta, int nstep) {
  float min = x[0], max = x[0];
  float sum_w = weights[0];
  float sum_x = sum_w * x[0];
  for (int i = 1; i < n; ++i) {
    if (x[i] < min) min = x[i];
    if (x[i] > max) max = x[i];
    sum_w += weights[i];
    sum_x += weights[i] * x[i];
  }
  if (min > 0) min = 0;
  if (max == min) {
    std::fill(levels, levels + n, uint8_t{0});
    neg_min = -min;
    return 0.0f;
  }
  float inverse = static_cast<float>(nmax) / (max - min);
  float scale = 1.0f / inverse;
  float best_error = 0.0f;
  for (int i = 0; i < n; ++i) {
    const int l = nearest_int(inverse * (x[i] - min));
    levels[i] = static_cast<uint8_t>(std::max(0, std::min(nmax, l)));
    float diff = scale * static_cast<float>(levels[i]) + min - x[i];
    diff = diff * diff;
    best_error += weights[i] * diff;
  }
  uint8_t candidate[32];
  for (int step = 0; step <= nstep; ++step) {
    inverse = (rmin + rdelta * static_cast<float>(step) + static_cast<float>(nmax)) / (max - min);
    float sum_l = 0.0f, sum_l2 = 0.0f, sum_xl = 0.0f;
    for (int i = 0; i < n; ++i) {
      const int l = std::max(0, std::min(nmax, nearest_int(inverse * (x[i] - min))));
      candidate[i] = static_cast<uint8_t>(l);
      const float lf = static_cast<float>(l);
      sum_l += weights[i] * lf;
      sum_l2 += weights[i] * lf * lf;
      sum_xl += weights[i] * lf * x[i];
    }
    const float det = sum_w * sum_l2 - sum_l * sum_l;
    if (det > 0) {
      float this_scale = (sum_w * sum_xl - sum_x * sum_l) / det;
      float this_min = (sum_l2 * sum_x - sum_l * sum_xl) / det;
      if (this_min > 0) {
        this_min = 0;
        this_scale = sum_xl / sum_l2;
      }
      float error = 0.0f;
      for (int i = 0; i < n; ++i) {
        float diff = this_scale * static_cast<float>(candidate[i]) + this_min - x[i];
        diff = diff * diff;
        error += weights[i] * diff;
      }
      if (error < best_error) {
        std::copy(candidate, candidate + n, levels);
        best_error = error;
        scale = this_scale;
        min = this_min;
      }
    }
  }
  neg_min = -min;
  return scale;
}

void quantize_q4_k(const float* x, BlockQ4_K& block) {
  uint8_t levels[256];
  float scales[8], mins[8];
  float max_scale = 0.0f, max_min = 0.0f;
  for (int j = 0; j < 8; ++j) {
    const float* sub = x + 32 * j;
    float sum_x2 = 0.0f;
    for (int l = 0; l < 32; ++l) sum_x2 += sub[l] * sub[l];
    const float average = std::sqrt(sum_x2 / 32.0f);
    float weights[32];
    for (int l = 0; l < 32; ++l) weights[l] = average + std::fabs(sub[l]);
    scales[j] = search_scale_and_min(32, 15, sub, weights, levels + 32 * j, mins[j], -1.0f, 0.1f, 20);
    if (scales[j] > max_scale) max_scale = scales[j];
    if (mins[j] > max_min) max_min = mins[j];
  }
  const float inverse_scale = max_scale > 0 ? 63.0f / max_scale : 0.0f;
  const float inverse_min = max_min > 0 ? 63.0f / max_min : 0.0f;
  std::memset(block.scales, 0, sizeof block.scales);
  for (int j = 0; j < 8; ++j) {
    // GGML stores nearest_int's result in a uint8_t before clamping; the cast keeps that.
    const uint8_t ls = std::min<uint8_t>(63, static_cast<uint8_t>(nearest_int(inverse_scale * scales[j])));
    const uint8_t lm = std::min<uint8_t>(63, static_cast<uint8_t>(nearest_int(inverse_min * mins[j])));
    if (j < 4) {
      block.scales[j] = ls;
      block.scales[j + 4] = lm;
    } else {
      block.scales[j + 4] = static_cast<uint8_t>((ls & 15) | ((lm & 15) << 4));
      block.scales[j - 4] |= static_cast<uint8_t>((ls >> 4) << 6);
      block.scales[j] |= static_cast<uint8_t>((lm >> 4) << 6);
    }
  }
  block.d = f32_to_f16(max_scale / 63.0f);
  block.dmin = f32_to_f16(max_min / 63.0f);
  // Requantize every weight against the scales as stored (6-bit, times the f16 super-scales).
  for (int j = 0; j < 8; ++j) {
    uint8_t sc, m;
    q4_k_scale_min(j, block.scales, sc, m);
    const float d = f16_to_f32(block.d) * static_cast<float>(sc);
    if (d == 0.0f) continue;
    const float dm = f16_to_f32(block.dmin) * static_cast<float>(m);
    for (int i = 0; i < 32; ++i) {
      const int l = nearest_int((x[32 * j + i] + dm) / d);
      levels[32 * j + i] = static_cast<uint8_t>(std::max(0, std::min(15, l)));
    }
  }
  for (int g = 0; g < 4; ++g)
    for (int l = 0; l < 32; ++l)
      block.qs[32 * g + l] = static_cast<uint8_t>(levels[64 * g + l] | (levels[64 * g + 32 + l] << 4));
}

// GGML's make_qx_quants with rmse_type 1 and no importance weights: symmetric levels
// -nmax..nmax-1 (stored + nmax), the scale chosen among 19 candidates by weighted (x^2) least
// squares. Returns the scale.
float search_symmetric_scale(int n, int nmax, const float* x, int8_t* levels) {
  float max = 0.0f, amax = 0.0f;
  for (int i = 0; i < n; ++i) {
    if (std::fabs(x[i]) > amax) {
      amax = std::fabs(x[i]);
      max = x[i];
    }
  }
  if (amax < kGroupMaxEps) {
    std::fill(levels, levels + n, int8_t{0});
    return 0.0f;
  }
  auto level_at = [nmax](float inverse, float value) {
    return std::max(-nmax, std::min(nmax - 1, nearest_int(inverse * value)));
  };
  float inverse = static_cast<float>(-nmax) / max;
  float sum_lx = 0.0f, sum_l2 = 0.0f;
  for (int i = 0; i < n; ++i) {
    const int l = level_at(inverse, x[i]);
    levels[i] = static_cast<int8_t>(l + nmax);
    const float w = x[i] * x[i];
    sum_lx += w * x[i] * static_cast<float>(l);
    sum_l2 += w * static_cast<float>(l) * static_cast<float>(l);
  }
  float scale = sum_l2 != 0.0f ? sum_lx / sum_l2 : 0.0f;
  float best = scale * sum_lx;
  for (int step = -9; step <= 9; ++step) {
    if (step == 0) continue;
    inverse = -(static_cast<float>(nmax) + 0.1f * static_cast<float>(step)) / max;
    sum_lx = sum_l2 = 0.0f;
    for (int i = 0; i < n; ++i) {
      const int l = level_at(inverse, x[i]);
      const float w = x[i] * x[i];
      sum_lx += w * x[i] * static_cast<float>(l);
      sum_l2 += w * static_cast<float>(l) * static_cast<float>(l);
    }
    if (sum_l2 > 0 && sum_lx * sum_lx > best * sum_l2) {
      for (int i = 0; i < n; ++i) levels[i] = static_cast<int8_t>(nmax + level_at(inverse, x[i]));
      scale = sum_lx / sum_l2;
      best = scale * sum_lx;
    }
  }
  return scale;
}

void quantize_q6_k(const float* x, BlockQ6_K& block) {
  int8_t levels[256];
  float scales[16];
  float max_scale = 0.0f, max_abs_scale = 0.0f;
  for (int b = 0; b < 16; ++b) {
    scales[b] = search_symmetric_scale(16, 32, x + 16 * b, levels + 16 * b);
    if (std::fabs(scales[b]) > max_abs_scale) {
      max_abs_scale = std::fabs(scales[b]);
      max_scale = scales[b];
    }
  }
  if (max_abs_scale < kGroupMaxEps) {
    std::memset(&block, 0, sizeof block);
    return;
  }
  const float inverse = -128.0f / max_scale;
  block.d = f32_to_f16(1.0f / inverse);
  for (int b = 0; b < 16; ++b)
    block.scales[b] = static_cast<int8_t>(std::min(127, nearest_int(inverse * scales[b])));
  for (int b = 0; b < 16; ++b) {
    const float d = f16_to_f32(block.d) * static_cast<float>(block.scales[b]);
    if (d == 0.0f) continue;
    for (int i = 0; i < 16; ++i) {
      const int l = std::max(-32, std::min(31, nearest_int(x[16 * b + i] / d)));
      levels[16 * b + i] = static_cast<int8_t>(l + 32);
    }
  }
  for (int half = 0; half < 2; ++half) {
    const int8_t* L = levels + 128 * half;
    uint8_t* ql = block.ql + 64 * half;
    uint8_t* qh = block.qh + 32 * half;
    for (int l = 0; l < 32; ++l) {
      ql[l] = static_cast<uint8_t>((L[l] & 15) | ((L[l + 64] & 15) << 4));
      ql[l + 32] = static_cast<uint8_t>((L[l + 32] & 15) | ((L[l + 96] & 15) << 4));
      qh[l] = static_cast<uint8_t>((L[l] >> 4) | ((L[l + 32] >> 4) << 2) | ((L[l + 64] >> 4) << 4) |
                                   ((L[l + 96] >> 4) << 6));
    }
  }
}

void dequantize_q8_0(const BlockQ8_0& block, float* y) {
  const float d = f16_to_f32(block.d);
  for (int j = 0; j < 32; ++j) y[j] = static_cast<float>(block.qs[j]) * d;
}

void dequantize_q4_0(const BlockQ4_0& block, float* y) {
  const float d = f16_to_f32(block.d);
  for (int j = 0; j < 16; ++j) {
    y[j] = static_cast<float>((block.qs[j] & 15) - 8) * d;
    y[j + 16] = static_cast<float>((block.qs[j] >> 4) - 8) * d;
  }
}

void dequantize_q4_k(const BlockQ4_K& block, float* y) {
  const float d = f16_to_f32(block.d);
  const float dmin = f16_to_f32(block.dmin);
  for (int g = 0; g < 4; ++g) {
    const uint8_t* q = block.qs + 32 * g;
    uint8_t sc, m;
    q4_k_scale_min(2 * g, block.scales, sc, m);
    const float d1 = d * static_cast<float>(sc), m1 = dmin * static_cast<float>(m);
    q4_k_scale_min(2 * g + 1, block.scales, sc, m);
    const float d2 = d * static_cast<float>(sc), m2 = dmin * static_cast<float>(m);
    for (int l = 0; l < 32; ++l) y[64 * g + l] = d1 * static_cast<float>(q[l] & 15) - m1;
    for (int l = 0; l < 32; ++l) y[64 * g + 32 + l] = d2 * static_cast<float>(q[l] >> 4) - m2;
  }
}

void dequantize_q6_k(const BlockQ6_K& block, float* y) {
  const float d = f16_to_f32(block.d);
  for (int half = 0; half < 2; ++half) {
    const uint8_t* ql = block.ql + 64 * half;
    const uint8_t* qh = block.qh + 32 * half;
    const int8_t* sc = block.scales + 8 * half;
    float* out = y + 128 * half;
    for (int l = 0; l < 32; ++l) {
      const int s = l / 16;
      const int q1 = ((ql[l] & 15) | (((qh[l] >> 0) & 3) << 4)) - 32;
      const int q2 = ((ql[l + 32] & 15) | (((qh[l] >> 2) & 3) << 4)) - 32;
      const int q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
      const int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
      out[l] = d * static_cast<float>(sc[s]) * static_cast<float>(q1);
      out[l + 32] = d * static_cast<float>(sc[s + 2]) * static_cast<float>(q2);
      out[l + 64] = d * static_cast<float>(sc[s + 4]) * static_cast<float>(q3);
      out[l + 96] = d * static_cast<float>(sc[s + 6]) * static_cast<float>(q4);
    }
  }
}

// Runs `per_block` over the n / B blocks of a row, copying each block through an aligned local
// (rows in files and packed buffers need not be aligned).
template <typename Block, int64_t B, typename Fn>
void for_each_block_out(const float* x, int64_t n, void* out, Fn per_block) {
  auto* bytes = static_cast<uint8_t*>(out);
  for (int64_t b = 0; b < n / B; ++b) {
    Block block{};
    per_block(x + b * B, block);
    std::memcpy(bytes + b * sizeof(Block), &block, sizeof(Block));
  }
}
template <typename Block, int64_t B, typename Fn>
void for_each_block_in(const void* in, int64_t n, float* y, Fn per_block) {
  const auto* bytes = static_cast<const uint8_t*>(in);
  for (int64_t b = 0; b < n / B; ++b) {
    Block block;
    std::memcpy(&block, bytes + b * sizeof(Block), sizeof(Block));
    per_block(block, y + b * B);
  }
}

}  // namespace

void quantize_block_reference(DType type, const float* x, void* out) {
  quantize_row_reference(type, x, dtype_block_weights(type), out);
}

void quantize_row(DType type, const float* x, int64_t n, void* out, Isa isa) {
  const cpu::QuantKernels& kernels = cpu::kernels_for(isa).quant;  // throws for an ISA this CPU lacks
  if (!dtype_is_quantized(type)) return quantize_row_reference(type, x, n, out);
  dtype_row_bytes(type, n);  // throws unless n is a whole number of blocks
  kernels.quantize_weights(type, x, n / dtype_block_weights(type), static_cast<uint8_t*>(out));
}

void quantize_rows(const ComputeContext& ctx, const void* source, DType source_dtype, int64_t rows,
                   int64_t cols, DType target, void* out) {
  if (!dtype_is_quantized(target))
    throw Error("quantize_rows: " + std::string(dtype_name(target)) + " is not a quantized dtype");
  check_thread_count(ctx.n_threads);
  const size_t source_row = dtype_row_bytes(source_dtype, cols), target_row = dtype_row_bytes(target, cols);
  if (rows <= 0) return;
  const auto* src = static_cast<const uint8_t*>(source);
  auto* dst = static_cast<uint8_t*>(out);
  // Chunks of rows (about 8192 values) rather than single rows: a chunk's blocks are quantized as
  // one run, so the Q4_K search fills its sixteen lanes even where a row holds an odd number of
  // blocks. The chunking depends on cols only, and every block's bytes on its own values only.
  const int64_t chunk_rows = std::max<int64_t>(1, 8192 / std::max<int64_t>(1, cols));
  const int64_t chunks = (rows + chunk_rows - 1) / chunk_rows;
  const int n_threads = static_cast<int>(std::min<int64_t>(ctx.n_threads, chunks));
#pragma omp parallel num_threads(n_threads) if (n_threads > 1)
  {
    std::vector<float> values;
#pragma omp for schedule(dynamic, 1)
    for (int64_t chunk = 0; chunk < chunks; ++chunk) {
      const int64_t first = chunk * chunk_rows, count = std::min(chunk_rows, rows - first);
      const uint8_t* rows_bytes = src + first * source_row;
      const float* x = reinterpret_cast<const float*>(rows_bytes);
      // f32 rows are read in place where they are aligned (a mapped file's usually are).
      if (source_dtype != DType::F32 || reinterpret_cast<uintptr_t>(rows_bytes) % alignof(float) != 0) {
        values.resize(static_cast<size_t>(count * cols));
        dequantize_row(source_dtype, rows_bytes, count * cols, values.data());
        x = values.data();
      }
      quantize_row(target, x, count * cols, dst + first * target_row, ctx.isa);
    }
  }
}

void quantize_row_reference(DType type, const float* x, int64_t n, void* out) {
  dtype_row_bytes(type, n);  // throws unless n is a whole number of blocks
  switch (type) {
    case DType::F32:
      if (n > 0) std::memcpy(out, x, static_cast<size_t>(n) * 4);
      return;
    case DType::BF16:
    case DType::F16:
      for (int64_t i = 0; i < n; ++i) {
        const uint16_t half = type == DType::BF16 ? f32_to_bf16(x[i]) : f32_to_f16(x[i]);
        std::memcpy(static_cast<uint8_t*>(out) + 2 * i, &half, 2);
      }
      return;
    case DType::Q8_0:
      return for_each_block_out<BlockQ8_0, 32>(x, n, out, quantize_q8_0);
    case DType::Q4_0:
      return for_each_block_out<BlockQ4_0, 32>(x, n, out, quantize_q4_0);
    case DType::Q4_K:
      return for_each_block_out<BlockQ4_K, 256>(x, n, out, quantize_q4_k);
    case DType::Q6_K:
      return for_each_block_out<BlockQ6_K, 256>(x, n, out, quantize_q6_k);
  }
}

void dequantize_row(DType type, const void* blocks, int64_t n, float* out) {
  dtype_row_bytes(type, n);
  switch (type) {
    case DType::F32:
    case DType::BF16:
    case DType::F16:
      return widen_row(blocks, type, n, out);
    case DType::Q8_0:
      return for_each_block_in<BlockQ8_0, 32>(blocks, n, out, dequantize_q8_0);
    case DType::Q4_0:
      return for_each_block_in<BlockQ4_0, 32>(blocks, n, out, dequantize_q4_0);
    case DType::Q4_K:
      return for_each_block_in<BlockQ4_K, 256>(blocks, n, out, dequantize_q4_k);
    case DType::Q6_K:
      return for_each_block_in<BlockQ6_K, 256>(blocks, n, out, dequantize_q6_k);
  }
}

}  // namespace mb
