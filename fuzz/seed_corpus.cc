// SPDX-License-Identifier: MIT
// Writes the seed corpora of the fuzz harnesses: small valid inputs of every format, made by
// the project's own writers (and shrunk copies of the tokenizer fixtures), so each harness
// starts from inputs that pass its parser's checks. The output is committed under
// fuzz/corpus/<harness>/; rerun it after a format changes:
//   build-fuzz/fuzz/fuzz_seed_corpus fuzz/corpus tests/data
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "engine/gguf_convert.h"
#include "engine/gguf_tokenizer.h"
#include "engine/slot_file.h"
#include "engine/state_file.h"
#include "fuzz_support.h"
#include "io/gguf.h"
#include "io/mapped_file.h"
#include "io/npy.h"
#include "io/safetensors.h"
#include "io/torch_checkpoint.h"
#include "io/torch_pickle.h"
#include "io/zip_archive.h"
#include "model/config.h"
#include "model/make_model.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

std::vector<uint8_t> read_bytes(const std::string& path) {
  const mb::MappedFile file(path);
  return {file.bytes().begin(), file.bytes().end()};
}

void write_bytes(const fs::path& path, const std::vector<uint8_t>& bytes) {
  fs::create_directories(path.parent_path());
  mb::write_file_atomically(path.string(), bytes);
}

void write_text(const fs::path& path, const std::string& text) {
  write_bytes(path, std::vector<uint8_t>(text.begin(), text.end()));
}

std::vector<uint8_t> with_mode(uint8_t mode, const std::vector<uint8_t>& bytes) {
  std::vector<uint8_t> out{mode};
  out.insert(out.end(), bytes.begin(), bytes.end());
  return out;
}

std::vector<uint8_t> text_bytes(const std::string& text) {
  return {text.begin(), text.end()};
}

void safetensors_seeds(const fs::path& out, const fs::path& scratch) {
  mb::SafetensorsWriter mixed;
  mixed.add_f32("embedding.weight", {3, 2}, {1, 2, 3, 4, 5, 6}, mb::DType::F32);
  mixed.add_f32("norm.weight", {2}, {1, -1}, mb::DType::BF16);
  mixed.add_f32("half", {1, 1, 2}, {0.5f, 2}, mb::DType::F16);
  mixed.add_raw("steps", "I64", {1}, std::vector<uint8_t>(8, 1));
  mixed.add_raw("scalar", "U8", {}, {7});
  mixed.add_raw("empty", "F64", {0, 4}, {});
  mixed.set_metadata("format", "pt");
  mixed.write((scratch / "mixed.safetensors").string());
  write_bytes(out / "mixed.safetensors", read_bytes((scratch / "mixed.safetensors").string()));

  mb::SafetensorsWriter single;
  single.add_f32("w", {4}, {1, 2, 3, 4}, mb::DType::F32);
  single.write((scratch / "single.safetensors").string());
  write_bytes(out / "single.safetensors", read_bytes((scratch / "single.safetensors").string()));
}

void index_seeds(const fs::path& out) {
  // The shards are the ones safetensors_index_fuzzer writes beside the index.
  const std::string first = "model-00001-of-00003.safetensors";
  const std::string second = "model-00002-of-00003.safetensors";
  const std::string third = "pytorch_model-00003-of-00003.bin";
  json all = {{"metadata", {{"total_size", 22}}},
              {"weight_map", {{"a", first}, {"b", second}, {"c", third}}}};
  write_text(out / "all.json", all.dump(2));
  write_text(out / "one.json", json({{"weight_map", {{"a", first}}}}).dump());
}

