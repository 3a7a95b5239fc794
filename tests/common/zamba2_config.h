// SPDX-License-Identifier: MIT
// A small Zamba2 config (model_type "zamba2"): the family's make-model example (two shared blocks
// used in turn, LoRA on q/k/v and the MLP, RoPE) with `changes` applied as make-model --set does,
// parsed as any config.json is.
#pragma once

#include <nlohmann/json.hpp>

#include "model/config.h"
#include "model/families/zamba2.h"
#include "model/family.h"

namespace mb::test {

inline nlohmann::json zamba2_json(const nlohmann::json& changes = nlohmann::json::object(),
                                  int64_t d_model = 32, int64_t n_layer = 6, int64_t vocab = 131) {
  nlohmann::json config = zamba2_family().example(d_model, n_layer, vocab);
  for (const auto& [key, value] : changes.items()) config[key] = value;
  return config;
}

inline ModelConfig zamba2_config(const nlohmann::json& changes = nlohmann::json::object(),
                                 int64_t d_model = 32, int64_t n_layer = 6, int64_t vocab = 131) {
  return parse_model_config(zamba2_json(changes, d_model, n_layer, vocab), "zamba2 test config");
}

}  // namespace mb::test
