// SPDX-License-Identifier: MIT
// `mambacpp serve` end to end over loopback with cpp-httplib's client: the endpoints, the same
// tokens as `generate`, the same prompt-id rule as `generate`, streaming, OpenAI-shaped errors for every kind
// of bad request, the API key, the queue limit, a client that disconnects mid-stream, raw garbage on the
// socket, and SIGTERM.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "common/model_fixture.h"
#include "common/test_util.h"
#include "server_process.h"
#include "tokenizer/tokenizer.h"

namespace mb {
namespace {

using nlohmann::json;
using test::server_test_model;
using test::ServerProcess;

httplib::Client client_for(const ServerProcess& server) {
  httplib::Client client("127.0.0.1", server.port());
  client.set_read_timeout(120, 0);
  return client;
}

json post_json(httplib::Client& client, const std::string& path, const json& body,
               int expected_status = 200) {
  const auto res = client.Post(path.c_str(), body.dump(), "application/json");
  EXPECT_TRUE(res) << path;
  if (!res) return json();
  EXPECT_EQ(res->status, expected_status) << path << " " << body.dump() << " -> " << res->body;
  return json::parse(res->body, nullptr, false);
}

// The error object of a response, checked for OpenAI's shape.
json expect_error(const httplib::Result& res, int status, const std::string& fragment) {
  EXPECT_TRUE(res);
  if (!res) return json();
  EXPECT_EQ(res->status, status) << res->body;
  const json body = json::parse(res->body, nullptr, false);
  EXPECT_TRUE(body.contains("error")) << res->body;
  if (!body.contains("error")) return json();
  const json& error = body["error"];
  EXPECT_TRUE(error["message"].is_string());
  EXPECT_TRUE(error["type"].is_string());
  EXPECT_TRUE(error.contains("code"));
  EXPECT_NE(error["message"].get<std::string>().find(fragment), std::string::npos) << res->body;
  return error;
}

// A streamed POST: the data lines of its server-sent events, stopping after `keep` bytes when given
// (the client then drops the connection).
struct StreamResult {
  std::vector<std::string> data;
  bool complete = false;  // ended with [DONE]
  int status = 0;
};

StreamResult post_stream(const ServerProcess& server, const std::string& path, const json& body,
                         size_t keep = SIZE_MAX, std::function<void()> on_first_bytes = {}) {
  httplib::Client client = client_for(server);
  httplib::Request req;
  req.method = "POST";
  req.path = path;
  req.body = body.dump();
  req.set_header("Content-Type", "application/json");
  std::string received;
  bool first = true;
  req.content_receiver = [&](const char* data, size_t length, uint64_t, uint64_t) {
    received.append(data, length);
    if (first && on_first_bytes) on_first_bytes();
    first = false;
    return received.size() < keep;
  };
  const auto res = client.send(req);
  StreamResult result;
  result.status = res ? res->status : 0;
  std::istringstream lines(received);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("data: ", 0) != 0) continue;
    if (line == "data: [DONE]")
      result.complete = true;
    else
      result.data.push_back(line.substr(6));
  }
  return result;
}

