// SPDX-License-Identifier: MIT
// The chat session's interrupts and long conversations: an interrupt during the prompt's prefill
// leaves the conversation unchanged, an interrupted reply is cached as far as it went (the next
// turn resumes after it, as after a reply that ended there), and a conversation past the
// request's message cap drops its oldest turns and says so instead of failing every turn.
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

// A two-layer Mamba folder with `chat_template` (none: the plain format, cheap to render at
// length).
std::string turns_folder(const std::string& name, const std::string& chat_template) {
  const std::string dir = test::make_temp_dir(name) + "/model";
  const std::string make = std::string(MB_CLI_PATH) + " make-model --out " + dir +
                           " --d-model 32 --n-layer 2 --vocab 301 --seed 5 >/dev/null 2>&1";
  EXPECT_EQ(std::system(make.c_str()), 0) << make;
  if (!chat_template.empty())
    std::ofstream(dir + "/tokenizer_config.json") << nlohmann::json{{"chat_template", chat_template}}.dump();
  return dir;
}

struct TurnsModel {
  std::string dir;
  std::unique_ptr<Model> model;
  Tokenizer tokenizer;
  server::ServedChatTemplate chat;
  explicit TurnsModel(const std::string& name, const std::string& chat_template = "")
      : dir(turns_folder(name, chat_template)),
        model(Model::load(dir)),
        tokenizer(load_tokenizer(dir)),
        chat(server::load_served_chat_template(dir)) {}
};

server::ChatSessionOptions turns_options() {
  server::ChatSessionOptions o;
  o.system = "Be brief.";
  o.max_tokens = 12;
  o.stop_at_eos = false;
  o.sampling.temperature = 0.8f;
  o.sampling.seed = 7;
  return o;
}

TEST(ChatSessionTurns, AnInterruptBeforeTheFirstTokenLeavesTheConversationUnchanged) {
  const TurnsModel m("chat_turns_prefill");
  server::ChatSession session(*m.model, m.tokenizer, m.chat, ComputeContext{1}, turns_options());
  const std::vector<ChatMessage> before = session.messages();
  // Set before the turn starts, as a Ctrl-C during a long prompt's prefill is: the scheduler is
  // asked to cancel before its first step, so no position is prefilled and no token comes.
  std::atomic<bool> interrupt{true};
  std::string shown;
  const server::ChatTurn stopped = session.reply(
      std::string(4000, 'a'), [&](std::string_view text) { shown += text; }, &interrupt);
  EXPECT_FALSE(stopped.answered);
  EXPECT_EQ(stopped.stop_reason, StopReason::Callback);
  EXPECT_EQ(stopped.completion_tokens, 0);
  EXPECT_EQ(shown, "");
  EXPECT_EQ(session.messages(), before);
  // The chat goes on as if that message had never been sent.
  const server::ChatTurn next = session.reply("Hello.", nullptr);
  EXPECT_TRUE(next.answered);
  server::ChatSession fresh(*m.model, m.tokenizer, m.chat, ComputeContext{1}, turns_options());
  const server::ChatTurn expected = fresh.reply("Hello.", nullptr);
  EXPECT_EQ(next.tokens, expected.tokens);
  EXPECT_EQ(next.prompt_tokens, expected.prompt_tokens);
  EXPECT_EQ(session.messages(), fresh.messages());
}

