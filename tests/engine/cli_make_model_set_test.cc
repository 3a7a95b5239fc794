// SPDX-License-Identifier: MIT
// make-model --set KEY=VALUE: any key the --arch's family declares (family.h), by its Hugging Face
// name or an alias, with a JSON value, written into config.json as transformers spells it and read
// back with every check; an undeclared key, a value that is not JSON and a value the key refuses
// are errors naming the key, before anything is written.
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "cli_test_support.h"
#include "common/test_util.h"
#include "io/file_io.h"
#include "model/config.h"

namespace mb {
namespace {

using test::run_cli;

const char* const kSetModelFlags = " --d-model 64 --n-layer 3 --vocab 97 --seed 5";

nlohmann::json written_config(const std::string& dir) {
  return nlohmann::json::parse(read_text_file(dir + "/config.json"));
}

TEST(CliMakeModelSet, DeclaredKeysOfEveryKindReachConfigJson) {
  const std::string dir = test::make_temp_dir("make_model_set") + "/model";
  // An Int, a Number, a Bool and a String (the layer pattern) of Nemotron-H, one through its alias.
  const test::CliOutput made =
      run_cli("make-model --out " + dir + kSetModelFlags +
              " --arch nemotron-h --set mamba_d_state=32 --set layer_norm_epsilon=0.001"
              " --set attention_bias=true --set 'hybrid_override_pattern=\"M-*\"'");
  ASSERT_EQ(made.status, 0) << made.err;
  const nlohmann::json config = written_config(dir);
  EXPECT_EQ(config["ssm_state_size"], 32);
  EXPECT_FALSE(config.contains("mamba_d_state"));
  EXPECT_FLOAT_EQ(config["layer_norm_epsilon"].get<float>(), 0.001f);
  EXPECT_EQ(config["attention_bias"], true);
  EXPECT_EQ(config["hybrid_override_pattern"], "M-*");  // --arch nemotron-h's own is M*-
  const ModelConfig read = load_model_config(dir);
  EXPECT_EQ(read.hybrid.pattern, "M-*");
  EXPECT_EQ(read.ssm.d_state, 32);
  EXPECT_TRUE(read.hybrid.attention.bias);

  // The pure Mamba families too: a Mamba-2 key, and Mamba-3's ssm_cfg key in the state-spaces form.
  const std::string mamba2 = test::make_temp_dir("make_model_set_mamba2") + "/model";
  ASSERT_EQ(run_cli("make-model --out " + mamba2 + kSetModelFlags + " --arch mamba2 --set n_groups=2").status,
            0);
  EXPECT_EQ(written_config(mamba2)["n_groups"], 2);
  const std::string mamba3 = test::make_temp_dir("make_model_set_mamba3") + "/model";
  const test::CliOutput made3 = run_cli("make-model --out " + mamba3 + kSetModelFlags +
                                        " --arch mamba3 --layout original --set is_outproj_norm=true");
  ASSERT_EQ(made3.status, 0) << made3.err;
  EXPECT_EQ(written_config(mamba3)["ssm_cfg"]["is_outproj_norm"], true);
}

TEST(CliMakeModelSet, UndeclaredKeysAndBadValuesAreRefusedNamingThem) {
  const std::string root = test::make_temp_dir("make_model_set_bad");
  const struct {
    std::string flags, fragment;
  } cases[] = {
      {" --arch granite-hybrid --set no_such_key=1", "no_such_key"},
      {" --arch granite-hybrid --set rope_theta=-5", "rope_theta"},
      {" --arch granite-hybrid --set attention_bias=maybe", "attention_bias"},
      {" --arch mamba1 --set state_size=true", "state_size"},
      {" --arch mamba2 --set state_size", "state_size"},
      // A key of another family.
      {" --arch mamba1 --set hybrid_override_pattern='\"M\"'", "hybrid_override_pattern"},
  };
  for (size_t i = 0; i < std::size(cases); ++i) {
    SCOPED_TRACE(cases[i].flags);
    const std::string dir = root + "/m" + std::to_string(i);
    const test::CliOutput made = run_cli("make-model --out " + dir + kSetModelFlags + cases[i].flags);
    EXPECT_NE(made.status, 0);
    EXPECT_NE(made.err.find(cases[i].fragment), std::string::npos) << made.err;
    EXPECT_FALSE(std::filesystem::exists(dir + "/config.json"));
  }
}

}  // namespace
}  // namespace mb
