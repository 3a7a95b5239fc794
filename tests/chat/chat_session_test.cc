// SPDX-License-Identifier: MIT
// The in-process chat session (server/chat_session.h): a conversation's next turn resumes from
// the state its previous turn left in the cache, and answers exactly what a fresh session given
// the same messages answers; an interrupted reply keeps what was shown; a turn that cannot be
// taken leaves the conversation as it was.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>

#include "common/test_util.h"
#include "core/error.h"
#include "engine/gguf_tokenizer.h"
#include "server/chat_session.h"

namespace mb {
namespace {

// A hybrid folder (random weights, the real layout) with `chat_template` (none: the plain format).
std::string session_model(const std::string& name, const std::string& flags,
                          const std::string& chat_template) {
  const std::string dir = test::make_temp_dir(name) + "/model";
  const std::string make = std::string(MB_CLI_PATH) + " make-model --out " + dir + " " + flags +
                           " --d-model 32 --vocab 301 --seed 5 >/dev/null 2>&1";
  EXPECT_EQ(std::system(make.c_str()), 0) << make;
  if (!chat_template.empty()) {
    const nlohmann::json config = {
        {"bos_token", "<|end_of_text|>"}, {"eos_token", "<|end_of_text|>"}, {"chat_template", chat_template}};
    std::ofstream(dir + "/tokenizer_config.json") << config.dump();
  }
  return dir;
}

// The template Granite-4.0 publishes.
std::string granite_template() {
  return test::read_data_file("chat_templates/granite-4.0.jinja");
}

// A two-layer Granite-4.0-H (Mamba, attention) with `chat_template`.
std::string small_granite(const std::string& name, const std::string& chat_template) {
  return session_model(name, "--arch granite-hybrid --pattern 'M*'", chat_template);
}

struct Loaded {
  std::unique_ptr<Model> model;
  Tokenizer tokenizer;
  server::ServedChatTemplate chat;
  explicit Loaded(const std::string& dir)
      : model(Model::load(dir)),
        tokenizer(load_tokenizer(dir)),
        chat(server::load_served_chat_template(dir)) {}
};

server::ChatSessionOptions sampled_options() {
  server::ChatSessionOptions o;
  o.system = "Be brief.";
  o.max_tokens = 9;
  o.stop_at_eos = false;  // every reply is max_tokens long, whatever the random weights prefer
  o.sampling.temperature = 0.9f;
  o.sampling.seed = 11;
  return o;
}

TEST(ChatSession, AFollowUpResumesFromTheCacheAndEqualsAFreshSessionsAnswer) {
  const std::vector<std::pair<std::string, std::string>> models = {
      {"chat_session_granite", "--arch granite-hybrid --pattern 'M*M' --heads 4 --kv-heads 2 --mlp-width 36"},
      {"chat_session_nemotron_moe",
       "--arch nemotron-h --pattern 'ME*E' --heads 4 --kv-heads 1 --head-dim 8 --experts 7 --top-k 3 "
       "--expert-width 24 --shared-width 30 --d-state 16 --headdim 16"}};
  for (const auto& [name, flags] : models) {
    SCOPED_TRACE(name);
    const Loaded m(session_model(name, flags, name == "chat_session_granite" ? granite_template() : ""));
    ASSERT_TRUE(m.chat.error.empty()) << m.chat.error;
    server::ChatSession warm(*m.model, m.tokenizer, m.chat, ComputeContext{1}, sampled_options());
    std::string streamed;
    const server::ChatTurn first = warm.reply("Hello there.", [&](std::string_view t) { streamed += t; });
    EXPECT_EQ(streamed, first.reply);
    EXPECT_EQ(first.completion_tokens, 9);
    EXPECT_EQ(first.cached_tokens, 0);
    const std::vector<ChatMessage> before = warm.messages();
    ASSERT_EQ(before.size(), 3u);  // system, user, assistant
    EXPECT_EQ(before[2].role, "assistant");
    EXPECT_EQ(before[2].content, first.reply);
    const server::ChatTurn second = warm.reply("And then?", nullptr);
    // The second render starts with the first prompt, whose end state the cache holds.
    EXPECT_GE(second.cached_tokens, first.prompt_tokens);
    EXPECT_LT(second.cached_tokens, second.prompt_tokens);

    // A fresh session (its own empty cache, two threads) given the conversation up to the second
    // message answers the same tokens, prefilling everything.
    server::ChatSession cold(*m.model, m.tokenizer, m.chat, ComputeContext{2}, sampled_options());
    cold.add_message(before[1]);  // the user's, then the assistant's (cold has the system message)
    cold.add_message(before[2]);
    const server::ChatTurn again = cold.reply("And then?", nullptr);
    EXPECT_EQ(again.cached_tokens, 0);
    EXPECT_EQ(again.prompt_tokens, second.prompt_tokens);
    EXPECT_EQ(again.tokens, second.tokens);
    EXPECT_EQ(again.reply, second.reply);
    EXPECT_EQ(cold.messages(), warm.messages());
  }
}

TEST(ChatSession, AnInterruptedReplyKeepsWhatWasShown) {
  const Loaded m(small_granite("chat_session_interrupt", granite_template()));
  server::ChatSessionOptions options = sampled_options();
  options.max_tokens = 50;
  server::ChatSession session(*m.model, m.tokenizer, m.chat, ComputeContext{1}, options);
  std::atomic<bool> interrupt{false};
  int pieces = 0;
  std::string shown;
  const server::ChatTurn turn = session.reply(
      "Tell me a long story.",
      [&](std::string_view text) {
        shown += text;
        if (++pieces == 3) interrupt.store(true);
      },
      &interrupt);
  EXPECT_EQ(turn.stop_reason, StopReason::Callback);
  EXPECT_LT(turn.completion_tokens, 50);
  EXPECT_EQ(turn.reply, shown);
  ASSERT_EQ(session.messages().size(), 3u);
  EXPECT_EQ(session.messages().back().content, shown);
  // The next turn resumes after the interrupted reply.
  const server::ChatTurn next = session.reply("Go on.", nullptr);
  EXPECT_GE(next.cached_tokens, turn.prompt_tokens);
}

TEST(ChatSession, ATurnThatCannotBeTakenLeavesTheConversationAsItWas) {
  const Loaded m(small_granite("chat_session_refused", granite_template()));
  server::ChatSessionOptions options = sampled_options();
  options.max_context = 200;
  server::ChatSession session(*m.model, m.tokenizer, m.chat, ComputeContext{1}, options);
  const std::vector<ChatMessage> before = session.messages();
  try {
    session.reply(std::string(2000, 'x'), nullptr);
    ADD_FAILURE() << "a prompt past the context was taken";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("context size"), std::string::npos) << e.what();
  }
  EXPECT_EQ(session.messages(), before);
  // A message that fits is still answered, its reply cut to the room left under the context.
  const server::ChatTurn turn = session.reply("Hi.", nullptr);
  EXPECT_LE(turn.prompt_tokens + turn.completion_tokens, 200);
  EXPECT_EQ(session.messages().size(), before.size() + 2);

