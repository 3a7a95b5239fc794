// SPDX-License-Identifier: MIT
#include "model/blocks/hybrid_config.h"

#include <cmath>

#include "core/error.h"
#include "model/config.h"

namespace mb {

void validate_hybrid(const ModelConfig& c, const std::string& where) {
  const AttentionConfig& a = c.hybrid.attention;
  if (a.n_heads % a.n_kv_heads != 0)
    throw Error(where + ": num_attention_heads " + std::to_string(a.n_heads) +
                " is not a multiple of num_key_value_heads " + std::to_string(a.n_kv_heads));
  if (a.head_dim <= 0) throw Error(where + ": the attention head size must be positive");
  if (!std::isfinite(a.scale)) throw Error(where + ": the attention scale must be finite");
  if (a.rope_theta != 0.0 && !(std::isfinite(a.rope_theta) && a.rope_theta > 0.0))
    throw Error(where + ": rope_theta must be a finite positive number");
  if (a.rope_theta != 0.0 && a.head_dim % 2 != 0)
    throw Error(where + ": RoPE needs an even attention head size, got " + std::to_string(a.head_dim));
  for (double v : {c.hybrid.embedding_multiplier, c.hybrid.residual_multiplier, c.hybrid.logits_scaling})
    if (!std::isfinite(v)) throw Error(where + ": the multipliers must be finite");
  const MoeConfig& e = c.hybrid.moe;
  if (e.n_experts > 0 && (e.top_k < 1 || e.top_k > e.n_experts))
    throw Error(where + ": num_experts_per_tok = " + std::to_string(e.top_k) + " must be between 1 and the " +
                std::to_string(e.n_experts) + " experts");
  if (e.n_experts > 0 && (e.width < 1 || (c.family == ModelFamily::NemotronH && e.shared_width < 1)))
    throw Error(where + ": the expert widths must be positive");
  if (!std::isfinite(e.scale)) throw Error(where + ": routed_scaling_factor must be finite");
  if (c.family == ModelFamily::NemotronH && e.n_experts == 0 &&
      c.hybrid.pattern.find(kMoeLayer) != std::string::npos)
    throw Error(where + ": the layer pattern has mixture-of-experts layers ('E') but no experts");
}

}  // namespace mb
