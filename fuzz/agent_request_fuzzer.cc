// SPDX-License-Identifier: MIT
// Fuzzes the request translators of the agent APIs: the first byte picks /v1/responses
// (translate_responses_request, with a response store holding "resp_seed"), /v1/messages or
// /v1/messages/count_tokens (translate_messages_request); the rest is the body. An accepted body
// must translate to JSON text (the chat request), the same text again when translated twice, and
// that text must go through the chat request parser (parse_api_request) as any client's body
// does: accepted or refused with an mb::Error.
#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "fuzz_support.h"
#include "server/messages_api.h"
#include "server/responses_api.h"

namespace {

mb::server::ResponseStore& seeded_store() {
  static mb::server::ResponseStore* store = [] {
    auto* s = new mb::server::ResponseStore(4, 1 << 16);
    s->put("resp_seed", nlohmann::ordered_json::parse(R"([{"role":"user","content":"hi"},)"
                                                      R"({"role":"assistant","content":"hello"}])"));
    return s;
  }();
  return *store;
}

std::string translate(uint8_t selector, std::string_view body) {
  constexpr size_t kMaxItems = 256;
  switch (selector % 3) {
    case 0:
      return mb::server::translate_responses_request(body, &seeded_store(), kMaxItems).chat_body;
    case 1:
      return mb::server::translate_messages_request(body, false, kMaxItems).chat_body;
    default:
      return mb::server::translate_messages_request(body, true, kMaxItems).chat_body;
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string_view body(reinterpret_cast<const char*>(data) + 1, size - 1);
  mb::fuzz::expect_clean_refusal([&] {
    const std::string chat = translate(data[0], body);
    if (!nlohmann::json::accept(chat)) {
      std::fprintf(stderr, "an accepted body translated to text that is not JSON\n");
      std::abort();
    }
    if (translate(data[0], body) != chat) {
      std::fprintf(stderr, "the same body translated to two different chat requests\n");
      std::abort();
    }
    mb::server::parse_api_request(mb::server::ApiKind::Chat, chat, mb::server::ApiDefaults{}, 1);
  });
  return 0;
}