// A template whose reply follows the generation prompt directly and is closed after its text, and
// the plain format, whose assistant line does the same ("assistant:" and the reply's text, with no
// space added): either way the next render holds the reply's text where the generated tokens
// were, and the next turn resumes after the whole interrupted reply.
TEST(ChatSessionTurns, AnInterruptedReplyIsCachedAsFarAsItWent) {
  for (const std::string chat_template :
       {"{% for m in messages %}<{{ m.role }}>{{ m.content }}</s>{% endfor %}"
        "{% if add_generation_prompt %}<assistant>{% endif %}",
        ""}) {
    SCOPED_TRACE(chat_template.empty() ? "the plain format" : chat_template);
    const TurnsModel m(chat_template.empty() ? "chat_turns_cached_plain" : "chat_turns_cached",
                       chat_template);
    server::ChatSessionOptions options = turns_options();
    options.max_tokens = 40;
    server::ChatSession interrupted(*m.model, m.tokenizer, m.chat, ComputeContext{1}, options);
    std::atomic<bool> interrupt{false};
    int pieces = 0;
    const server::ChatTurn cut = interrupted.reply(
        "Tell me a story.", [&](std::string_view) { interrupt.store(++pieces == 4); }, &interrupt);
    ASSERT_EQ(cut.stop_reason, StopReason::Callback);
    ASSERT_LT(cut.completion_tokens, 40);
    // The same reply ended there by max_tokens: the next turn resumes from the same point.
    options.max_tokens = static_cast<int>(cut.completion_tokens);
    server::ChatSession limited(*m.model, m.tokenizer, m.chat, ComputeContext{1}, options);
    const server::ChatTurn same = limited.reply("Tell me a story.", nullptr);
    ASSERT_EQ(same.tokens, cut.tokens);
    EXPECT_EQ(interrupted.messages(), limited.messages());
    const server::ChatTurn after_cut = interrupted.reply("Go on.", nullptr);
    const server::ChatTurn after_same = limited.reply("Go on.", nullptr);
    EXPECT_EQ(after_cut.prompt_tokens, after_same.prompt_tokens);
    EXPECT_EQ(after_cut.cached_tokens, after_same.cached_tokens);
    // The prompt and every generated token come from the cache: only the new message is prefilled.
    EXPECT_EQ(after_cut.cached_tokens, cut.prompt_tokens + cut.completion_tokens);
  }
}

TEST(ChatSessionTurns, AConversationPastTheMessageCapKeepsGoing) {
  const TurnsModel m("chat_turns_long");
  server::ChatSessionOptions options = turns_options();
  options.max_tokens = 1;
  // 2,100 turns, past the 4,096 messages a server request may carry.
  server::ChatSession session(*m.model, m.tokenizer, m.chat, ComputeContext{1}, options);
  for (int turn = 0; turn < 2100; ++turn) {
    session.add_message({"user", "q"});
    session.add_message({"assistant", "a"});
  }
  const server::ChatTurn long_turn = session.reply("Still there?", nullptr);
  EXPECT_TRUE(long_turn.answered);
  EXPECT_EQ(long_turn.dropped_messages, 0u);
  EXPECT_EQ(session.messages().size(), 1u + 2 * 2101);

  // At the cap the oldest turns go, whole, and the turn says how many.
  options.max_messages = 5;
  server::ChatSession capped(*m.model, m.tokenizer, m.chat, ComputeContext{1}, options);
  capped.reply("one", nullptr);
  EXPECT_EQ(capped.reply("two", nullptr).dropped_messages, 0u);
  const server::ChatTurn third = capped.reply("three", nullptr);
  EXPECT_EQ(third.dropped_messages, 2u);
  ASSERT_EQ(capped.messages().size(), 5u);
  EXPECT_EQ(capped.messages()[0].role, "system");
  EXPECT_EQ(capped.messages()[1].content, "two");
  EXPECT_EQ(capped.messages()[3].content, "three");
  options.max_messages = 2;
  EXPECT_THROW(server::ChatSession(*m.model, m.tokenizer, m.chat, ComputeContext{1}, options), Error);
}

// A conversation that outgrows -c drops its oldest turns to make room, rather than refuse every
// message from then on; a message too long even alone is still refused, the conversation kept.
TEST(ChatSessionTurns, AConversationPastTheContextDropsItsOldestTurns) {
  const TurnsModel m("chat_turns_context");
  server::ChatSessionOptions options = turns_options();
  options.max_context = 120;
  options.max_tokens = 20;
  server::ChatSession session(*m.model, m.tokenizer, m.chat, ComputeContext{1}, options);
  size_t dropped = 0;
  for (int turn = 0; turn < 12; ++turn) {
    const server::ChatTurn t = session.reply("Turn " + std::to_string(turn) + ", please.", nullptr);
    EXPECT_LE(t.prompt_tokens + t.completion_tokens, 120);
    dropped += t.dropped_messages;
    EXPECT_EQ(session.messages().size() + dropped, 1u + 2 * (turn + 1));
  }
  EXPECT_GT(dropped, 0u);
  EXPECT_EQ(session.messages().front().role, "system");
  EXPECT_EQ(session.messages()[session.messages().size() - 2].content, "Turn 11, please.");
  const std::vector<ChatMessage> before = session.messages();
  EXPECT_THROW(session.reply(std::string(2000, 'x'), nullptr), Error);
  EXPECT_EQ(session.messages(), before);
}

}  // namespace
}  // namespace mb