std::string run_generate(const std::string& arguments) {
  const std::string dir = test::make_temp_dir("serve_generate");
  const std::string command = std::string(MB_CLI_PATH) + " generate " + arguments + " >" + dir + "/out.txt";
  EXPECT_EQ(std::system(command.c_str()), 0) << command;
  std::ifstream in(dir + "/out.txt");
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

TEST(Serve, EndpointsAnswerAndCompletionsMatchGenerate) {
  ServerProcess server(server_test_model(), "-t 1 -c 256");
  ASSERT_GT(server.port(), 0);
  httplib::Client client = client_for(server);
  const auto health = client.Get("/health");
  ASSERT_TRUE(health);
  EXPECT_EQ(json::parse(health->body)["status"], "ok");
  const auto models = client.Get("/v1/models");
  ASSERT_TRUE(models);
  EXPECT_EQ(json::parse(models->body)["data"][0]["id"], "tiny");

  const json tokens = post_json(client, "/tokenize", {{"content", "Hello world"}});
  ASSERT_TRUE(tokens["tokens"].is_array());
  EXPECT_EQ(post_json(client, "/detokenize", tokens)["content"], "Hello world");

  // Greedy completion from token ids: exactly the ids `generate` prints, as text.
  std::vector<int32_t> ids;
  std::istringstream generated(
      run_generate("-m " + server_test_model() + " --tokens 1,2,3 -n 12 --ignore-eos"));
  for (int32_t id; generated >> id;) ids.push_back(id);
  ASSERT_EQ(ids.size(), 12u);
  const std::string expected = post_json(client, "/detokenize", {{"tokens", ids}})["content"];
  const json request = {{"prompt", {1, 2, 3}}, {"max_tokens", 12}, {"temperature", 0}, {"ignore_eos", true}};
  const json completion = post_json(client, "/v1/completions", request);
  EXPECT_EQ(completion["object"], "text_completion");
  EXPECT_EQ(completion["choices"][0]["text"], expected);
  EXPECT_EQ(completion["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(completion["usage"]["prompt_tokens"], 3);
  EXPECT_EQ(completion["usage"]["completion_tokens"], 12);
  EXPECT_EQ(completion["usage"]["total_tokens"], 15);

  // The same request streamed: the pieces add up to the same text, and the stream ends in [DONE].
  json streamed_request = request;
  streamed_request["stream"] = true;
  const StreamResult stream = post_stream(server, "/v1/completions", streamed_request);
  EXPECT_EQ(stream.status, 200);
  EXPECT_TRUE(stream.complete);
  std::string text;
  std::string finish;
  for (const std::string& data : stream.data) {
    const json chunk = json::parse(data);
    text += chunk["choices"][0]["text"].get<std::string>();
    if (!chunk["choices"][0]["finish_reason"].is_null()) finish = chunk["choices"][0]["finish_reason"];
  }
  EXPECT_EQ(text, expected);
  EXPECT_EQ(finish, "length");

  // The same request once more is served from the cache, its whole prompt, with the same text.
  const json repeated = post_json(client, "/v1/completions", request);
  EXPECT_EQ(repeated["choices"][0]["text"], expected);
  EXPECT_EQ(repeated["usage"]["prompt_tokens_details"]["cached_tokens"], 3);

  // The next turn of the conversation resumes from the state cached at the end of the first, and
  // still gives exactly the tokens `generate` gives from scratch.
  std::vector<int32_t> follow_up = {1, 2, 3};
  follow_up.insert(follow_up.end(), ids.begin(), ids.end());
  follow_up.push_back(7);
  std::string follow_up_list;
  for (int32_t id : follow_up) follow_up_list += (follow_up_list.empty() ? "" : ",") + std::to_string(id);
  std::vector<int32_t> next_ids;
  std::istringstream next(
      run_generate("-m " + server_test_model() + " --tokens " + follow_up_list + " -n 6 --ignore-eos"));
  for (int32_t id; next >> id;) next_ids.push_back(id);
  const json again =
      post_json(client, "/v1/completions",
                {{"prompt", follow_up}, {"max_tokens", 6}, {"temperature", 0}, {"ignore_eos", true}});
  EXPECT_EQ(again["choices"][0]["text"], post_json(client, "/detokenize", {{"tokens", next_ids}})["content"]);
  EXPECT_EQ(again["usage"]["prompt_tokens_details"]["cached_tokens"], 15);

  // Chat in the plain format, with log-probabilities.
  const json chat = post_json(client, "/v1/chat/completions",
                              {{"messages", {{{"role", "user"}, {"content", "Hi"}}}},
                               {"max_tokens", 5},
                               {"temperature", 0},
                               {"ignore_eos", true},
                               {"logprobs", true},
                               {"top_logprobs", 2}});
  EXPECT_EQ(chat["object"], "chat.completion");
  EXPECT_EQ(chat["choices"][0]["message"]["role"], "assistant");
  ASSERT_EQ(chat["choices"][0]["logprobs"]["content"].size(), 5u);
  for (const json& entry : chat["choices"][0]["logprobs"]["content"]) {
    EXPECT_LE(entry["logprob"].get<double>(), 0.0);
    EXPECT_EQ(entry["top_logprobs"].size(), 2u);
  }
  const auto metrics = client.Get("/metrics");
  ASSERT_TRUE(metrics);
  EXPECT_NE(metrics->body.find("mambacpp_generated_tokens_total"), std::string::npos);
  EXPECT_NE(metrics->body.find("mambacpp_step_seconds{quantile=\"0.5\"}"), std::string::npos);
  EXPECT_EQ(server.terminate(), 0);
}

// A checkpoint whose model has 320 ids and whose tokenizer fewer: the ids in between are
// padding rows of the embedding, with no token.
const std::string& padded_model() {
  static const std::string dir = [] {
    MakeModelOptions o;
    o.config = test::small_config(32, 2, 320);
    o.seed = 29;
    o.write_tokenizer = false;
    const std::string d = test::make_temp_dir("serve_padded_model");
    make_model(d, o);
    write_byte_level_tokenizer_json(d + "/tokenizer.json", 300);
    return d;
  }();
  return dir;
}

TEST(Serve, PromptIdsFollowTheRuleOfGenerate) {
  const int32_t n_valid = Tokenizer::from_model_dir(padded_model()).vocab_size();
  ASSERT_LT(n_valid, 320);
  ServerProcess server(padded_model(), "-t 1");
  ASSERT_GT(server.port(), 0);
  httplib::Client client = client_for(server);

  // The last id the tokenizer has: accepted by both, with the same greedy tokens.
  const std::string last = std::to_string(n_valid - 1);
  std::vector<int32_t> ids;
  std::istringstream generated(
      run_generate("-m " + padded_model() + " --tokens 5,6," + last + " -n 8 --ignore-eos"));
  for (int32_t id; generated >> id;) ids.push_back(id);
  ASSERT_EQ(ids.size(), 8u);
  const json request = {
      {"prompt", {5, 6, n_valid - 1}}, {"max_tokens", 8}, {"temperature", 0}, {"ignore_eos", true}};
  EXPECT_EQ(post_json(client, "/v1/completions", request)["choices"][0]["text"],
            post_json(client, "/detokenize", {{"tokens", ids}})["content"]);

  // The first padding id: refused by both, with the same message (`generate` used to take it).
  const std::string dir = test::make_temp_dir("serve_refused");
  const std::string command = std::string(MB_CLI_PATH) + " generate -m " + padded_model() + " --tokens 5,6," +
                              std::to_string(n_valid) + " -n 8 >/dev/null 2>" + dir + "/err.txt";
  EXPECT_NE(std::system(command.c_str()), 0);
  std::ifstream err_file(dir + "/err.txt");
  std::string err;
  std::getline(err_file, err);
  const std::string message =
      "prompt token " + std::to_string(n_valid) + " at position 2 is outside the vocabulary";
  const json refused = {{"prompt", {5, 6, n_valid}}, {"max_tokens", 8}};
  const json error =
      expect_error(client.Post("/v1/completions", refused.dump(), "application/json"), 400, message);
  EXPECT_EQ(err, "error: " + error["message"].get<std::string>());
}

TEST(Serve, BadRequestsGetOpenAiErrorsAndTheServerKeepsServing) {
  ServerProcess server(server_test_model(), "-t 1 -c 64 --max-body 4096");
  ASSERT_GT(server.port(), 0);
  httplib::Client client = client_for(server);
  const auto post = [&](const std::string& path, const std::string& body) {
    return client.Post(path.c_str(), body, "application/json");
  };
  EXPECT_EQ(expect_error(post("/v1/completions", "{\"prompt\": "), 400, "not valid JSON")["type"],
            "invalid_request_error");
  expect_error(post("/v1/completions", "[1, 2]"), 400, "must be a JSON object");
  expect_error(post("/v1/completions", R"({"prompt": "hi", "max_tokens": "many"})"), 400,
               "max_tokens must be an integer");
  expect_error(post("/v1/completions", R"({"prompt": "hi", "temperature": -2})"), 400, "temperature must be");
  expect_error(post("/v1/completions", R"({"prompt": "hi", "top_p": 7})"), 400, "top_p must be in (0, 1]");
  expect_error(post("/v1/completions", R"({"prompt": ""})"), 400, "the prompt is empty");
  expect_error(post("/v1/completions", R"({"prompt": [1, 5000]})"), 400, "outside the vocabulary");
  expect_error(post("/v1/completions", R"({"prompt": ")" + std::string(300, 'z') + "\"}"), 400,
               "the context size (-c) is 64");
  expect_error(post("/v1/chat/completions", R"({"messages": [{"role": 1}]})"), 400, "role");
  // Text that is not UTF-8 (a raw byte, or an escaped lone surrogate) is refused, never repaired.
  expect_error(
      post("/v1/chat/completions", "{\"messages\": [{\"role\": \"user\", \"content\": \"caf\xe9\"}]}"), 400,
      "UTF-8");
  expect_error(post("/v1/chat/completions", R"({"messages": [{"role": "user", "content": "caf\udce9"}]})"),
               400, "surrogate");
  expect_error(post("/v1/completions", "{\"prompt\": \"" + std::string(8000, 'a') + "\"}"), 413,
               "--max-body 4096");
  expect_error(client.Get("/v1/nothing"), 404, "no such endpoint");
  expect_error(post("/tokenize", R"({"content": 3})"), 400, "content must be a string");
  expect_error(post("/detokenize", R"({"tokens": [-4]})"), 400, "outside the vocabulary");
  // Unknown fields are ignored.
  post_json(client, "/v1/completions",
            {{"prompt", "hi"}, {"max_tokens", 2}, {"some_vendor_field", {1, 2}}, {"user", "me"}});

  // Bytes that are not HTTP at all, and a request cut off mid-body.
  static const char binary[] = "\x00\xff\x10garbage\r\n\r\n";
  for (const std::string& garbage :
       std::vector<std::string>{std::string(binary, sizeof binary - 1), "GET\r\n\r\n",
                                "POST /v1/completions HTTP/1.1\r\nContent-Length: 100\r\n\r\n{\"pro"}) {
    const int fd = socket(AF_INET, SOCK_STREAM, 0);
    ASSERT_GE(fd, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_port = htons(static_cast<uint16_t>(server.port()));
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ASSERT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof address), 0);
    EXPECT_EQ(write(fd, garbage.data(), garbage.size()), static_cast<ssize_t>(garbage.size()));
    close(fd);
  }
  const json after = post_json(client, "/v1/completions", {{"prompt", "hi"}, {"max_tokens", 3}});
  EXPECT_EQ(after["usage"]["completion_tokens"].get<int>() <= 3, true);
  EXPECT_EQ(server.terminate(), 0);
}

TEST(Serve, TheApiKeyGuardsEveryEndpointButHealth) {
  ServerProcess server(server_test_model(), "-t 1 --api-key sekrit");
  ASSERT_GT(server.port(), 0);
  httplib::Client client = client_for(server);
  ASSERT_EQ(client.Get("/health")->status, 200);
  expect_error(client.Get("/v1/models"), 401, "API key");
  expect_error(client.Get("/metrics"), 401, "API key");
  expect_error(client.Post("/v1/completions", R"({"prompt": "hi"})", "application/json"), 401, "API key");
  expect_error(client.Post("/tokenize", R"({"content": "hi"})", "application/json"), 401, "API key");
  httplib::Client wrong = client_for(server);
  wrong.set_bearer_token_auth("sekrix");
  expect_error(wrong.Get("/v1/models"), 401, "API key");
  httplib::Client right = client_for(server);
  right.set_bearer_token_auth("sekrit");
  EXPECT_EQ(right.Get("/v1/models")->status, 200);
  EXPECT_EQ(right.Post("/v1/completions", R"({"prompt": "hi", "max_tokens": 2})", "application/json")->status,
            200);
  EXPECT_EQ(server.terminate(), 0);
}

// Streams until the client drops the connection, from a thread; signals once bytes arrived.
struct BackgroundStream {
  std::atomic<bool> started{false};
  StreamResult result;
  std::thread thread;
  BackgroundStream(const ServerProcess& server, const json& body, size_t keep = SIZE_MAX) {
    thread = std::thread([this, &server, body, keep] {
      result = post_stream(server, "/v1/completions", body, keep, [this] { started = true; });
    });
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (!started && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ~BackgroundStream() {
    if (thread.joinable()) thread.join();
  }
};

const json kEndlessRequest = {{"prompt", "Once upon a time"},
                              {"max_tokens", 100000000},
                              {"ignore_eos", true},
                              {"stream", true},
                              {"temperature", 0}};

// After one client hung up on the only slot: a new request completes, and the server counted one
// disconnect and one cancellation.
void expect_slot_freed_after_one_disconnect(httplib::Client& client) {
  const json done =
      post_json(client, "/v1/completions", {{"prompt", "hi"}, {"max_tokens", 4}, {"ignore_eos", true}});
  EXPECT_EQ(done["usage"]["completion_tokens"], 4);
  const std::string metrics = client.Get("/metrics")->body;
  EXPECT_NE(metrics.find("mambacpp_http_client_disconnects_total 1\n"), std::string::npos) << metrics;
  EXPECT_NE(metrics.find("mambacpp_requests_cancelled_total 1\n"), std::string::npos) << metrics;
}

TEST(Serve, ADisconnectedClientFreesItsSlotAndAFullQueueIs503) {
  ServerProcess server(server_test_model(), "-t 1 -np 1 --max-queue 1");
  ASSERT_GT(server.port(), 0);
  httplib::Client client = client_for(server);
  {
    // The only slot streams without end; its client reads a little, then hangs up.
    BackgroundStream first(server, kEndlessRequest, 4096);
    ASSERT_TRUE(first.started);
    first.thread.join();
    EXPECT_FALSE(first.result.complete);
  }
  // The slot is free again: a new request completes.
  expect_slot_freed_after_one_disconnect(client);

  // One request in the slot, one waiting: the next is refused with 503 and Retry-After.
  BackgroundStream running(server, kEndlessRequest, 4 << 20);
  ASSERT_TRUE(running.started);
  std::thread waiting([&] { post_stream(server, "/v1/completions", kEndlessRequest, 64); });
  bool queued = false;
  for (int attempt = 0; attempt < 1000 && !queued; ++attempt) {
    queued = client.Get("/metrics")->body.find("mambacpp_queue_depth 1\n") != std::string::npos;
    if (!queued) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_TRUE(queued);
  const auto res = client.Post("/v1/completions", R"({"prompt": "hi", "max_tokens": 1})", "application/json");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->get_header_value("Retry-After"), "1");
  EXPECT_EQ(expect_error(res, 503, "")["code"], "queue_full");
  running.thread.join();
  waiting.join();
  EXPECT_EQ(server.terminate(), 0);
}

TEST(Serve, AClientThatHangsUpOnAPlainRequestFreesItsSlot) {
  ServerProcess server(server_test_model(), "-t 1 -np 1");
  ASSERT_GT(server.port(), 0);
  {
    // The only slot runs a request without end; its client stops waiting after a second.
    httplib::Client impatient = client_for(server);
    impatient.set_read_timeout(1, 0);
    json endless = kEndlessRequest;
    endless.erase("stream");
    const auto res = impatient.Post("/v1/completions", endless.dump(), "application/json");
    EXPECT_FALSE(res && res->body.find("choices") != std::string::npos);
  }
  // The slot is free again: a new request completes.
  httplib::Client client = client_for(server);
  expect_slot_freed_after_one_disconnect(client);
  EXPECT_EQ(server.terminate(), 0);
}

TEST(Serve, SigtermFinishesTheStreamsInFlightAndExitsZero) {
  ServerProcess server(server_test_model(), "-t 1 -np 2");
  ASSERT_GT(server.port(), 0);
  const json request = {{"prompt", "Once"}, {"max_tokens", 400}, {"ignore_eos", true}, {"stream", true}};
  BackgroundStream stream(server, request);
  ASSERT_TRUE(stream.started);
  EXPECT_EQ(server.terminate(), 0) << server.stderr_text();
  stream.thread.join();
  EXPECT_TRUE(stream.result.complete);
  const json last = json::parse(stream.result.data.back());
  EXPECT_EQ(last["usage"]["completion_tokens"], 400);
  EXPECT_EQ(last["choices"][0]["finish_reason"], "length");
  EXPECT_NE(server.stdout_text().find("SIGTERM received"), std::string::npos);
}

TEST(Serve, EveryFlagIsCheckedUnderItsName) {
  const std::string dir = test::make_temp_dir("serve_flags");
  const std::string base =
      std::string(MB_CLI_PATH) + " serve -m " + server_test_model() + " --host 127.0.0.1 ";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"--port 70000", "--port must be in [0, 65535] (0 = any free port), got 70000"},
      {"-np 0", "-np/--parallel must be in [1, 1024], got 0"},
      {"--parallel 5000", "-np/--parallel must be in [1, 1024], got 5000"},
      {"-c -1", "-c/--ctx-size must be in [0, 2147483647] (0 = the model's default), got -1"},
      {"--timeout 0", "--timeout must be in [1, 86400], got 0"},
      {"--read-timeout 0", "--read-timeout must be in [1, 3600], got 0"},
      {"--max-conns-per-ip -1", "--max-conns-per-ip must be in [0, 65536] (0 = no cap), got -1"},
      {"--max-connections 5", "--max-connections must be in [16, 1048576], got 5"},
      {"--cache-every -5", "--cache-every must be >= 0"},
      {"--cache-mb -1", "--cache-mb must be in [0, 16777216]"},
      {"--max-queue -1", "--max-queue must be in [0, 1048576]"},
      {"--max-body 10", "--max-body must be in [1024, 4294967296], got 10"},
      {"-b 0", "-b/--batch-size must be in [1, 1048576], got 0"},
      {"-t 5000", "-t/--threads must be in [0, 1024]"},
      {"--slot-save-path /nonexistent/slots", "--slot-save-path: '/nonexistent/slots' is not a directory"},
      {"--port x", "--port"},
  };
  for (const auto& [arguments, fragment] : cases) {
    const int status =
        std::system((base + arguments + " >" + dir + "/out.txt 2>" + dir + "/err.txt").c_str());
    std::ifstream in(dir + "/err.txt");
    const std::string err((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    EXPECT_NE(status, 0) << arguments;
    EXPECT_NE(err.find(fragment), std::string::npos) << arguments << "\n" << err;
    EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 1) << arguments << "\n" << err;
  }
  // A port already taken is a one-line error too, before the model is loaded.
  ServerProcess server(server_test_model(), "-t 1");
  ASSERT_GT(server.port(), 0);
  const int status = std::system(
      (base + "--port " + std::to_string(server.port()) + " >" + dir + "/out.txt 2>" + dir + "/err.txt")
          .c_str());
  std::ifstream in(dir + "/err.txt");
  const std::string err((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_NE(status, 0);
  EXPECT_NE(err.find("cannot listen on 127.0.0.1:" + std::to_string(server.port())), std::string::npos)
      << err;
  EXPECT_EQ(server.terminate(), 0);
}

TEST(Serve, AChatTemplateThatCannotRenderIsA400) {
  const std::string dir = test::make_temp_dir("serve_template") + "/model";
  std::filesystem::copy(server_test_model(), dir, std::filesystem::copy_options::recursive);
  std::ofstream(dir + "/tokenizer_config.json")
      << R"({"chat_template": "{% if messages[0].role == 'system' %}{{ raise_exception('System role not supported') }}{% endif %}{% for m in messages %}{{ m.role }}> {{ m.content }}\n{% endfor %}"})";
  ServerProcess server(dir, "-t 1");
  ASSERT_GT(server.port(), 0);
  httplib::Client client = client_for(server);
  const json system = {
      {"messages", {{{"role", "system"}, {"content", "x"}}, {{"role", "user"}, {"content", "y"}}}},
      {"max_tokens", 2}};
  const json error = expect_error(client.Post("/v1/chat/completions", system.dump(), "application/json"), 400,
                                  "System role not supported");
  EXPECT_EQ(error.is_object() ? error.value("code", "") : "", "chat_template_error");
  const json user = {{"messages", {{{"role", "user"}, {"content", "y"}}}}, {"max_tokens", 2}};
  post_json(client, "/v1/chat/completions", user);
  EXPECT_EQ(server.terminate(), 0);
}

// A Granite-4.0-H folder (random weights, the real layout) with the template IBM publishes in its
// tokenizer_config.json.
std::string granite_hybrid_folder(const std::string& name) {
  const std::string dir = test::make_temp_dir(name) + "/model";
  const std::string make = std::string(MB_CLI_PATH) + " make-model --arch granite-hybrid --out " + dir +
                           " --d-model 32 --n-layer 4 --vocab 301 --seed 5 >/dev/null 2>&1";
  EXPECT_EQ(std::system(make.c_str()), 0);
  const json config = {{"bos_token", "<|end_of_text|>"},
                       {"eos_token", "<|end_of_text|>"},
                       {"chat_template", test::read_data_file("chat_templates/granite-4.0.jinja")}};
  std::ofstream(dir + "/tokenizer_config.json") << config.dump();
  return dir;
}

// The Granite-4.0 golden of tests/data/chat_templates for `conversation`, with the generation
// prompt, its keys in their order.
nlohmann::ordered_json granite_golden(const std::string& conversation) {
  const auto goldens = nlohmann::ordered_json::parse(test::read_data_file("chat_templates/goldens.json"));
  for (const auto& c : goldens["cases"])
    if (c["template"] == "granite-4.0.jinja" && c["conversation"] == conversation &&
        c["add_generation_prompt"].get<bool>())
      return c;
  ADD_FAILURE() << conversation;
  return {};
}

// /v1/chat/completions prefills Hugging Face's render of the messages (the golden), not the plain
// format.
TEST(Serve, AGraniteHybridFolderIsServedWithItsPublishedChatTemplate) {
  const std::string dir = granite_hybrid_folder("serve_granite_hybrid");
  const json golden = granite_golden("system_and_user");
  ASSERT_TRUE(golden.is_object());
  ServerProcess server(dir, "-t 1");
  ASSERT_GT(server.port(), 0);
  httplib::Client client = client_for(server);
  const auto count_tokens = [&](const std::string& text) {
    return post_json(client, "/tokenize", {{"content", text}})["tokens"].size();
  };
  const json reply =
      post_json(client, "/v1/chat/completions",
                {{"messages", golden["variables"]["messages"]}, {"max_tokens", 2}, {"ignore_eos", true}});
  EXPECT_EQ(reply["usage"]["prompt_tokens"], count_tokens(golden["expected"]));
  EXPECT_NE(reply["usage"]["prompt_tokens"],
            count_tokens("system: You are a concise assistant.\nuser: Name three primes.\nassistant:"));
  EXPECT_EQ(server.terminate(), 0);
}

// Without -c, a hybrid's context is its trained length (its KV cache grows per token): the server
// says so at start, a request past it is a 400 naming it, a reply stops at it, and /v1/models
// reports it.
TEST(Serve, AHybridIsBoundedByItsTrainedContextByDefault) {
  const std::string dir = granite_hybrid_folder("serve_default_context");
  json config = json::parse(std::ifstream(dir + "/config.json"));
  config["max_position_embeddings"] = 40;
  std::ofstream(dir + "/config.json") << config.dump();
  ServerProcess server(dir, "-t 1");
  ASSERT_GT(server.port(), 0);
  EXPECT_NE(server.stdout_text().find("context 40 tokens (from the model's max_position_embeddings)"),
            std::string::npos)
      << server.stdout_text();
  httplib::Client client = client_for(server);
  expect_error(
      client.Post("/v1/completions", json{{"prompt", std::string(60, 'z')}}.dump(), "application/json"), 400,
      "the context size (-c) is 40");
  const json reply =
      post_json(client, "/v1/completions", {{"prompt", "hi"}, {"max_tokens", 100000}, {"ignore_eos", true}});
  EXPECT_EQ(reply["usage"]["total_tokens"], 40) << reply.dump();
  const auto models = client.Get("/v1/models");
  ASSERT_TRUE(models);
  EXPECT_EQ(json::parse(models->body)["data"][0]["meta"]["n_ctx"], 40) << models->body;
  EXPECT_EQ(server.terminate(), 0);
}

// A request with tools, an assistant's tool calls and their results prefills exactly the golden's
// text: sent first as a completion prompt, its state is cached, and the chat request then resumes
// from it in full, which only the same tokens can do. The model's tool call comes back as text.
TEST(Serve, ARequestWithToolsPrefillsWhatTransformersRenders) {
  const std::string dir = granite_hybrid_folder("serve_granite_tools");
  const nlohmann::ordered_json golden = granite_golden("tools_and_tool_results");
  ASSERT_TRUE(golden.is_object());
  ASSERT_TRUE(golden["variables"].contains("tools"));
  ServerProcess server(dir, "-t 1");
  ASSERT_GT(server.port(), 0);
  httplib::Client client = client_for(server);
  const json completion =
      post_json(client, "/v1/completions", {{"prompt", golden["expected"]}, {"max_tokens", 1}});
  const int64_t prompt_tokens = completion["usage"]["prompt_tokens"];
  nlohmann::ordered_json request = {{"messages", golden["variables"]["messages"]},
                                    {"tools", golden["variables"]["tools"]},
                                    {"tool_choice", "auto"},
                                    {"max_tokens", 2},
                                    {"ignore_eos", true}};
  const auto res = client.Post("/v1/chat/completions", request.dump(), "application/json");
  ASSERT_TRUE(res);
  ASSERT_EQ(res->status, 200) << res->body;
  const json reply = json::parse(res->body);
  EXPECT_EQ(reply["usage"]["prompt_tokens"], prompt_tokens);
  EXPECT_EQ(reply["usage"]["prompt_tokens_details"]["cached_tokens"], prompt_tokens);
  EXPECT_TRUE(reply["choices"][0]["message"]["content"].is_string());
  EXPECT_FALSE(reply["choices"][0]["message"].contains("tool_calls"));
  // The same request with its keys sorted (tools printed in another order) is another prompt.
  const json sorted = post_json(client, "/v1/chat/completions", json::parse(request.dump()));
  EXPECT_LT(sorted["usage"]["prompt_tokens_details"]["cached_tokens"], sorted["usage"]["prompt_tokens"]);
  expect_error(client.Post("/v1/chat/completions",
                           R"({"messages": [{"role": "user", "content": [{"type": "image_url"}]}]})",
                           "application/json"),
               400, "is an image");
  EXPECT_EQ(server.terminate(), 0);
}

// A hybrid conversation's next turn on a warm server resumes from the state cached at the end of
// the previous one (the Mamba layers' snapshot plus the attention layers' KV prefix) and answers
// exactly what a cold server answers: the same tokens with the same log-probabilities, printed to
// the last bit. The first prompt is shorter than any cache interval, so only the entry made at the
// end of every request can serve it. A dense Granite-4.0-H, both kinds of mixture of experts,
// LFM2 (dense and MoE) and Qwen3.5.
TEST(Serve, AHybridFollowUpResumedFromTheCacheEqualsAColdServersAnswer) {
  const std::string dir = test::make_temp_dir("serve_hybrid_follow_up");
  const std::string common = " --d-model 40 --vocab 301 --d-state 16 --headdim 16 --seed 4 >/dev/null 2>&1";
  const std::vector<std::pair<std::string, std::string>> models = {
      {"granite", "--arch granite-hybrid --pattern 'M*M' --heads 4 --kv-heads 2 --mlp-width 36"},
      {"granite_moe",
       "--arch granite-hybrid --pattern 'M*' --heads 4 --kv-heads 2 --mlp-width 36 --experts 5 --top-k 2 "
       "--expert-width 20"},
      {"nemotron_moe",
       "--arch nemotron-h --pattern 'ME*E' --heads 4 --kv-heads 1 --head-dim 8 --experts 7 --top-k 3 "
       "--expert-width 24 --shared-width 30"},
      // LFM2's short convolutions carry a history of B * x; LFM2-MoE adds sigmoid-routed experts.
      {"lfm2", "--arch lfm2 --n-layer 3"},
      {"lfm2_moe", "--arch lfm2-moe --n-layer 3 --set num_experts=5 --set num_experts_per_tok=2"},
      // Qwen3.5's Gated DeltaNet layers carry a conv history and a matrix state per value head.
      {"qwen35", "--arch qwen3.5 --n-layer 4"}};
  for (const auto& [name, flags] : models) {
    SCOPED_TRACE(name);
    const std::string model = dir + "/" + name;
    const std::string make = std::string(MB_CLI_PATH) + " make-model --out " + model + " " + flags + common;
    ASSERT_EQ(std::system(make.c_str()), 0) << make;
    // The first turn's greedy tokens, from `generate`, and the follow-up: the whole conversation so
    // far plus one new token.
    std::vector<int32_t> follow_up = {5, 6, 7, 8, 9};
    std::istringstream generated(run_generate("-m " + model + " --tokens 5,6,7,8,9 -n 10 --ignore-eos"));
    for (int32_t id; generated >> id;) follow_up.push_back(id);
    ASSERT_EQ(follow_up.size(), 15u);
    follow_up.push_back(11);
    const json first = {
        {"prompt", {5, 6, 7, 8, 9}}, {"max_tokens", 10}, {"temperature", 0}, {"ignore_eos", true}};
    const json next = {
        {"prompt", follow_up}, {"max_tokens", 8}, {"temperature", 0}, {"ignore_eos", true}, {"logprobs", 3}};
    json warm, cold;
    {
      ServerProcess server(model, "-t 1");
      ASSERT_GT(server.port(), 0);
      httplib::Client client = client_for(server);
      const std::vector<int32_t> first_ids(follow_up.begin() + 5, follow_up.end() - 1);
      EXPECT_EQ(post_json(client, "/v1/completions", first)["choices"][0]["text"],
                post_json(client, "/detokenize", {{"tokens", first_ids}})["content"]);
      warm = post_json(client, "/v1/completions", next);
      EXPECT_EQ(server.terminate(), 0);
    }
    {
      ServerProcess server(model, "-t 2");
      ASSERT_GT(server.port(), 0);
      httplib::Client client = client_for(server);
      cold = post_json(client, "/v1/completions", next);
      EXPECT_EQ(server.terminate(), 0);
    }
    EXPECT_EQ(warm["usage"]["prompt_tokens_details"]["cached_tokens"], 15);
    EXPECT_EQ(cold["usage"]["prompt_tokens_details"]["cached_tokens"], 0);
    ASSERT_EQ(warm["choices"][0]["logprobs"]["token_logprobs"].size(), 8u);
    EXPECT_EQ(warm["choices"], cold["choices"]);
  }
}

}  // namespace
}  // namespace mb
