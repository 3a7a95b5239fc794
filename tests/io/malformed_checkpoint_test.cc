// SPDX-License-Identifier: MIT
// Malformed checkpoints and configs are refused with a message naming the defect: never a
// crash, never an out-of-bounds read (this suite also runs under ASan + UBSan).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "common/model_fixture.h"
#include "common/tensor_io.h"
#include "common/test_util.h"
#include "core/error.h"
#include "io/mapped_file.h"
#include "io/safetensors.h"

namespace mb {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// A valid two-layer checkpoint to mutate.
std::string good_model() {
  MakeModelOptions o;
  o.config = test::small_config(16, 2, 40);
  return test::write_model(o, "malformed_base");
}

std::string copy_of_good(const std::string& tag) {
  static const std::string base = good_model();
  const std::string dir = test::make_temp_dir(tag);
  for (const auto& entry : fs::directory_iterator(base)) fs::copy(entry.path(), fs::path(dir) / entry.path().filename());
  return dir;
}

using test::write_bytes;

// A safetensors file from a header text and a data section.
std::string safetensors_bytes(const std::string& header, const std::string& data) {
  std::string out(8, '\0');
  const uint64_t n = header.size();
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>(n >> (8 * i));
  return out + header + data;
}

json read_config(const std::string& dir) { return json::parse(read_text_file(dir + "/config.json")); }
void write_config(const std::string& dir, const json& config) { write_bytes(dir + "/config.json", config.dump()); }


struct Defect {
  std::string name;
  std::function<void(const std::string& dir)> apply;
  std::string expected;  // a fragment the error message must contain
};

std::vector<Defect> defects() {
  const std::string f32_2x2 = R"("dtype":"F32","shape":[2,2])";
  return {
      {"missing_config", [](auto& d) { fs::remove(d + "/config.json"); }, "no config.json"},
      {"config_not_json", [](auto& d) { write_bytes(d + "/config.json", "{\"hidden_size\": 16,"); }, "not valid JSON"},
      {"config_missing_key", [](auto& d) { auto c = read_config(d); c.erase("state_size"); write_config(d, c); }, "'state_size'"},
      {"config_wrong_type", [](auto& d) { auto c = read_config(d); c["hidden_size"] = "sixteen"; write_config(d, c); }, "'hidden_size'"},
      {"config_non_positive", [](auto& d) { auto c = read_config(d); c["num_hidden_layers"] = 0; write_config(d, c); }, "'num_hidden_layers'"},
      {"config_more_layers_than_tensors", [](auto& d) { auto c = read_config(d); c["num_hidden_layers"] = 3; write_config(d, c); }, "backbone.layers.2."},
      {"config_fewer_layers_than_tensors", [](auto& d) { auto c = read_config(d); c["num_hidden_layers"] = 1; write_config(d, c); }, "outside the config's 1 layers"},
      {"config_inconsistent_intermediate", [](auto& d) { auto c = read_config(d); c["intermediate_size"] = 48; write_config(d, c); }, "intermediate_size"},
      {"config_unknown_model_type", [](auto& d) { auto c = read_config(d); c["model_type"] = "llama"; write_config(d, c); }, "model_type 'llama'"},
      {"untied_without_lm_head", [](auto& d) { auto c = read_config(d); c["tie_word_embeddings"] = false; write_config(d, c); }, "lm_head.weight"},
      {"no_weights_file", [](auto& d) { fs::remove(d + "/model.safetensors"); }, "none of model.safetensors, model.safetensors.index.json, pytorch_model.bin"},
      {"empty_weights_file", [](auto& d) { write_bytes(d + "/model.safetensors", ""); }, "too short"},
      {"header_length_past_end", [](auto& d) { write_bytes(d + "/model.safetensors", safetensors_bytes("{}", "").substr(0, 8) + "{}"); std::string b = read_text_file(d + "/model.safetensors"); b[0] = '\x7f'; b[1] = '\x7f'; write_bytes(d + "/model.safetensors", b); }, "runs past the end"},
      {"header_not_json", [](auto& d) { write_bytes(d + "/model.safetensors", safetensors_bytes("{\"a\": [", "")); }, "not valid JSON"},
      {"offsets_out_of_range", [f32_2x2](auto& d) { write_bytes(d + "/model.safetensors", safetensors_bytes("{\"w\":{" + f32_2x2 + ",\"data_offsets\":[0,16]}}", std::string(8, '\0'))); }, "past the end"},
      {"offsets_overlap", [f32_2x2](auto& d) { write_bytes(d + "/model.safetensors", safetensors_bytes("{\"a\":{" + f32_2x2 + ",\"data_offsets\":[0,16]},\"b\":{" + f32_2x2 + ",\"data_offsets\":[8,24]}}", std::string(24, '\0'))); }, "overlapping"},
      {"dtype_shape_vs_bytes", [](auto& d) { write_bytes(d + "/model.safetensors", safetensors_bytes(R"({"w":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", std::string(8, '\0'))); }, "needs 12 bytes"},
      {"unknown_dtype", [](auto& d) { write_bytes(d + "/model.safetensors", safetensors_bytes(R"({"w":{"dtype":"F17","shape":[1],"data_offsets":[0,4]}})", std::string(4, '\0'))); }, "unknown dtype 'F17'"},
      {"begin_after_end", [](auto& d) { write_bytes(d + "/model.safetensors", safetensors_bytes(R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[4,0]}})", std::string(4, '\0'))); }, "begin > end"},
      {"negative_shape", [](auto& d) { write_bytes(d + "/model.safetensors", safetensors_bytes(R"({"w":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}})", std::string(4, '\0'))); }, "non-negative integer"},
      {"duplicate_tensor_name", [](auto& d) { write_bytes(d + "/model.safetensors", safetensors_bytes(R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"w":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})", std::string(8, '\0'))); }, "appears twice"},
      {"missing_tensor", [](auto& d) { test::rewrite_tensors(d, [](auto& ts) { std::erase_if(ts, [](auto& t) { return t.name == "backbone.layers.1.mixer.x_proj.weight"; }); }); }, "missing tensor 'backbone.layers.1.mixer.x_proj.weight'"},
      {"misshaped_tensor", [](auto& d) { test::rewrite_tensors(d, [](auto& ts) { for (auto& t : ts) if (t.name == "backbone.layers.0.mixer.dt_proj.weight") t.shape = {t.shape[1], t.shape[0]}; }); }, "has shape [1, 32] but the config implies [32, 1]"},
      {"integer_weight", [](auto& d) { test::rewrite_tensors(d, [](auto& ts) { for (auto& t : ts) if (t.name == "backbone.norm_f.weight") t.dtype_string = "I32"; }); }, "I32"},
      {"index_points_to_missing_shard", [](auto& d) { fs::remove(d + "/model.safetensors"); write_bytes(d + "/model.safetensors.index.json", R"({"weight_map":{"backbone.norm_f.weight":"model-00001-of-00002.safetensors"}})"); }, "cannot open"},
      {"index_without_weight_map", [](auto& d) { fs::remove(d + "/model.safetensors"); write_bytes(d + "/model.safetensors.index.json", R"({"metadata":{}})"); }, "no weight_map"},
  };
}

TEST(MalformedCheckpoint, EveryDefectIsRefusedWithAMessage) {
  const auto list = defects();
  ASSERT_GE(list.size(), 15u);
  for (const auto& defect : list) {
    SCOPED_TRACE(defect.name);
    const std::string dir = copy_of_good(defect.name);
    defect.apply(dir);
    try {
      auto model = Model::load(dir);
      ADD_FAILURE() << defect.name << ": loaded without error";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(defect.expected), std::string::npos)
          << defect.name << ": message was: " << e.what();
    }
  }
}

TEST(MalformedCheckpoint, TheUnmodifiedCopyLoads) {
  EXPECT_NO_THROW(Model::load(copy_of_good("control")));
}

TEST(MalformedCheckpoint, CliPrintsOneLineAndFails) {
  const std::string dir = copy_of_good("cli");
  write_bytes(dir + "/model.safetensors", safetensors_bytes("{\"a\": [", ""));
  const std::string err = test::make_temp_dir("cli_err") + "/stderr.txt";
  const std::string command = std::string(MB_CLI_PATH) + " generate -m " + dir + " --tokens 1 -n 2 2>" + err + " >/dev/null";
  EXPECT_NE(std::system(command.c_str()), 0);
  const std::string message = read_text_file(err);
  EXPECT_EQ(message.rfind("error: ", 0), 0u) << message;
  EXPECT_EQ(std::count(message.begin(), message.end(), '\n'), 1) << message;
}

}  // namespace
}  // namespace mb
