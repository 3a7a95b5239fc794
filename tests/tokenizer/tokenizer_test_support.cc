// SPDX-License-Identifier: MIT
#include "tokenizer/tokenizer_test_support.h"

#include "tokenizer/byte_level.h"
#include "tokenizer/utf8.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <sstream>
#include <stdexcept>

namespace mb::test {

namespace {

std::string hex_to_bytes(const std::string& hex) {
  std::string bytes;
  for (size_t i = 0; i + 1 < hex.size(); i += 2) {
    bytes.push_back(static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16)));
  }
  return bytes;
}

}  // namespace

std::string tokenizer_fixture_dir(const std::string& name) {
  return std::string(MB_TEST_DATA_DIR) + "/tokenizers/" + name;
}

const Tokenizer& fixture_tokenizer(const std::string& name) {
  static std::mutex mutex;
  static std::map<std::string, std::unique_ptr<Tokenizer>> cache;
  std::lock_guard<std::mutex> lock(mutex);
  auto& slot = cache[name];
  if (!slot)
    slot = std::make_unique<Tokenizer>(
        Tokenizer::from_json_file(tokenizer_fixture_dir(name) + "/tokenizer.json"));
  return *slot;
}

nlohmann::json read_json_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot open " + path);
  return nlohmann::json::parse(in);
}

const nlohmann::json& fixture_json(const std::string& name) {
  static std::mutex mutex;
  static std::map<std::string, nlohmann::json> cache;
  std::lock_guard<std::mutex> lock(mutex);
  auto it = cache.find(name);
  if (it == cache.end())
    it = cache.emplace(name, read_json_file(tokenizer_fixture_dir(name) + "/tokenizer.json")).first;
  return it->second;
}

const std::vector<CorpusCase>& golden_corpus() {
  static const std::vector<CorpusCase> corpus = [] {
    std::vector<CorpusCase> cases;
    const nlohmann::json json = read_json_file(std::string(MB_TEST_DATA_DIR) + "/tokenizers/corpus.json");
    for (const auto& entry : json.at("cases")) {
      CorpusCase c;
      c.name = entry.at("name").get<std::string>();
      if (entry.contains("hex")) {
        c.bytes = hex_to_bytes(entry.at("hex").get<std::string>());
        c.invalid_utf8 = true;
      } else {
        c.bytes = entry.at("text").get<std::string>();
      }
      cases.push_back(std::move(c));
    }
    return cases;
  }();
  return corpus;
}

const nlohmann::json& goldens_for(const std::string& name) {
  static std::mutex mutex;
  static std::map<std::string, nlohmann::json> cache;
  std::lock_guard<std::mutex> lock(mutex);
  auto it = cache.find(name);
  if (it == cache.end())
    it = cache.emplace(name, read_json_file(tokenizer_fixture_dir(name) + "/goldens.json")).first;
  return it->second;
}

std::string escape(std::string_view bytes) {
  std::ostringstream out;
  out << '"';
  for (char c : bytes) {
    const auto byte = static_cast<unsigned char>(c);
    if (c == '\\' || c == '"') {
      out << '\\' << c;
    } else if (byte >= 0x20 && byte < 0x7F) {
      out << c;
    } else {
      static const char* digits = "0123456789abcdef";
      out << "\\x" << digits[byte >> 4] << digits[byte & 15];
    }
  }
  out << '"';
  return out.str();
}

std::string join_ids(const std::vector<int32_t>& ids, size_t from, size_t count) {
  std::ostringstream out;
  out << '[';
  from = std::min(from, ids.size());
  const size_t end = ids.size() - from < count ? ids.size() : from + count;
  for (size_t i = from; i < end; ++i) out << (i > from ? ", " : "") << ids[i];
  out << ']';
  return out.str();
}

nlohmann::json tiny_tokenizer_json(const std::vector<std::pair<std::string, std::string>>& merges,
                                   const nlohmann::json& added_tokens, const nlohmann::json& normalizer) {
  nlohmann::json vocab = nlohmann::json::object();
  for (int byte = 0; byte < 256; ++byte) {
    std::string token;
    tok::append_utf8(token, tok::byte_to_char(static_cast<unsigned char>(byte)));
    vocab[token] = byte;
  }
  nlohmann::json merge_list = nlohmann::json::array();
  int next_id = 256;
  for (const auto& [left, right] : merges) {
    if (!vocab.contains(left + right)) vocab[left + right] = next_id++;
    merge_list.push_back(left + " " + right);
  }
  const nlohmann::json byte_level = {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", true}};
  return {{"version", "1.0"},
          {"added_tokens", added_tokens},
          {"normalizer", normalizer},
          {"pre_tokenizer", byte_level},
          {"post_processor", nullptr},
          {"decoder", byte_level},
          {"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", merge_list}}}};
}

std::string fresh_temp_dir(const std::string& tag) {
  static std::atomic<int> counter{0};
  const auto dir = std::filesystem::temp_directory_path() /
                   ("mambacpp-" + tag + "-" + std::to_string(::getpid()) + "-" + std::to_string(counter++));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir.string();
}

}  // namespace mb::test