void config_seeds(const fs::path& out, const fs::path& data_dir) {
  mb::ModelConfig mamba1 = mb::fuzz::tiny_model_config();
  write_text(out / "mamba1-hf.json", mb::model_config_to_hf_json(mamba1).dump(2));
  write_text(out / "mamba1-original.json", mb::model_config_to_original_json(mamba1).dump(2));
  for (const char* arch : {"mamba2", "mamba3"}) {
    mb::ModelConfig config = mamba1;
    config.arch = std::string(arch) == "mamba2" ? mb::Architecture::Mamba2 : mb::Architecture::Mamba3;
    config.ssm.headdim = 8;
    config.ssm.ngroups = 1;
    config.ssm.d_state = 8;
    config.ssm.chunk_size = 16;
    config.ssm.dt_limit_max = 100.0;
    write_text(out / (std::string(arch) + "-original.json"),
               mb::model_config_to_original_json(config).dump(2));
    if (config.arch == mb::Architecture::Mamba2)
      write_text(out / "mamba2-hf.json", mb::model_config_to_hf_json(config).dump(2));
  }
  // Python's json module writes inf as a bare Infinity, which load_model_config accepts.
  write_text(
      out / "mamba2-hf-infinity.json",
      "{\"model_type\": \"mamba2\", \"hidden_size\": 16, \"num_hidden_layers\": 1, \"vocab_size\": 64,\n"
      " \"num_heads\": 4, \"head_dim\": 8, \"n_groups\": 1, \"state_size\": 8,\n"
      " \"time_step_limit\": [0.0, Infinity], \"eos_token_id\": [0, 1]}\n");
  write_text(
      out / "falcon-mamba.json",
      "{\"model_type\": \"falcon_mamba\", \"hidden_size\": 16, \"num_hidden_layers\": 1, \"vocab_size\": "
      "64,\n"
      " \"state_size\": 4, \"conv_kernel\": 4, \"intermediate_size\": 32, \"time_step_rank\": \"auto\",\n"
      " \"mixer_rms_eps\": 1e-6, \"rms_norm_eps\": 1e-5, \"use_bias\": false}\n");
  for (const char* golden : {"mamba1-hf", "mamba2-hf-g2"}) {
    const fs::path config = data_dir / "goldens" / golden / "config.json";
    if (fs::exists(config))
      write_bytes(out / (std::string("golden-") + golden + ".json"), read_bytes(config.string()));
  }
}

// A copy of a tokenizer.json whose vocabulary keeps only its first `keep` ids and the merges
// among them, so the seed stays a few kilobytes while keeping the file's whole pipeline.
json shrink_tokenizer(const fs::path& path, int64_t keep) {
  std::ifstream in(path, std::ios::binary);
  json root = json::parse(in);
  json& model = root["model"];
  std::set<std::string> kept;
  json vocab = json::object();
  for (const auto& [token, id] : model["vocab"].items()) {
    if (id.get<int64_t>() < keep) {
      vocab[token] = id;
      kept.insert(token);
    }
  }
  model["vocab"] = vocab;
  json merges = json::array();
  for (const json& merge : model["merges"]) {
    std::string left, right;
    if (merge.is_array()) {
      left = merge[0].get<std::string>();
      right = merge[1].get<std::string>();
    } else {
      const std::string text = merge.get<std::string>();
      const size_t space = text.find(' ');
      left = text.substr(0, space);
      right = text.substr(space + 1);
    }
    if (kept.count(left) && kept.count(right) && kept.count(left + right)) merges.push_back(merge);
  }
  model["merges"] = merges;
  json added = json::array();
  for (const json& token : root["added_tokens"])
    if (token["id"].get<int64_t>() < keep) added.push_back(token);
  root["added_tokens"] = added;
  return root;
}

