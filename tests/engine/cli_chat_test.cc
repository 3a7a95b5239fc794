// SPDX-License-Identifier: MIT
// `mambacpp chat` as a user meets it: slash commands (an unknown one is refused with the list,
// not sent to the model), line editing on a terminal (libedit, driven through tmux), and Ctrl-C
// during a long prompt's prefill (the chat goes on without that message).
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <thread>

#include "cli_test_support.h"
#include "common/test_util.h"

namespace mb {
namespace {

using test::run_cli;

const std::string& chat_cli_model() {
  static const std::string dir = [] {
    const std::string d = test::make_temp_dir("cli_chat_model") + "/model";
    const test::CliOutput made =
        run_cli("make-model --out " + d + " --d-model 32 --n-layer 2 --vocab 301 --seed 3");
    EXPECT_EQ(made.status, 0) << made.err;
    return d;
  }();
  return dir;
}

size_t count_of(const std::string& text, const std::string& what) {
  size_t count = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++count;
  return count;
}

TEST(CliChat, UnknownSlashCommandsAreRefusedWithTheList) {
  const std::string chat = "chat -m " + chat_cli_model() + " -n 2 --seed 1 --stats -t 1";
  const test::CliOutput out =
      run_cli(chat, "printf '/foo bar\\n/help\\n/usr/bin is a folder\\n//foo\\n/exit\\n' | ");
  ASSERT_EQ(out.status, 0) << out.err;
  EXPECT_NE(out.err.find("unknown command '/foo' (not sent to the model)"), std::string::npos) << out.err;
  // The refusal and /help both list the commands.
  EXPECT_EQ(count_of(out.err, "/clear         start the conversation over"), 2u) << out.err;
  // A path is text, and "//foo" sends "/foo": two turns, the refused command none.
  EXPECT_EQ(count_of(out.err, "[turn "), 2u) << out.err;
}

// Runs `script` (bash) with a time limit; true when it exits 0.
bool run_script(const std::string& dir, const std::string& script) {
  std::ofstream(dir + "/script.sh") << script;
  return std::system(("timeout 120 bash " + dir + "/script.sh").c_str()) == 0;
}

#ifdef MB_TEST_CLI_LIBEDIT
// On a terminal the line is edited as in a shell: the left arrow moves into the line, Ctrl-A
// goes to its start, and the up arrow brings back the last line. The chat's refusal of an unknown
// command echoes the line it got, which shows what the editing made of the keys.
TEST(CliChat, LinesAreEditedOnATerminal) {
  if (std::system("command -v tmux >/dev/null 2>&1") != 0)
    GTEST_SKIP() << "tmux is not installed (Debian: tmux); the terminal test needs it";
  const std::string dir = test::make_temp_dir("cli_chat_tmux");
  const std::string socket = dir + "/tmux.sock";
  const std::string script =
      "set -e\n"
      "tmux -S " +
      socket + " new-session -d -s chat -x 160 -y 50 '" + std::string(MB_CLI_PATH) + " chat -m " +
      chat_cli_model() +
      " -n 2 -t 1 2>&1; sleep 60'\n"
      "wait_for() { for i in $(seq 200); do tmux -S " +
      socket + " capture-pane -p -t chat -S -100 > " + dir + "/pane.txt; grep -qF -- \"$1\" " + dir +
      "/pane.txt && [ $(grep -cF -- \"$1\" " + dir +
      "/pane.txt) -ge $2 ] && return 0; sleep 0.1; done; return 1; }\n"
      "wait_for 'Ctrl-C stops a reply' 1\n"
      "tmux -S " +
      socket +
      " send-keys -t chat '/fo' Left x Enter\n"
      "wait_for \"unknown command '/fxo'\" 1\n"
      "tmux -S " +
      socket +
      " send-keys -t chat 'oo' C-a '/f' Enter\n"
      "wait_for \"unknown command '/foo'\" 1\n"
      "tmux -S " +
      socket +
      " send-keys -t chat Up Enter\n"
      "wait_for \"unknown command '/foo'\" 2\n"
      "tmux -S " +
      socket +
      " send-keys -t chat '/exit' Enter\n"
      "tmux -S " +
      socket + " kill-server || true\n";
  const bool ok = run_script(dir, script);
  std::system(("tmux -S " + socket + " kill-server >/dev/null 2>&1").c_str());
  EXPECT_TRUE(ok) << read_text_file(dir + "/pane.txt");
}
#endif

// Ctrl-C (SIGINT) while a long message is being prefilled stops the prefill within one step, and
// the chat goes on without that message: the next turn's prompt is what it is without it.
TEST(CliChat, CtrlCStopsALongPrefillAndTheConversationGoesOn) {
  const std::string dir = test::make_temp_dir("cli_chat_sigint");
  // Wide enough that the long message below takes minutes to prefill, while one step of the
  // scheduler's 512 positions takes a fraction of a second.
  const std::string model = dir + "/model";
  ASSERT_EQ(run_cli("make-model --out " + model + " --d-model 256 --n-layer 8 --vocab 301 --seed 3").status,
            0);
  const std::string flags = " -n 3 --seed 1 --stats --ignore-eos -t 1";
  const std::string chat = std::string(MB_CLI_PATH) + " chat -m " + model + flags;
  // 460,000 characters of words: 200,000 tokens.
  const std::string script =
      "set -e\ncd " + dir +
      "\n"
      "mkfifo in\n" +
      chat +
      " < in > out.txt 2> err.txt &\n"
      "pid=$!\n"
      "exec 3> in\n"
      "echo hi >&3\n"
      "for i in $(seq 300); do grep -q '\\[turn 1' err.txt && break; sleep 0.1; done\n"
      "{ yes 'the cat sat on the mat' | head -n 20000 | tr '\\n' ' '; echo; } >&3\n"
      "sleep 1\n"
      "kill -INT $pid\n"
      "for i in $(seq 300); do grep -q 'stopped before the reply' err.txt && break; sleep 0.1; done\n"
      "echo hello >&3\n"
      "echo /exit >&3\n"
      "exec 3>&-\n"
      "wait $pid\n";
  const auto start = std::chrono::steady_clock::now();
  ASSERT_TRUE(run_script(dir, script)) << read_text_file(dir + "/err.txt");
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const std::string err = read_text_file(dir + "/err.txt");
  EXPECT_NE(err.find("[stopped before the reply began: the message was not added to the conversation]"),
            std::string::npos)
      << err;
  EXPECT_LT(seconds, 60) << err;
  // The same chat without the long message: the same second turn, prompt and reply alike.
  const test::CliOutput without = run_cli("chat -m " + model + flags, "printf 'hi\\nhello\\n' | ");
  ASSERT_EQ(without.status, 0) << without.err;
  const std::string turn2 = "[turn 2: prompt ";
  ASSERT_NE(err.find(turn2), std::string::npos) << err;
  const auto prompt_of = [&](const std::string& text) {
    const size_t at = text.find(turn2) + turn2.size();
    return text.substr(at, text.find(' ', at) - at);
  };
  EXPECT_EQ(prompt_of(err), prompt_of(without.err));
  EXPECT_EQ(read_text_file(dir + "/out.txt"), without.out);
}

}  // namespace
}  // namespace mb
