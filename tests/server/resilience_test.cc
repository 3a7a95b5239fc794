// `mambacpp serve` against careless and hostile use (issue 21): a model that cannot load, an empty
// API key, GGUF files with their embedded tokenizer.
#include <gtest/gtest.h>
#include <httplib.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "common/test_util.h"
#include "server_process.h"
#include "tokenizer/tokenizer.h"

namespace mb {
namespace {

using nlohmann::json;
using test::serve_until_exit;
using test::server_test_model;
using test::ServerProcess;

// A model that fails to load ends the server with its error and a non-zero status at once. The
// listener used to be left in accept() when stop() came before it had started, and the server then
// hung with /health at "loading" (7 of 9 tries), so each case is tried several times.
TEST(ServeResilience, AModelThatCannotLoadEndsTheServerWithItsError) {
  const std::string dir = test::make_temp_dir("serve_bad_model") + "/truncated";
  std::filesystem::copy(server_test_model(), dir, std::filesystem::copy_options::recursive);
  const std::string weights = dir + "/model.safetensors";
  ASSERT_TRUE(std::filesystem::exists(weights));
  std::filesystem::resize_file(weights, std::filesystem::file_size(weights) / 2);
  for (const std::string& model : {std::string("/nonexistent"), dir}) {
    for (int attempt = 0; attempt < 4; ++attempt) {
      const test::ServeExit result = serve_until_exit(model, "-t 1", 10);
      EXPECT_NE(result.status, 0) << model;
      EXPECT_NE(result.status, -1) << model << ": still running or killed after " << result.seconds << " s";
      EXPECT_LT(result.seconds, 2.0) << model;
      EXPECT_NE(result.stderr_text.find("error: "), std::string::npos) << model << ": " << result.stderr_text;
      EXPECT_NE(result.stderr_text.find(model == dir ? "model.safetensors" : "/nonexistent"),
                std::string::npos)
          << result.stderr_text;
    }
  }
}

// An empty key (an unset variable in `--api-key "$KEY"`) used to turn authentication off.
TEST(ServeResilience, AnEmptyApiKeyIsRefused) {
  const test::ServeExit result = serve_until_exit(server_test_model(), "-t 1 --api-key ''", 10);
  EXPECT_EQ(result.status, 1);
  EXPECT_NE(result.stderr_text.find("--api-key must not be empty"), std::string::npos) << result.stderr_text;
}

// RFC 7235: the scheme of an Authorization header is case-insensitive.
TEST(ServeResilience, TheBearerSchemeIsCaseInsensitive) {
  ServerProcess server(server_test_model(), "-t 1 --api-key sekrit");
  ASSERT_GT(server.port(), 0);
  httplib::Client client("127.0.0.1", server.port());
  for (const char* header : {"Bearer sekrit", "bearer sekrit", "BEARER sekrit", "bEaReR  sekrit"}) {
    const auto res = client.Get("/v1/models", {{"Authorization", header}});
    ASSERT_TRUE(res);
    EXPECT_EQ(res->status, 200) << header;
  }
  for (const char* header : {"Bearer sekrix", "Bearersekrit", "Basic sekrit", "bearer", "sekrit"}) {
    const auto res = client.Get("/v1/models", {{"Authorization", header}});
    ASSERT_TRUE(res);
    EXPECT_EQ(res->status, 401) << header;
  }
  EXPECT_EQ(server.terminate(), 0);
}

// `serve -m file.gguf` uses the tokenizer the file holds, as `run` and `generate` do (it used to
// look for a tokenizer.json next to it and refuse to start).
TEST(ServeResilience, AGgufFileIsServedWithItsEmbeddedTokenizer) {
  const std::string gguf = test::make_temp_dir("serve_gguf") + "/tiny.gguf";
  const std::string command = std::string(MB_CLI_PATH) + " make-model --format gguf --out " + gguf +
                              " --d-model 32 --n-layer 2 --vocab 301 --seed 3 >/dev/null";
  ASSERT_EQ(std::system(command.c_str()), 0);
  ServerProcess server(gguf, "-t 1");
  ASSERT_GT(server.port(), 0);
  httplib::Client client("127.0.0.1", server.port());
  // The same tokenizer as the folder the file was made from.
  const auto tokens = client.Post("/tokenize", R"({"content": "Hello world"})", "application/json");
  ASSERT_TRUE(tokens);
  ASSERT_EQ(tokens->status, 200) << tokens->body;
  const std::vector<int32_t> expected = Tokenizer::from_model_dir(server_test_model()).encode("Hello world");
  EXPECT_EQ(json::parse(tokens->body)["tokens"].get<std::vector<int32_t>>(), expected);
  const auto completion = client.Post(
      "/v1/completions", R"({"prompt": "Hello", "max_tokens": 3, "ignore_eos": true})", "application/json");
  ASSERT_TRUE(completion);
  ASSERT_EQ(completion->status, 200) << completion->body;
  EXPECT_EQ(json::parse(completion->body)["usage"]["completion_tokens"], 3);
  EXPECT_EQ(json::parse(client.Get("/v1/models")->body)["data"][0]["id"], "tiny.gguf");
  EXPECT_EQ(server.terminate(), 0);
}

}  // namespace
}  // namespace mb
