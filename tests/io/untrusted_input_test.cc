// SPDX-License-Identifier: MIT
// Regression tests for inputs found by fuzzing (fuzz/, FUZZING.md) and for the JSON hazards
// every file parser shares: each one must end in an mb::Error that names the file, never in a
// stack overflow, a foreign exception or an unbounded error message.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>

#include <sys/stat.h>

#include "common/test_util.h"
#include "core/error.h"
#include "io/mapped_file.h"
#include "io/npy.h"
#include "io/safetensors.h"
#include "model/config.h"

namespace mb {
namespace {

using test::error_of;
using test::write_bytes;

std::string nested_arrays(size_t depth, const std::string& inner = "0") {
  return std::string(depth, '[') + inner + std::string(depth, ']');
}

std::string config_with(const std::string& key, const std::string& value) {
  return "{\"model_type\": \"mamba\", \"hidden_size\": 16, \"num_hidden_layers\": 1, \"vocab_size\": 64, "
         "\"state_size\": 4, \"conv_kernel\": 4, \"" +
         key + "\": " + value + "}";
}

std::string config_error(const std::string& tag, const std::string& text) {
  const std::string dir = test::make_temp_dir(tag);
  write_bytes(dir + "/config.json", text);
  return error_of([&] { load_model_config(dir); });
}

// A safetensors file from a header text and a data section.
std::string safetensors_bytes(const std::string& header, const std::string& data) {
  std::string out(8, '\0');
  const uint64_t n = header.size();
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>(n >> (8 * i));
  return out + header + data;
}

TEST(UntrustedJson, DeeplyNestedConfigValuesAreRefusedWithoutRecursion) {
  // 100,000 nested arrays used to overflow the stack in nlohmann's parser, in the copy that
  // wrapped a single eos_token_id into a list, and in dump() while building the message.
  for (const char* key : {"eos_token_id", "hidden_size", "time_step_limit", "layer_norm_epsilon"}) {
    SCOPED_TRACE(key);
    const std::string message = config_error("deep_config", config_with(key, nested_arrays(100000)));
    EXPECT_NE(message.find("config.json"), std::string::npos) << message;
    EXPECT_NE(message.find("nest deeper than 64"), std::string::npos) << message;
  }
  // Nesting within the bound still reaches the key's own check, whose message stays short.
  const std::string message = config_error("nested_eos", config_with("eos_token_id", nested_arrays(60)));
  EXPECT_NE(message.find("'eos_token_id'"), std::string::npos) << message;
  EXPECT_LT(message.size(), 400u) << message;
}

TEST(UntrustedJson, ErrorMessagesQuoteAtMostAnExcerptOfAValue) {
  std::string long_list = "[";
  for (int i = 0; i < 100000; ++i) long_list += "-1,";
  long_list += "-1]";
  for (const char* key : {"eos_token_id", "hidden_size", "use_bias", "layer_norm_epsilon"}) {
    SCOPED_TRACE(key);
    const std::string message = config_error("long_value", config_with(key, long_list));
    EXPECT_NE(message.find(key), std::string::npos) << message;
    EXPECT_LT(message.size(), 400u);
  }
}

TEST(UntrustedJson, OutOfRangeNumbersAreAnErrorNamingTheFile) {
  // nlohmann reports 1e400 as out_of_range, not parse_error, which used to escape as a foreign
  // exception without the file's name.
  for (const char* number : {"1e400", "-1e400", "1e99999999999"}) {
    SCOPED_TRACE(number);
    const std::string message = config_error("huge_number", config_with("layer_norm_epsilon", number));
    EXPECT_NE(message.find("config.json"), std::string::npos) << message;
    EXPECT_NE(message.find("not valid JSON"), std::string::npos) << message;
  }
}

TEST(UntrustedJson, SafetensorsHeadersAndIndexesAreBoundedToo) {
  const std::string dir = test::make_temp_dir("untrusted_safetensors");
  const std::string file = dir + "/model.safetensors";
  write_bytes(file, safetensors_bytes("{\"w\": " + nested_arrays(100000) + "}", ""));
  std::string message = error_of([&] { TensorSet::open_file(file); });
  EXPECT_NE(message.find(file), std::string::npos) << message;
  EXPECT_NE(message.find("nest deeper than"), std::string::npos) << message;

  write_bytes(file, safetensors_bytes(R"({"w": {"dtype": "F32", "shape": [1e400], "data_offsets": [0, 4]}})",
                                      "abcd"));
  message = error_of([&] { TensorSet::open_file(file); });
  EXPECT_NE(message.find(file), std::string::npos) << message;

  const std::string index = dir + "/model.safetensors.index.json";
  for (const std::string& text : std::vector<std::string>{
           R"({"weight_map": {"w": 1e400}})", "{\"weight_map\": " + nested_arrays(100000) + "}"}) {
    write_bytes(index, text);
    message = error_of([&] { TensorSet::open_index(index); });
    EXPECT_NE(message.find(index), std::string::npos) << message;
    EXPECT_NE(message.find("not valid JSON"), std::string::npos) << message;
  }
}

// A .npy file with a float32 header and `shape` as its shape text, followed by `data_bytes`.
std::string npy_bytes(const std::string& shape, size_t data_bytes) {
  const std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': " + shape + ", }\n";
  std::string out = "\x93NUMPY\x01";
  out += '\0';
  out += static_cast<char>(header.size() & 0xff);
  out += static_cast<char>(header.size() >> 8);
  return out + header + std::string(data_bytes, '\0');
}

TEST(UntrustedNpy, MalformedShapesAreRefusedWithAMessage) {
  const std::string path = test::make_temp_dir("untrusted_npy") + "/array.npy";
  // A negative extent used to pass the size check with a wrapped-around byte count and then ask
  // std::vector for 2^64 - 1 floats; text that is not a number escaped as std::invalid_argument.
  const std::vector<std::pair<std::string, size_t>> cases = {{"(-1,)", 0},
                                                             {"(2, -2)", 0},
                                                             {"(x,)", 0},
                                                             {"(99999999999999999999999,)", 0},
                                                             {"(4294967296, 4294967296)", 0},
                                                             {"(1 2,)", 8},
                                                             {")(", 0},
                                                             {"(3,)", 8}};
  for (const auto& [shape, data_bytes] : cases) {
    SCOPED_TRACE(shape);
    write_bytes(path, npy_bytes(shape, data_bytes));
    std::vector<int64_t> read_shape;
    const std::string message = error_of([&] { read_npy_f32(path, read_shape); });
    EXPECT_NE(message.find(path), std::string::npos) << message;
  }
  write_bytes(path, npy_bytes("(2, 0, 3)", 0));
  std::vector<int64_t> read_shape;
  EXPECT_TRUE(read_npy_f32(path, read_shape).empty());
  EXPECT_EQ(read_shape, (std::vector<int64_t>{2, 0, 3}));
}

TEST(EmptyTensors, WriteAndReadBackWithoutTouchingNullPointers) {
  // Found by the fuzz seed generator under UBSan: memcpy from an empty vector's null data().
  // Reading the file back then showed that the overlap check paired an empty tensor with the
  // tensor starting at the same offset and refused the file the writer had just written.
  EXPECT_TRUE(encode_f32({}, DType::F32).empty());
  const std::string dir = test::make_temp_dir("empty_tensors");
  SafetensorsWriter writer;
  writer.add_f32("none", {0}, {}, DType::F32);
  writer.add_raw("rows", "F64", {0, 4}, {});
  writer.add_f32("one", {1}, {2.5f}, DType::F32);
  writer.write(dir + "/model.safetensors");
  const TensorSet set = TensorSet::open_file(dir + "/model.safetensors");
  ASSERT_NE(set.find("none"), nullptr);
  EXPECT_EQ(set.find("none")->byte_size, 0u);
  EXPECT_EQ(set.find("rows")->shape, (std::vector<int64_t>{0, 4}));
  ASSERT_EQ(set.find("one")->byte_size, 4u);
  float value = 0;
  std::memcpy(&value, set.find("one")->data, 4);
  EXPECT_EQ(value, 2.5f);
}

// An output path naming a device or a pipe (as /dev/null does) must not be replaced by a
// regular file: run as root, the atomic rename would otherwise destroy the device node.
TEST(AtomicWrite, RefusesToReplaceWhatIsNotARegularFile) {
  const std::string dir = test::make_temp_dir("atomic_write");
  const std::string fifo = dir + "/pipe";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  try {
    write_file_atomically(fifo, std::string("data"));
    FAIL() << "no error for a FIFO";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("not a regular file"), std::string::npos) << e.what();
  }
  EXPECT_TRUE(std::filesystem::is_fifo(fifo));
  EXPECT_FALSE(std::filesystem::exists(fifo + ".tmp"));
  EXPECT_THROW(write_file_atomically(dir, std::string("data")), Error);
  EXPECT_TRUE(std::filesystem::is_directory(dir));
  const std::string file = dir + "/regular";
  write_file_atomically(file, std::string("one"));
  write_file_atomically(file, std::string("two"));
  EXPECT_EQ(read_text_file(file), "two");
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace mb
