// Fuzzes chat templates: the fuzzer's bytes are parsed as a Jinja template and rendered over a
// fixed conversation (with and without the generation prompt), under small limits so that every
// input finishes quickly. Parsing and rendering must only ever refuse with mb::Error; and a
// template that renders must render the same text twice (rendering keeps no state between calls).
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "chat/chat_template.h"
#include "fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view source(reinterpret_cast<const char*>(data), size);
  static const std::vector<mb::ChatMessage> messages = {{"system", "You are helpful."},
                                                        {"user", "Hi {{ there }} é 🙂"},
                                                        {"assistant", ""},
                                                        {"user", "  bye\n"}};
  mb::ChatRenderOptions options;
  options.bos_token = "<s>";
  options.eos_token = "</s>";
  options.now_unix_seconds = 1734611696;
  options.max_output_bytes = 1 << 16;
  options.max_loop_iterations = 2000;
  options.max_recursion_depth = 16;
  mb::fuzz::expect_clean_refusal([&] {
    const mb::ChatTemplate chat_template = mb::ChatTemplate::parse(source);
    for (const bool prompt : {true, false}) {
      options.add_generation_prompt = prompt;
      std::string first;
      try {
        first = chat_template.render(messages, options);
      } catch (const mb::Error& e) {
        if (std::string_view(e.what()).starts_with("internal check failed")) {
          mb::fuzz::abort_on_internal_check(e.what());
        }
        continue;
      }
      if (chat_template.render(messages, options) != first) {
        std::fprintf(stderr, "a chat template rendered differently the second time\n");
        std::abort();
      }
    }
  });
  return 0;
}