void tokenizer_seeds(const fs::path& out, const fs::path& data_dir, const fs::path& scratch) {
  mb::write_byte_level_tokenizer_json((scratch / "byte_level.json").string(), 300);
  write_bytes(out / "json-byte-level", with_mode(0, read_bytes((scratch / "byte_level.json").string())));
  // Each fixture, and each variant (a fixture with some pipeline stages or model options
  // replaced), shrunk. Byte-fallback tokens take ids 3..258 in Llama-2 and 238..493 in Gemma-3,
  // so those keep a few more.
  const fs::path tokenizers = data_dir / "tokenizers";
  const auto keep_for = [](const std::string& base) -> int64_t {
    if (base == "gemma3") return 520;
    return base == "llama2" ? 320 : 300;
  };
  for (const char* name :
       {"gpt-neox-20b", "gpt2", "llama2", "llama3", "qwen3", "gpt4o", "deepseek-v3", "gemma3"}) {
    const json shrunk = shrink_tokenizer(tokenizers / name / "tokenizer.json", keep_for(name));
    write_bytes(out / (std::string("json-") + name), with_mode(0, text_bytes(shrunk.dump())));
  }
  std::vector<fs::path> variants;
  for (const auto& entry : fs::directory_iterator(tokenizers / "variants")) variants.push_back(entry.path());
  std::sort(variants.begin(), variants.end());
  for (const fs::path& file : variants) {
    std::ifstream in(file, std::ios::binary);
    const json variant = json::parse(in);
    const std::string base = variant.at("base").get<std::string>();
    json shrunk = shrink_tokenizer(tokenizers / base / "tokenizer.json", keep_for(base));
    for (const auto& [key, value] : variant.at("overrides").items()) shrunk[key] = value;
    for (const auto& [key, value] : variant.at("model_overrides").items()) shrunk["model"][key] = value;
    write_bytes(out / ("json-" + file.stem().string()), with_mode(0, text_bytes(shrunk.dump())));
  }
  const std::vector<std::string> texts = {
      "Hello world! The quick brown fox.",
      "  leading spaces\tand\ttabs\n\nnew lines",
      "caf\xc3\xa9 na\xc3\xafve \xe6\x97\xa5\xe6\x9c\xac\xe8\xaa\x9e \xf0\x9f\x98\x80",
      "<|endoftext|>x</s><s>",
      "invalid \xff\xfe utf-8 \xc3",
      "numbers 12345 and 3.14159, punctuation!?;:"};
  for (size_t i = 0; i < texts.size(); ++i)
    write_bytes(out / ("text-" + std::to_string(i)), with_mode(1, text_bytes(texts[i])));
  std::vector<uint8_t> ids = {2};
  for (uint16_t id : {0, 1, 3, 42, 259, 300, 1000, 29871, 31999}) {
    ids.push_back(static_cast<uint8_t>(id & 0xff));
    ids.push_back(static_cast<uint8_t>(id >> 8));
  }
  write_bytes(out / "ids", ids);
}

