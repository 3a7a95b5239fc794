// SPDX-License-Identifier: MIT
// The default context of `serve` (engine/context_limit.h): a model whose state grows (a hybrid's KV
// cache) is bounded by its trained length, or by what free memory holds for every slot's state; a
// model whose state does not grow needs no bound.
#include <gtest/gtest.h>

#include <fstream>

#include "cli_test_support.h"
#include "common/hybrid_configs.h"
#include "common/model_fixture.h"
#include "engine/context_limit.h"
#include "io/gguf.h"

namespace mb {
namespace {

std::unique_ptr<Model> limit_model(const ModelConfig& config, const std::string& tag) {
  MakeModelOptions o;
  o.config = config;
  o.seed = 7;
  return Model::load(test::write_model(o, tag));
}

TEST(ContextLimit, AStateThatDoesNotGrowNeedsNoLimit) {
  const auto mamba = limit_model(test::small_config(), "ctxlimit_mamba");
  const ContextLimit limit = default_context_limit(*mamba, 4, uint64_t{1} << 30, 2048);
  EXPECT_EQ(limit.tokens, 0);
  EXPECT_NE(limit.source.find("does not grow"), std::string::npos) << limit.source;
}

TEST(ContextLimit, AGrowingStateGetsItsTrainedLengthOrWhatMemoryHolds) {
  const auto trained = limit_model(test::granite_config("*M"), "ctxlimit_trained");
  // Granite "*M" at d_model 48: one attention layer's keys and values, 2 KV heads of 12.
  const int64_t bytes_per_token = 2 * 2 * 12 * 4;
  ContextLimit limit = default_context_limit(*trained, 4, uint64_t{1} << 30, 3000);
  EXPECT_EQ(limit.tokens, 3000);
  EXPECT_EQ(limit.source, "the model's max_position_embeddings");
  // Half of 2 MiB over 4 slots holds 262144 / 192 = 1365 positions each: less than trained.
  limit = default_context_limit(*trained, 4, uint64_t{2} << 20, 3000);
  EXPECT_EQ(limit.tokens, (int64_t{1} << 20) / 4 / bytes_per_token);
  EXPECT_NE(limit.source.find("free memory"), std::string::npos) << limit.source;
  EXPECT_NE(limit.source.find("3000 would not fit"), std::string::npos) << limit.source;
  // Unknown free memory: the trained length.
  EXPECT_EQ(default_context_limit(*trained, 4, 0, 3000).tokens, 3000);

  // No trained length: what memory holds, a fixed default where that is unknown, and never below the
  // floor however little is free.
  EXPECT_EQ(default_context_limit(*trained, 1, uint64_t{8} << 20, 0).tokens,
            (int64_t{4} << 20) / bytes_per_token);
  EXPECT_EQ(default_context_limit(*trained, 1, 0, 0).tokens, kUnknownMemoryContext);
  EXPECT_EQ(default_context_limit(*trained, 64, 4096, 0).tokens, kMinDefaultContext);
}

TEST(ContextLimit, TheTrainedLengthIsReadFromTheFoldersConfig) {
  MakeModelOptions o;
  o.config = test::granite_config("*M");
  const std::string dir = test::write_model(o, "ctxlimit_config");
  EXPECT_EQ(trained_context_length(dir), 0);
  std::ofstream(dir + "/config.json")
      << R"({"model_type": "granitemoehybrid", "max_position_embeddings": 4096})";
  EXPECT_EQ(trained_context_length(dir), 4096);
  std::ofstream(dir + "/config.json") << R"({"max_position_embeddings": "long"})";
  EXPECT_EQ(trained_context_length(dir), 0);
  EXPECT_EQ(trained_context_length(dir + "/missing"), 0);

  // A GGUF file's context_length, unless it is the converter's 2^20 "unlimited" (a NoPE hybrid's).
  const std::string gguf = test::make_temp_dir("ctxlimit_gguf") + "/m.gguf";
  const test::CliOutput made = test::run_cli("make-model --arch granite-hybrid --format gguf --out " + gguf +
                                             " --d-model 32 --n-layer 2 --vocab 301 --seed 2");
  ASSERT_EQ(made.status, 0) << made.err;
  EXPECT_EQ(trained_context_length(gguf), 0);
  const GgufFile file(gguf);
  GgufWriter writer;
  for (const auto& [key, value] : file.metadata())
    writer.set(key, key.ends_with(".context_length") ? GgufValue::u32(8192) : value);
  for (const GgufTensorInfo& t : file.tensors())
    writer.add_tensor(t.name, t.ne, t.type, std::vector<uint8_t>(t.data, t.data + t.byte_size));
  writer.write(gguf + ".8k.gguf");
  EXPECT_EQ(trained_context_length(gguf + ".8k.gguf"), 8192);
}

}  // namespace
}  // namespace mb
