// SPDX-License-Identifier: MIT
#include "common/test_util.h"

#include <unistd.h>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "core/error.h"
#include "io/file_io.h"

namespace mb::test {

std::string make_temp_dir(const std::string& tag) {
  static int counter = 0;
  const auto dir = std::filesystem::temp_directory_path() /
                   ("mambacpp_" + tag + "_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir.string();
}

double nmse(const std::vector<float>& got, const std::vector<double>& reference) {
  if (got.size() != reference.size()) return INFINITY;
  double error = 0.0, energy = 0.0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double diff = got[i] - reference[i];
    error += diff * diff;
    energy += reference[i] * reference[i];
  }
  return energy > 0.0 ? error / energy : error;
}

double nmse(const std::vector<float>& got, const std::vector<float>& reference) {
  return nmse(got, std::vector<double>(reference.begin(), reference.end()));
}

long first_bit_difference(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) return 0;
  for (size_t i = 0; i < a.size(); ++i)
    if (std::memcmp(&a[i], &b[i], sizeof(float)) != 0) return static_cast<long>(i);
  return -1;
}

std::string read_data_file(const std::string& path) {
  return read_text_file(std::string(MB_TEST_DATA_DIR) + "/" + path);
}

std::vector<uint8_t> bytes_of(const std::string& text) {
  return {text.begin(), text.end()};
}

void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

std::string error_of(const std::function<void()>& action) {
  try {
    action();
  } catch (const Error& e) {
    return e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "threw a foreign exception: " << e.what();
    return "";
  }
  ADD_FAILURE() << "did not throw mb::Error";
  return "";
}

}  // namespace mb::test