  server::ServedChatTemplate broken = m.chat;
  broken.error = "unsupported tag 'foo' at line 1";
  EXPECT_THROW(server::ChatSession(*m.model, m.tokenizer, broken, ComputeContext{1}, options), Error);
  options.max_tokens = -1;
  EXPECT_THROW(server::ChatSession(*m.model, m.tokenizer, m.chat, ComputeContext{1}, options), Error);
}

// --chat-template-kwargs' object reaches the template as variables (as the server's
// chat_template_kwargs does); anything but a JSON object is refused when the session starts.
TEST(ChatSession, TemplateKeywordArgumentsReachTheTemplate) {
  const std::string chat_template =
      "{% if preamble %}{{ preamble }}\n{% endif %}{% for m in messages %}{{ m.role }}: {{ m.content }}\n"
      "{% endfor %}{% if add_generation_prompt %}assistant:{% endif %}";
  const Loaded m(small_granite("chat_session_kwargs", chat_template));
  server::ChatSessionOptions options = sampled_options();
  options.max_tokens = 1;
  const int64_t plain = server::ChatSession(*m.model, m.tokenizer, m.chat, ComputeContext{1}, options)
                            .reply("Hi.", nullptr)
                            .prompt_tokens;
  const std::string preamble = "A long preamble of several words.";
  options.template_kwargs = R"({"preamble": ")" + preamble + R"("})";
  const int64_t with_preamble = server::ChatSession(*m.model, m.tokenizer, m.chat, ComputeContext{1}, options)
                                    .reply("Hi.", nullptr)
                                    .prompt_tokens;
  EXPECT_GE(with_preamble, plain + static_cast<int64_t>(m.tokenizer.encode(preamble).size()));
  for (const std::string bad : {"[1, 2]", "not json"}) {
    options.template_kwargs = bad;
    EXPECT_THROW(server::ChatSession(*m.model, m.tokenizer, m.chat, ComputeContext{1}, options), Error)
        << bad;
  }
  // Keys the request itself sets are the server's refusal, at the turn; the conversation stays.
  options.template_kwargs = R"({"messages": []})";
  server::ChatSession session(*m.model, m.tokenizer, m.chat, ComputeContext{1}, options);
  EXPECT_THROW(session.reply("Hi.", nullptr), Error);
  EXPECT_EQ(session.messages().size(), 1u);  // the system message
}

}  // namespace
}  // namespace mb
