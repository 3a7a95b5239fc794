// SPDX-License-Identifier: MIT
// GGUF files (io/gguf.h): the writer's output reads back with every metadata value and tensor
// byte; malformed files, built byte by byte, are refused with a message naming the defect; and
// every truncation and a sample of byte flips of a real model file load or are refused, never
// crash (this suite also runs under ASan + UBSan).
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <random>
#include <tuple>

#include <unistd.h>

#include "common/model_fixture.h"
#include "common/test_util.h"
#include "core/error.h"
#include "engine/gguf_convert.h"
#include "engine/gguf_tokenizer.h"
#include "io/gguf.h"
#include "io/mapped_file.h"
#include "model/gguf_checkpoint.h"
#include "tokenizer/tokenizer.h"

namespace mb {
namespace {

// Little-endian GGUF pieces for hand-built files.
struct Bytes {
  std::string data;
  Bytes& u32(uint32_t v) {
    for (int i = 0; i < 4; ++i) data.push_back(static_cast<char>(v >> (8 * i)));
    return *this;
  }
  Bytes& u64(uint64_t v) {
    for (int i = 0; i < 8; ++i) data.push_back(static_cast<char>(v >> (8 * i)));
    return *this;
  }
  Bytes& str(const std::string& s) {
    u64(s.size());
    data += s;
    return *this;
  }
  Bytes& raw(const std::string& s) {
    data += s;
    return *this;
  }
};

std::string header(uint64_t tensors, uint64_t kvs, uint32_t version = 3) {
  return Bytes().raw("GGUF").u32(version).u64(tensors).u64(kvs).data;
}
std::string kv_u32(const std::string& key, uint32_t v) {
  return Bytes().str(key).u32(4).u32(v).data;
}
std::string info(const std::string& name, std::vector<uint64_t> ne, uint32_t type, uint64_t offset) {
  Bytes b;
  b.str(name).u32(static_cast<uint32_t>(ne.size()));
  for (uint64_t extent : ne) b.u64(extent);
  return b.u32(type).u64(offset).data;
}
// Pads `head` to the 32-byte alignment and appends the data section.
std::string with_data(std::string head, const std::string& data) {
  head.resize((head.size() + 31) / 32 * 32, '\0');
  return head + data;
}

std::string write_file(const std::string& bytes, const std::string& tag) {
  const std::string path = test::make_temp_dir(tag) + "/model.gguf";
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
  return path;
}

TEST(Gguf, WriterOutputReadsBackWithEveryValueTypeAndTensor) {
  for (uint32_t alignment : {32u, 64u, 8u}) {
    SCOPED_TRACE(alignment);
    GgufWriter writer(alignment);
    GgufValue u8 = GgufValue::u32(200);
    u8.type = u8.element_type = GgufType::Uint8;
    const std::vector<std::pair<std::string, GgufValue>> values = {
        {"general.architecture", GgufValue::string("mamba")},
        {"u8", u8},
        {"i8s", GgufValue::integer_array(GgufType::Int8, {-128, 0, 127})},
        {"u16s", GgufValue::integer_array(GgufType::Uint16, {65535})},
        {"i16s", GgufValue::integer_array(GgufType::Int16, {-32768})},
        {"u32", GgufValue::u32(4000000000u)},
        {"i32", GgufValue::i32(-7)},
        {"u64", GgufValue::u64(~uint64_t{0})},
        {"i64s", GgufValue::integer_array(GgufType::Int64, {INT64_MIN, INT64_MAX})},
        {"f32", GgufValue::f32(1e-5f)},
        {"f64s", GgufValue::float_array(GgufType::Float64, {0.1, -2.5})},
        {"bool", GgufValue::boolean(true)},
        {"bools", GgufValue::integer_array(GgufType::Bool, {1, 0})},
        {"string", GgufValue::string("h\xc3\xa9llo")},
        {"strings", GgufValue::string_array({"", "a b", std::string("\0x", 2)})},
        {"empty", GgufValue::string_array({})},
    };
    for (const auto& [key, value] : values) writer.set(key, value);
    const std::vector<uint8_t> f32_bytes(4 * 3 * 2, 7), q8_bytes(34 * 2, 9), q4k_bytes(144, 11);
    writer.add_tensor("a", {3, 2}, kGgmlF32, f32_bytes);
    writer.add_tensor("q8", {32, 2}, kGgmlQ8_0, q8_bytes);
    writer.add_tensor("empty", {0, 5}, kGgmlF16, {});
    writer.add_tensor("q4k", {256}, kGgmlQ4_K, q4k_bytes);
    const std::string path = test::make_temp_dir("gguf_round_trip") + "/x.gguf";
    writer.write(path);

    const GgufFile file(path);
    EXPECT_EQ(file.version(), 3u);
    EXPECT_EQ(file.alignment(), alignment);
    size_t offset = alignment == kGgufDefaultAlignment ? 0 : 1;  // general.alignment comes first
    ASSERT_EQ(file.metadata().size(), values.size() + offset);
    for (size_t i = 0; i < values.size(); ++i) {
      EXPECT_EQ(file.metadata()[i + offset].first, values[i].first);
      EXPECT_TRUE(file.metadata()[i + offset].second == values[i].second) << values[i].first;
    }
    ASSERT_EQ(file.tensors().size(), 4u);
    const auto check = [&](size_t i, const std::string& name, std::vector<int64_t> ne, uint32_t type,
                           const std::vector<uint8_t>& bytes) {
      const GgufTensorInfo& t = file.tensors()[i];
      EXPECT_EQ(t.name, name);
      EXPECT_EQ(t.ne, ne);
      EXPECT_EQ(t.type, type);
      EXPECT_EQ(t.offset % alignment, 0u);
      ASSERT_EQ(t.byte_size, bytes.size());
      EXPECT_TRUE(bytes.empty() || std::memcmp(t.data, bytes.data(), bytes.size()) == 0) << name;
    };
    check(0, "a", {3, 2}, kGgmlF32, f32_bytes);
    check(1, "q8", {32, 2}, kGgmlQ8_0, q8_bytes);
    check(2, "empty", {0, 5}, kGgmlF16, {});
    check(3, "q4k", {256}, kGgmlQ4_K, q4k_bytes);
    // Writing what was read gives the same bytes.
    GgufWriter again(alignment);
    for (const auto& [key, value] : file.metadata())
      if (key != "general.alignment") again.set(key, value);
    for (const GgufTensorInfo& t : file.tensors())
      again.add_tensor(t.name, t.ne, t.type, std::vector<uint8_t>(t.data, t.data + t.byte_size));
    const std::string original = read_text_file(path);
    const std::vector<uint8_t> rewritten = again.serialize();
    EXPECT_EQ(original, std::string(rewritten.begin(), rewritten.end()));
  }
}

TEST(Gguf, WriterRefusesWhatGgufCannotHold) {
  GgufWriter writer;
  EXPECT_THROW(writer.add_tensor(std::string(64, 'n'), {1}, kGgmlF32, std::vector<uint8_t>(4)), Error);
  EXPECT_THROW(writer.add_tensor("q", {31}, kGgmlQ8_0, std::vector<uint8_t>(34)), Error);
  EXPECT_THROW(writer.add_tensor("w", {2}, kGgmlF32, std::vector<uint8_t>(4)), Error);
  EXPECT_THROW(writer.add_tensor("w", {1}, 99, std::vector<uint8_t>(4)), Error);
  writer.add_tensor("w", {1}, kGgmlF32, std::vector<uint8_t>(4));
  EXPECT_THROW(writer.add_tensor("w", {1}, kGgmlF32, std::vector<uint8_t>(4)), Error);
  EXPECT_THROW(writer.set("x", GgufValue::integer_array(GgufType::Uint8, {256})), Error);
  EXPECT_THROW(writer.set("general.alignment", GgufValue::u32(64)), Error);
  EXPECT_THROW(GgufWriter(48), Error);
}

struct Malformed {
  std::string name;
  std::string bytes;
  std::string expected;
};

std::vector<Malformed> malformed_files() {
  const std::string f32_4 = std::string(16, '\0');
  const std::string one_tensor = info("w", {4}, kGgmlF32, 0);
  return {
      {"empty", "", "not a GGUF file"},
      {"bad_magic", Bytes().raw("GGUX").u32(3).u64(0).u64(0).data, "not a GGUF file"},
      {"version_1", header(0, 0, 1), "version 1"},
      {"version_4", header(0, 0, 4), "version 4"},
      {"big_endian", header(0, 0, 0x03000000), "big-endian"},
      {"header_cut", header(0, 0).substr(0, 12), "tensor count"},
      {"metadata_count_past_end", header(0, uint64_t{1} << 60), "metadata count"},
      {"tensor_count_past_end", header(uint64_t{1} << 40, 0), "tensor count"},
      {"key_length_past_end", header(0, 1) + Bytes().u64(uint64_t{1} << 40).u32(4).u32(1).data,
       "past the end"},
      {"string_value_past_end", header(0, 1) + Bytes().str("k").u32(8).u64(1000).raw("abc").data,
       "past the end"},
      {"unknown_value_type", header(0, 1) + Bytes().str("k").u32(13).u32(0).data, "unknown value type 13"},
      {"nested_array", header(0, 1) + Bytes().str("k").u32(9).u32(9).u64(1).data, "array of arrays"},
      {"array_count_past_end",
       header(0, 1) + Bytes().str("k").u32(9).u32(8).u64(uint64_t{1} << 50).u64(0).data, "element count"},
      {"bool_not_0_or_1", header(0, 1) + Bytes().str("k").u32(7).raw("\x02").data, "bool holding 2"},
      {"duplicate_key", header(0, 2) + kv_u32("k", 1) + kv_u32("k", 2), "'k' appears twice"},
      {"alignment_not_power_of_two", header(0, 1) + kv_u32("general.alignment", 48), "not a power of two"},
      {"alignment_wrong_type", header(0, 1) + Bytes().str("general.alignment").u32(10).u64(32).data,
       "must be a u32"},
      {"duplicate_tensor", with_data(header(2, 0) + one_tensor + info("w", {4}, kGgmlF32, 32), f32_4 + f32_4),
       "'w' appears twice"},
      {"name_too_long", with_data(header(1, 0) + info(std::string(64, 'n'), {4}, kGgmlF32, 0), f32_4),
       "longer than 63"},
      {"too_many_dims", with_data(header(1, 0) + info("w", {1, 1, 1, 1, 4}, kGgmlF32, 0), f32_4), "5 dims"},
      {"negative_dim", with_data(header(1, 0) + info("w", {uint64_t{1} << 63}, kGgmlF32, 0), f32_4),
       "negative"},
      {"huge_dims",
       with_data(header(1, 0) + info("w", {uint64_t{1} << 30, uint64_t{1} << 30}, kGgmlF32, 0), f32_4),
       "implausible"},
      {"unknown_ggml_type", with_data(header(1, 0) + info("blk.0.ssm_in.weight", {4}, 99, 0), f32_4),
       "tensor 'blk.0.ssm_in.weight' has unknown ggml type 99"},
      {"retired_ggml_type", with_data(header(1, 0) + info("w", {32}, 4, 0), f32_4), "unknown ggml type 4"},
      {"row_not_a_block_multiple", with_data(header(1, 0) + info("w", {30}, kGgmlQ8_0, 0), f32_4),
       "not a multiple of the Q8_0 block of 32"},
      {"misaligned_offset", with_data(header(1, 0) + info("w", {2}, kGgmlF32, 4), f32_4),
       "not a multiple of the alignment 32"},
      {"tensor_past_end", with_data(header(1, 0) + info("w", {8}, kGgmlF32, 0), f32_4), "runs past the end"},
      {"wrong_tensor_size", with_data(header(1, 0) + info("w", {4, 4}, kGgmlF32, 32), f32_4 + f32_4),
       "runs past the end"},
      {"overlapping_tensors",
       with_data(header(2, 0) + info("a", {16}, kGgmlF32, 0) + info("b", {8}, kGgmlF32, 32),
                 std::string(64, '\0')),
       "tensors 'a' and 'b' overlap"},
  };
}

TEST(Gguf, MalformedFilesAreRefusedWithAMessage) {
  for (const Malformed& m : malformed_files()) {
    SCOPED_TRACE(m.name);
    const std::string path = write_file(m.bytes, "gguf_bad_" + m.name);
    const std::string message = test::error_of([&] { GgufFile file(path); });
    EXPECT_NE(message.find(m.expected), std::string::npos) << m.name << ": " << message;
    EXPECT_NE(message.find("model.gguf"), std::string::npos) << m.name << ": " << message;
  }
}

TEST(Gguf, TypedMetadataAccessNamesTheKey) {
  const std::string path =
      write_file(header(0, 2) + kv_u32("n", 5) + Bytes().str("s").u32(8).str("x").data, "gguf_typed");
  const GgufFile file(path);
  EXPECT_EQ(file.unsigned_value("n"), 5u);
  EXPECT_NE(test::error_of([&] { file.unsigned_value("s"); }).find("'s' must be a non-negative integer"),
            std::string::npos);
  EXPECT_NE(test::error_of([&] { file.float_value("n"); }).find("'n' must be an f32 or f64"),
            std::string::npos);
  EXPECT_NE(test::error_of([&] { file.string_value("missing"); }).find("missing required metadata 'missing'"),
            std::string::npos);
}

// A small valid model file with a tokenizer, written as `mambacpp quantize` writes one.
const std::string& model_gguf() {
  static const std::string path = [] {
    MakeModelOptions o;
    o.config = test::small_config(16, 2, 260);
    const std::string dir = test::write_model(o, "gguf_model_base");
    write_byte_level_tokenizer_json(dir + "/tokenizer.json", 260);
    const std::string file = dir + "/model.gguf";
    convert_to_gguf(dir, file, GgufFileType::F32);
    return file;
  }();
  return path;
}

// The model file rewritten after `mutate` changes its metadata and tensors.
struct Parts {
  std::vector<std::pair<std::string, GgufValue>> metadata;
  struct Tensor {
    std::string name;
    std::vector<int64_t> ne;
    uint32_t type;
    std::vector<uint8_t> bytes;
  };
  std::vector<Tensor> tensors;
  void erase_key(const std::string& key) {
    std::erase_if(metadata, [&](const auto& kv) { return kv.first == key; });
  }
  void set(const std::string& key, GgufValue value) {
    erase_key(key);
    metadata.emplace_back(key, std::move(value));
  }
  Tensor& tensor(const std::string& name) {
    for (Tensor& t : tensors)
      if (t.name == name) return t;
    throw std::runtime_error("no tensor " + name);
  }
};

std::string mutated_model(const std::function<void(Parts&)>& mutate, const std::string& tag) {
  const GgufFile file(model_gguf());
  Parts parts;
  parts.metadata = file.metadata();
  for (const GgufTensorInfo& t : file.tensors())
    parts.tensors.push_back({t.name, t.ne, t.type, std::vector<uint8_t>(t.data, t.data + t.byte_size)});
  mutate(parts);
  GgufWriter writer;
  for (const auto& [key, value] : parts.metadata) writer.set(key, value);
  for (Parts::Tensor& t : parts.tensors) writer.add_tensor(t.name, t.ne, t.type, std::move(t.bytes));
  const std::string path = test::make_temp_dir(tag) + "/model.gguf";
  writer.write(path);
  return path;
}

TEST(GgufModelFile, TheUnmodifiedFileLoadsWithItsTokenizer) {
  const auto model = Model::load(model_gguf());
  EXPECT_EQ(model->config().vocab_size, 264);
  EXPECT_EQ(load_tokenizer(model_gguf()).encode("hello"),
            Tokenizer::from_json_file(std::filesystem::path(model_gguf()).parent_path().string() +
                                      "/tokenizer.json")
                .encode("hello"));
}

TEST(GgufModelFile, DefectsAreRefusedWithAMessage) {
  using P = Parts;
  const std::vector<std::tuple<std::string, std::function<void(P&)>, std::string>> defects = {
      {"no_architecture", [](P& p) { p.erase_key("general.architecture"); },
       "missing required metadata 'general.architecture'"},
      {"other_architecture", [](P& p) { p.set("general.architecture", GgufValue::string("llama")); },
       "architecture 'llama' is not supported"},
      {"no_state_size", [](P& p) { p.erase_key("mamba.ssm.state_size"); },
       "missing required metadata 'mamba.ssm.state_size'"},
      {"zero_layers", [](P& p) { p.set("mamba.block_count", GgufValue::u32(0)); },
       "'mamba.block_count' = 0 is outside"},
      {"eps_as_integer", [](P& p) { p.set("mamba.attention.layer_norm_rms_epsilon", GgufValue::u32(1)); },
       "must be an f32 or f64"},
      {"inner_not_a_multiple", [](P& p) { p.set("mamba.ssm.inner_size", GgufValue::u32(33)); },
       "not a multiple of embedding_length"},
      {"state_size_too_large", [](P& p) { p.set("mamba.ssm.state_size", GgufValue::u32(512)); },
       "state_size"},
      {"missing_tensor",
       [](P& p) { std::erase_if(p.tensors, [](auto& t) { return t.name == "blk.1.ssm_out.weight"; }); },
       "missing tensor 'blk.1.ssm_out.weight'"},
      {"missing_embedding",
       [](P& p) { std::erase_if(p.tensors, [](auto& t) { return t.name == "token_embd.weight"; }); },
       "missing tensor 'token_embd.weight'"},
      {"unknown_tensor",
       [](P& p) {
         p.tensors.push_back({"blk.0.attn_q.weight", {4}, kGgmlF32, std::vector<uint8_t>(16)});
       },
       "'blk.0.attn_q.weight' is not part of a mamba model"},
      {"layer_outside",
       [](P& p) {
         p.tensors.push_back({"blk.2.ssm_d", {32}, kGgmlF32, std::vector<uint8_t>(128)});
       },
       "'blk.2.ssm_d' belongs to a layer outside"},
      {"wrong_shape",
       [](P& p) {
         auto& t = p.tensor("blk.0.ssm_in.weight");
         std::swap(t.ne[0], t.ne[1]);
       },
       "'blk.0.ssm_in.weight' has dims {64, 16} but the metadata implies {16, 64}"},
      {"inner_unit_dim",
       [](P& p) {
         // Only trailing unit dims may be dropped or added; one inside the shape changes it.
         auto& t = p.tensor("blk.0.ssm_in.weight");
         t.ne.insert(t.ne.begin() + 1, 1);
       },
       "'blk.0.ssm_in.weight' has dims {16, 1, 64} but the metadata implies {16, 64}"},
      {"embedding_of_three_dims",
       [](P& p) {
         auto& t = p.tensor("token_embd.weight");
         t.ne = {t.ne[0], 2, t.ne[1] / 2};
       },
       "expected {embedding_length, vocabulary}"},
      {"token_count", [](P& p) { p.set("tokenizer.ggml.tokens", GgufValue::string_array({"a"})); },
       "lists 1 tokens"},
      {"eos_outside", [](P& p) { p.set("tokenizer.ggml.eos_token_id", GgufValue::u32(9999)); },
       "eos_token_id"},
      {"uncomputable_type",
       [](P& p) {
         auto& t = p.tensor("blk.0.ssm_x.weight");
         t.type = 3;
         t.bytes.assign(20 * t.ne[1], 0);
       },
       "Q4_1"},
  };
  for (const auto& [name, mutate, expected] : defects) {
    SCOPED_TRACE(name);
    const std::string path = mutated_model(mutate, "gguf_defect_" + name);
    const std::string message = test::error_of([&] { Model::load(path); });
    EXPECT_NE(message.find(expected), std::string::npos) << name << ": " << message;
  }
}

// Loading a model file and its tokenizer either works or throws mb::Error.
void load_or_refuse(const std::string& path) {
  try {
    auto model = Model::load(path);
    load_tokenizer(path);
  } catch (const Error&) {
  }
}

// Thousands of small files are written below; memory-backed storage keeps that quick.
std::string scratch_dir(const std::string& tag) {
  std::error_code error;
  if (std::filesystem::is_directory("/dev/shm", error)) {
    const std::string dir = "/dev/shm/mambacpp_" + tag + "_" + std::to_string(::getpid());
    std::filesystem::create_directories(dir);
    return dir;
  }
  return test::make_temp_dir(tag);
}

TEST(GgufModelFile, EveryTruncationIsRefusedOrLoads) {
  const std::string bytes = read_text_file(model_gguf());
  const GgufFile file(model_gguf());
  const size_t data_start = file.tensors().front().data - file.mapping()->bytes().data();
  const std::string dir = scratch_dir("gguf_truncated");
  size_t refused = 0;
  for (size_t length = 0; length < bytes.size(); length += length < data_start + 64 ? 1 : 61) {
    const std::string path = dir + "/model.gguf";
    std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes.substr(0, length);
    try {
      auto model = Model::load(path);
    } catch (const Error&) {
      ++refused;
      continue;
    }
    // Only the last tensor's trailing padding may be cut from a file that still loads.
    EXPECT_GE(length, bytes.size() - 32) << length;
  }
  EXPECT_GT(refused, data_start);
  std::filesystem::remove_all(dir);
}

TEST(GgufModelFile, ByteFlipsAreRefusedOrLoad) {
  const std::string bytes = read_text_file(model_gguf());
  const GgufFile file(model_gguf());
  const size_t data_start = file.tensors().front().data - file.mapping()->bytes().data();
  const std::string dir = scratch_dir("gguf_flipped");
  std::mt19937_64 rng(17);
  for (int trial = 0; trial < 400; ++trial) {
    std::string flipped = bytes;
    // Mostly in the header, where every byte is structure.
    const size_t at = trial % 4 == 3 ? rng() % bytes.size() : rng() % data_start;
    flipped[at] = static_cast<char>(flipped[at] ^ (1 << (rng() % 8)));
    const std::string path = dir + "/model.gguf";
    std::ofstream(path, std::ios::binary | std::ios::trunc) << flipped;
    load_or_refuse(path);
  }
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace mb