void state_seeds(const fs::path& out, const fs::path& scratch) {
  const std::string dir = (scratch / "tiny").string();
  mb::fuzz::write_tiny_model(dir);
  const auto model = mb::Model::load(dir);
  std::vector<float> values(model->state_floats());
  for (size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>(i % 7) * 0.25f;
  const mb::SequenceState state = model->state_from_host(values, 5, "the seed state");
  mb::save_state((scratch / "state.mbstate").string(), *model, state);
  const std::vector<uint8_t> bytes = read_bytes((scratch / "state.mbstate").string());
  // Mode 1 has the harness rewrite the checksum, so mutations of it reach the later checks.
  write_bytes(out / "state-as-is", with_mode(0, bytes));
  write_bytes(out / "state-fix-checksum", with_mode(1, bytes));
}

void slot_seeds(const fs::path& out, const fs::path& scratch) {
  const std::string dir = (scratch / "tiny-slot").string();
  mb::fuzz::write_tiny_model(dir);
  const auto model = mb::Model::load(dir);
  std::vector<float> values(model->state_floats());
  for (size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>(i % 5) * 0.5f;
  const mb::SequenceState state = model->state_from_host(values, 3, "the seed state");
  mb::save_slot_file((scratch / "prefix.slot").string(), *model, std::vector<int32_t>{7, 0, 259}, state);
  const std::vector<uint8_t> bytes = read_bytes((scratch / "prefix.slot").string());
  write_bytes(out / "slot-as-is", with_mode(0, bytes));
  write_bytes(out / "slot-fix-checksums", with_mode(1, bytes));
}

void npy_seeds(const fs::path& out, const fs::path& scratch) {
  const std::vector<std::pair<std::string, std::vector<int64_t>>> shapes = {
      {"scalar", {}}, {"vector", {3}}, {"matrix", {2, 3}}, {"empty", {0, 5}}, {"cube", {1, 2, 2}}};
  for (const auto& [name, shape] : shapes) {
    int64_t count = 1;
    for (int64_t extent : shape) count *= extent;
    std::vector<float> values(static_cast<size_t>(count));
    for (size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>(i) - 1.5f;
    const std::string path = (scratch / (name + ".npy")).string();
    mb::write_npy_f32(path, values, shape);
    // Without the .npy extension, which .gitignore excludes outside tests/data.
    write_bytes(out / name, read_bytes(path));
  }
}

void torch_seeds(const fs::path& zip_out, const fs::path& pickle_out) {
  mb::TorchCheckpointWriter mixed;
  const size_t shared = mixed.add_storage("F32", std::vector<uint8_t>(6 * 4, 0x3f));
  mixed.add_view("embedding.weight", shared, 0, {3, 2});
  mixed.add_view("lm_head.weight", shared, 0, {3, 2});
  mixed.add_view("tail", shared, 4, {2});
  mixed.add_f32("norm.weight", {2}, {1, -1}, mb::DType::BF16);
  mixed.add_f32("half", {1, 2}, {0.5f, 2}, mb::DType::F16);
  mixed.add("steps", "I64", {1}, std::vector<uint8_t>(8, 1));
  mixed.add("empty", "F32", {0}, {});
  write_bytes(zip_out / "mixed.bin", mixed.serialize("mixed"));
  mb::TorchCheckpointWriter single;
  single.add_f32("w", {4}, {1, 2, 3, 4}, mb::DType::F32);
  write_bytes(zip_out / "single.bin", single.serialize("archive"));

  // The pickles are the data.pkl records of those archives.
  for (const auto& [name, archive] : std::vector<std::pair<std::string, std::vector<uint8_t>>>{
           {"mixed", mixed.serialize("mixed")}, {"single", single.serialize("archive")}}) {
    for (const mb::ZipEntry& entry : mb::read_zip_directory(archive, name)) {
      if (entry.name.ends_with("/data.pkl"))
        write_bytes(pickle_out / (name + ".pkl"),
                    std::vector<uint8_t>(
                        archive.begin() + static_cast<std::ptrdiff_t>(entry.data_offset),
                        archive.begin() + static_cast<std::ptrdiff_t>(entry.data_offset + entry.size)));
    }
  }
}

// The committed chat templates, each as it is.
void chat_template_seeds(const fs::path& out, const fs::path& data_dir) {
  fs::create_directories(out);
  for (const auto& entry : fs::directory_iterator(data_dir / "chat_templates")) {
    if (entry.path().extension() == ".jinja") {
      write_bytes(out / entry.path().filename(), read_bytes(entry.path().string()));
    }
  }
}

// GBNF grammars, each with a text after a NUL for the matcher (gbnf_fuzzer's input form).
void gbnf_seeds(const fs::path& out) {
  fs::create_directories(out);
  struct Seed {
    const char* name;
    const char* grammar;
    const char* text;
  };
  const Seed seeds[] = {
      {"yes_no.gbnf", R"(root ::= "yes" | "no")", "yes"},
      {"json.gbnf", R"(root ::= object
object ::= "{" ws (pair ("," ws pair)*)? "}"
pair ::= string ws ":" ws value
value ::= object | array | string | number | ("true" | "false" | "null")
array ::= "[" ws (value ("," ws value)*)? "]"
string ::= "\"" ([^"\\\x00-\x1f] | "\\" ["\\/bfnrt])* "\""
number ::= "-"? [0-9]+ ("." [0-9]+)?
ws ::= [ \t\n]* # spaces
)",
       R"({"a": [1, "x", true]})"},
      {"repeat.gbnf", R"(root ::= [a-c]{2,4} ("-" [^\u00e9]+)? .)", "ab-xy\xC3\xA9"},
  };
  for (const Seed& seed : seeds) {
    std::string bytes = std::string(seed.grammar) + '\0' + seed.text;
    write_bytes(out / seed.name, std::vector<uint8_t>(bytes.begin(), bytes.end()));
  }
}

// Tiny hybrids as f32 GGUF files: Granite-4.0-H (granitehybrid: an attention and a Mamba-2
// layer, each with its shared MLP; per-layer head_count_kv) and Nemotron-H (nemotron_h: Mamba-2,
// attention and MLP layers; per-layer head_count_kv and feed_forward_length), each also with
// experts (granitehybrid's ffn_*_exps and *_shexp beside every layer; nemotron_h_moe's E layer of
// stacked experts, a shared expert and the router's exp_probs_b).
void hybrid_gguf_seeds(const fs::path& out, const fs::path& scratch) {
  for (const bool granite : {true, false})
    for (const bool experts : {false, true}) {
      mb::ModelConfig c;
      c.family = granite ? mb::ModelFamily::GraniteHybrid : mb::ModelFamily::NemotronH;
      c.arch = mb::Architecture::Mamba2;
      c.d_model = 16;
      c.vocab_size = 64;
      c.tie_embeddings = granite;
      c.ssm.d_state = 4;
      c.ssm.d_conv = 4;
      c.ssm.expand = 2;
      c.ssm.d_inner = 32;
      c.ssm.headdim = 8;
      c.ssm.ngroups = granite ? 1 : 2;
      c.ssm.chunk_size = 8;
      mb::HybridConfig& h = c.hybrid;
      h.pattern = granite ? "*M" : experts ? "M*E" : "M*-";
      c.n_layer = static_cast<int64_t>(h.pattern.size());
      h.attention = {2, 1, 8, granite ? 0.125 : 1.0 / std::sqrt(8.0), false};
      h.mlp = {16, granite ? mb::Activation::SwiGlu : mb::Activation::ReluSquared, false};
      if (granite) {
        h.embedding_multiplier = 12.0;
        h.residual_multiplier = 0.25;
        h.logits_scaling = 4.0;
      }
      // Three experts of 8, two chosen; Nemotron-H's shared expert 16 wide (Granite's is its MLP).
      if (experts)
        h.moe = granite ? mb::MoeConfig{3, 2, 8, 0, mb::MoeScoring::SoftmaxTopK, false, 1.0}
                        : mb::MoeConfig{3, 2, 8, 16, mb::MoeScoring::SigmoidBias, true, 2.5};
      const std::string name = std::string(granite   ? "granitehybrid"
                                           : experts ? "nemotron_h_moe"
                                                     : "nemotron_h") +
                               (granite && experts ? "_experts" : "");
      const fs::path model = scratch / ("gguf_" + name);
      mb::MakeModelOptions options;
      options.config = c;
      options.write_tokenizer = false;
      mb::make_model(model.string(), options);
      const fs::path file = scratch / (name + "_f32.gguf");
      mb::convert_to_gguf(model.string(), file.string(), mb::GgufFileType::F32);
      write_bytes(out / file.filename(), read_bytes(file.string()));
    }
}

// A tiny model as GGUF in f32 and bf16 (no tokenizer), the tiny hybrids, and a tensorless file
// holding a small byte-level tokenizer and a value of every metadata type.
void gguf_seeds(const fs::path& out, const fs::path& scratch) {
  const fs::path model = scratch / "gguf_model";
  mb::MakeModelOptions options;
  options.config = mb::fuzz::tiny_model_config();
  options.config.vocab_size = 64;
  options.write_tokenizer = false;
  mb::make_model(model.string(), options);
  for (const auto& [name, type] :
       {std::pair{"tiny_f32.gguf", mb::GgufFileType::F32}, {"tiny_bf16.gguf", mb::GgufFileType::BF16}}) {
    mb::convert_to_gguf(model.string(), (scratch / name).string(), type);
    write_bytes(out / name, read_bytes((scratch / name).string()));
  }
  hybrid_gguf_seeds(out, scratch);
  const std::string tokenizer_path = (scratch / "tokenizer.json").string();
  mb::write_byte_level_tokenizer_json(tokenizer_path, 264);
  mb::GgufWriter writer;
  writer.set("general.architecture", mb::GgufValue::string("mamba"));
  const std::string tokenizer_json = mb::read_text_file(tokenizer_path);
  for (const auto& [key, value] : mb::gguf_tokenizer_metadata(tokenizer_json, 264, 0, "seed"))
    writer.set(key, value);
  writer.set("values.i8", mb::GgufValue::integer_array(mb::GgufType::Int8, {-1, 1}));
  writer.set("values.u16", mb::GgufValue::integer_array(mb::GgufType::Uint16, {7}));
  writer.set("values.i64", mb::GgufValue::integer_array(mb::GgufType::Int64, {-5}));
  writer.set("values.f64", mb::GgufValue::float_array(mb::GgufType::Float64, {0.5}));
  writer.set("values.f32", mb::GgufValue::f32(1e-5f));
  writer.set("values.bool", mb::GgufValue::boolean(true));
  writer.add_tensor("q8", {32}, mb::kGgmlQ8_0, std::vector<uint8_t>(34, 1));
  write_bytes(out / "tokenizer.gguf", writer.serialize());
}

}  // namespace

// Replies as models write them (chat_output_fuzzer's form: a byte of format and options, a byte
// of piece size, the text): each format's calls, thinking, a malformed call.
void chat_output_seeds(const fs::path& out) {
  fs::create_directories(out);
  const std::pair<const char*, std::string> seeds[] = {
      {"json_tags.txt",
       std::string("\x05\x03", 2) +
           "<think>\nPlan.\n</think>\n\nSure.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": "
           "{\"city\": \"Paris\"}}\n</tool_call>\n<tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n"
           "</tool_call>"},
      {"list.txt",
       std::string("\x02\x01", 2) +
           "<TOOLCALL>[{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\"}}, {\"name\": \"f\", "
           "\"arguments\": \"{}\"}]</TOOLCALL>"},
      {"xml.txt", std::string("\x17\x05", 2) +
                      "Thinking.\n</think>\n<tool_call>\n<function=get_weather>\n<parameter=city>\nNew York\n"
                      "</parameter>\n<parameter=days>\n3\n</parameter>\n</function>\n</tool_call>\n"},
      {"malformed.txt",
       std::string("\x01\x02", 2) +
           "Text <tool_call>{\"name\": \"get_weather\", \"arguments\": {\"city\": }</tool_call> <tool"},
  };
  for (const auto& [name, bytes] : seeds) write_text(out / name, bytes);
}

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s CORPUS_DIR TEST_DATA_DIR\n", argv[0]);
    return 2;
  }
  const fs::path out = argv[1];
  const fs::path data_dir = argv[2];
  const fs::path scratch = mb::fuzz::scratch_dir();
  try {
    safetensors_seeds(out / "safetensors", scratch);
    index_seeds(out / "safetensors_index");
    config_seeds(out / "config", data_dir);
    tokenizer_seeds(out / "tokenizer", data_dir, scratch);
    state_seeds(out / "state_file", scratch);
    slot_seeds(out / "slot_file", scratch);
    npy_seeds(out / "npy", scratch);
    torch_seeds(out / "torch_checkpoint", out / "torch_pickle");
    chat_template_seeds(out / "chat_template", data_dir);
    gguf_seeds(out / "gguf", scratch);
    gbnf_seeds(out / "gbnf");
    chat_output_seeds(out / "chat_output");
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
  return 0;
}
