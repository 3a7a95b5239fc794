// SPDX-License-Identifier: MIT
// Issue 44's acceptance test of constrained output: 1,000 seeded generations (50 seeds each of the
// 20 schemas in tests/data/json_schema/acceptance_schemas.json: nested objects, arrays, enums,
// anyOf/oneOf, $ref recursion, numbers and integers, nullable, formats) on a random make-model
// checkpoint with the byte-level tokenizer, each schema's 50 as one batch through Generator. A
// random model follows no format by itself, so every output parsing as JSON and validating under
// the schema (the test's own validator, common/json_schema_validator.h) is the grammar's doing;
// an output cut by max_tokens is a failure.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "cli_test_support.h"
#include "common/json_schema_validator.h"
#include "common/model_fixture.h"
#include "common/test_util.h"
#include "engine/generate.h"
#include "engine/grammar/gbnf.h"
#include "engine/grammar/grammar_constraint.h"
#include "engine/grammar/json_schema.h"
#include "io/file_io.h"

namespace mb {
namespace {

struct SchemaModel {
  std::unique_ptr<Model> model;
  std::unique_ptr<Tokenizer> tokenizer;
  std::shared_ptr<const TokenTrie> trie;
};

const SchemaModel& schema_model() {
  static const SchemaModel m = [] {
    MakeModelOptions o;
    o.config = test::small_config(32, 2, 300);
    o.seed = 44;
    const std::string dir = test::make_temp_dir("json_schema_model");
    make_model(dir, o);  // with its byte-level tokenizer (bytes and a few merges)
    SchemaModel s;
    s.model = Model::load(dir);
    s.tokenizer = std::make_unique<Tokenizer>(Tokenizer::from_model_dir(dir));
    s.trie = std::make_shared<TokenTrie>(*s.tokenizer);
    return s;
  }();
  return m;
}

// The schemas in the file's key order (ordered_json), so properties keep the order written.
std::vector<nlohmann::ordered_json> acceptance_schemas() {
  std::ifstream in(std::string(MB_TEST_DATA_DIR) + "/json_schema/acceptance_schemas.json");
  std::stringstream text;
  text << in.rdbuf();
  return nlohmann::ordered_json::parse(text.str()).get<std::vector<nlohmann::ordered_json>>();
}

TEST(JsonSchemaGenerate, AThousandSeededGenerationsAllParseAndValidate) {
  const SchemaModel& m = schema_model();
  const std::vector<nlohmann::ordered_json> schemas = acceptance_schemas();
  ASSERT_EQ(schemas.size(), 20u);
  constexpr int kSeeds = 50;
  Generator generator(*m.model, m.tokenizer.get(), ComputeContext{1, best_isa()});
  int checked = 0;
  size_t longest = 0;  // tokens
  for (size_t k = 0; k < schemas.size(); ++k) {
    const std::string gbnf = json_schema_to_gbnf(schemas[k]);
    const auto grammar = std::make_shared<const Grammar>(parse_gbnf(gbnf));
    const std::shared_ptr<TokenConstraint> constraint = make_grammar_constraint(grammar, m.trie);
    std::vector<GenerateRequest> requests(kSeeds);
    std::vector<SequenceState> states;
    std::vector<SequenceState*> state_ptrs;
    for (int seed = 0; seed < kSeeds; ++seed) {
      GenerateRequest& r = requests[seed];
      r.prompt = m.tokenizer->encode("JSON:");
      r.max_new_tokens = 1500;
      r.sampling.temperature = 1.0f;
      r.sampling.top_k = 0;
      r.sampling.top_p = 1.0f;
      r.sampling.min_p = 0.0f;
      r.sampling.seed = 1000 * k + seed;
      r.constraint = constraint;
      states.push_back(m.model->new_state());
    }
    for (SequenceState& s : states) state_ptrs.push_back(&s);
    const std::vector<GenerateResult> results = generator.generate_batch(requests, state_ptrs);
    const nlohmann::json schema = nlohmann::json::parse(schemas[k].dump());
    for (int seed = 0; seed < kSeeds; ++seed) {
      const GenerateResult& r = results[seed];
      SCOPED_TRACE("schema " + std::to_string(k) + ", seed " + std::to_string(seed) + ": " + r.text);
      EXPECT_EQ(r.stop_reason, StopReason::Eos) << "cut at max_tokens";
      nlohmann::json value;
      try {
        value = nlohmann::json::parse(r.text);
      } catch (const nlohmann::json::exception& e) {
        ADD_FAILURE() << "not JSON: " << e.what();
        continue;
      }
      EXPECT_EQ(test::json_schema_violation(value, schema), "");
      longest = std::max(longest, r.tokens.size());
      ++checked;
    }
  }
  EXPECT_EQ(checked, 1000);
  std::printf("longest output: %zu tokens of 1500\n", longest);
}

// ---- The CLI: --json-schema and --json-schema-file become run's and generate's grammar ----

const std::string& schema_cli_model() {
  static const std::string dir = [] {
    const std::string d = test::make_temp_dir("json_schema_cli") + "/m";
    const test::CliOutput made =
        test::run_cli("make-model --out " + d + " --d-model 32 --n-layer 2 --vocab 300 --seed 5");
    EXPECT_EQ(made.status, 0) << made.err;
    return d;
  }();
  return dir;
}

TEST(JsonSchemaCli, RunOutputsFollowTheSchema) {
  const std::string& model = schema_cli_model();
  const std::string schema =
      R"({"type":"object","properties":{"ok":{"type":"boolean"},"n":{"enum":[1,2]}},"required":["ok","n"],"additionalProperties":false})";
  const std::string file = test::make_temp_dir("json_schema_cli_file") + "/s.json";
  write_file_atomically(file, schema);
  for (int seed = 0; seed < 3; ++seed) {
    const std::string flag = seed == 0 ? "--json-schema-file " + file : "--json-schema '" + schema + "'";
    const test::CliOutput out =
        test::run_cli("run -m " + model + " -p J -n 200 --temp 1 --seed " + std::to_string(seed) + " " + flag);
    ASSERT_EQ(out.status, 0) << out.err;
    ASSERT_EQ(out.out.substr(0, 1), "J");
    const nlohmann::json value = nlohmann::json::parse(out.out.substr(1));
    EXPECT_EQ(test::json_schema_violation(value, nlohmann::json::parse(schema)), "") << out.out;
    EXPECT_NE(out.err.find("stop: eos"), std::string::npos) << out.err;
  }
  const test::CliOutput ids = test::run_cli("generate -m " + model + " --tokens 1,2 -n 20 --json-schema '{\"const\":7}'");
  ASSERT_EQ(ids.status, 0) << ids.err;
  // The ids of "7", then of the blanks the grammar allows after a value.
  const Tokenizer tokenizer = Tokenizer::from_model_dir(model);
  std::vector<int32_t> generated;
  std::istringstream words(ids.out);
  for (int32_t id; words >> id;) generated.push_back(id);
  const std::string text = tokenizer.decode(generated);
  EXPECT_EQ(text.substr(0, 1), "7") << ids.out;
  EXPECT_EQ(text.find_first_not_of(" \t\n", 1), std::string::npos) << ids.out;
}

TEST(JsonSchemaCli, BadSchemasAndFlagMixesAreRefusedByFlag) {
  const std::string& model = schema_cli_model();
  const test::CliOutput bad = test::run_cli("run -m " + model + R"( -p x --json-schema '{"type":"string","pattern":"a"}')");
  EXPECT_NE(bad.status, 0);
  EXPECT_NE(bad.err.find("--json-schema: JSON schema #: pattern is not supported"), std::string::npos) << bad.err;
  const test::CliOutput text = test::run_cli("run -m " + model + " -p x --json-schema '{'");
  EXPECT_NE(text.status, 0);
  EXPECT_NE(text.err.find("--json-schema: the JSON schema is not valid JSON"), std::string::npos) << text.err;
  const test::CliOutput missing = test::run_cli("run -m " + model + " -p x --json-schema-file /nonexistent/s.json");
  EXPECT_NE(missing.status, 0);
  EXPECT_NE(missing.err.find("/nonexistent/s.json"), std::string::npos) << missing.err;
  const test::CliOutput both =
      test::run_cli("run -m " + model + R"( -p x --json-schema '{}' --grammar 'root ::= "a"')");
  EXPECT_NE(both.status, 0);
  EXPECT_NE(both.err.find("--json-schema and --grammar/--grammar-file cannot both be given"), std::string::npos)
      << both.err;
  const test::CliOutput chat = test::run_cli("run -m " + model + " -p x --chat --json-schema '{}'");
  EXPECT_NE(chat.status, 0);
  EXPECT_NE(chat.err.find("--json-schema and --json-schema-file do not apply to --chat"), std::string::npos)
      << chat.err;
}

}  // namespace
}  // namespace mb
