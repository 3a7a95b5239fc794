#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The chat page at GET / in a real browser (headless Chromium over the DevTools protocol): a
message typed and sent gets the reply the API gives for the same settings, a second turn sends the
whole conversation and shows cached prompt tokens, a refused request shows the server's message,
a long reply appears in several updates as it streams, Stop ends it and the server cancels it, and
on a server with --api-key the page asks for the key and then works. Conversations are kept in the
browser's storage: they survive a reload, can be switched and deleted, a reply can be regenerated
and a user message edited (each sends the conversation up to the right message), and a message can
be copied. Run by ctest (server_chat_browser_test); exits 77 (a skip) when no Chromium is
installed, non-zero on the first failure."""

import json
import os
import re
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from browser_util import Browser, check, find_chromium, js  # noqa: E402
from serve_util import Server, make_model  # noqa: E402

SKIP = 77
KEY = "page-test-key"


# The shown conversation as the page stored it, and its last message's text (the reply as the
# model wrote it: what the log shows is its markdown rendered).
CONVERSATION = """(() => { const data = JSON.parse(localStorage.getItem('mambacpp-conversations'));
    return data.conversations.find((c) => c.id === data.current); })()"""
LAST_REPLY = f"{CONVERSATION}.messages.at(-1).content"
LAST_BUBBLE = "[...document.querySelectorAll('#log .assistant')].pop()"
USAGE = "({...document.getElementById('usage').dataset, text: document.getElementById('usage').textContent})"
DONE = "document.getElementById('usage').dataset.completionTokens !== undefined && !document.getElementById('send').disabled"


def set_settings(browser, **settings):
    for name, value in settings.items():
        browser.evaluate(f"document.getElementById({js(name)}).value = {js(str(value))}")


def send_message(browser, text, by_enter=False):
    """Types text into the message box and sends it with the Send button or the Enter key."""
    browser.evaluate("document.getElementById('input').focus()")
    browser.type_text(text)
    if by_enter:
        browser.press_enter()
    else:
        browser.evaluate("document.getElementById('send').click()")


def watch_reply_lengths(browser):
    """Records the length of the last reply's text at every update the page makes to it."""
    browser.evaluate("""window.replyLengths = [];
        new MutationObserver(() => {
          const reply = [...document.querySelectorAll('#log .assistant')].pop();
          if (reply && reply.dataset.length) window.replyLengths.push(Number(reply.dataset.length));
        }).observe(document.getElementById('log'), {subtree: true, childList: true, attributes: true,
                                                     attributeFilter: ['data-length']});""")


def api_reply(server, messages, settings, headers=None):
    body = {"messages": messages, **settings}
    status, _, data = server.request("POST", "/v1/chat/completions", body, headers=headers)
    check(status == 200, f"the API refused {body}: {status} {data[:300]!r}")
    return json.loads(data)


def metric(server, name, headers=None):
    status, _, data = server.request("GET", "/metrics", headers=headers)
    check(status == 200, f"/metrics: {status}")
    return int(float(re.search(rf"^{name} (\S+)$", data.decode(), re.M).group(1)))


def test_chat(server, browser):
    browser.open(f"http://127.0.0.1:{server.port}/")
    model_id = json.loads(server.request("GET", "/v1/models")[2])["data"][0]["id"]
    browser.wait_for(f"document.getElementById('model').textContent === {js(model_id)}", "the model's name")

    # Turn 1: seeded sampling, so the API must give the same reply for the same request.
    settings = {"seed": 7, "temperature": 1.5, "max_tokens": 64}
    set_settings(browser, **settings)
    send_message(browser, "Hello there")
    browser.wait_for(DONE, "the first reply to end")
    reply1 = browser.evaluate(LAST_REPLY)
    expected = api_reply(server, [{"role": "user", "content": "Hello there"}], settings)
    check(reply1 == expected["choices"][0]["message"]["content"],
          f"the page shows {reply1!r}, the API gives {expected['choices'][0]['message']['content']!r}")
    check(reply1, "the first reply is empty")
    usage = browser.evaluate(USAGE)
    check(int(usage["completionTokens"]) == expected["usage"]["completion_tokens"], f"usage {usage}")
    check(int(usage["promptTokens"]) == expected["usage"]["prompt_tokens"], f"usage {usage}")
    check("tokens/s" in usage["text"], f"the usage line has no speed: {usage['text']!r}")

    # Turn 2, sent with Enter: the page sends the whole conversation, which resumes from the
    # state the server cached after turn 1.
    send_message(browser, "Tell me more", by_enter=True)
    browser.wait_for(DONE, "the second reply to end")
    usage = browser.evaluate(USAGE)
    check(int(usage["cachedTokens"]) > 0, f"the second turn reports no cached tokens: {usage}")
    print("second turn:", usage["text"])
    check(f"({usage['cachedTokens']} cached)" in usage["text"], f"the usage line does not show them: {usage}")
    conversation = [{"role": "user", "content": "Hello there"}, {"role": "assistant", "content": reply1},
                    {"role": "user", "content": "Tell me more"}]
    expected = api_reply(server, conversation, settings)
    check(browser.evaluate(LAST_REPLY) == expected["choices"][0]["message"]["content"],
          "the second reply differs from the API's for the same conversation")
    check(int(usage["promptTokens"]) == expected["usage"]["prompt_tokens"], f"usage {usage} vs {expected['usage']}")
    check(browser.evaluate("document.querySelectorAll('#log .msg').length") == 4, "the log should hold 4 messages")

    # A request the server refuses shows its message, and the turn is taken back into the box.
    set_settings(browser, temperature=-1)
    send_message(browser, "Refused")
    error = browser.wait_for("!document.getElementById('error').hidden && document.getElementById('error').textContent",
                             "the refusal's message")
    check("temperature" in error, f"the error shown: {error!r}")
    check(browser.evaluate("document.querySelectorAll('#log .msg').length") == 4, "the refused turn stayed in the log")
    check(browser.evaluate("document.getElementById('input').value") == "Refused", "the refused text was lost")
    browser.evaluate("document.getElementById('input').value = ''")

    # New chat clears the conversation. A long reply (greedy decoding of this model repeats one
    # token and never ends) shows its text in several updates, as its tokens arrive; Stop ends it
    # and the server cancels it.
    browser.evaluate("document.getElementById('new-chat').click()")
    check(browser.evaluate("document.querySelectorAll('#log .msg').length") == 0, "New chat left messages")
    disconnects = metric(server, "mambacpp_http_client_disconnects_total")
    set_settings(browser, temperature=0, max_tokens=200000)
    watch_reply_lengths(browser)
    send_message(browser, "Go on forever")
    lengths = browser.wait_for("new Set(window.replyLengths.filter((n) => n > 0)).size >= 3 && window.replyLengths",
                               "the long reply to show its text in three updates")
    check(lengths == sorted(lengths), f"the reply shrank as it streamed: {lengths}")
    print("long reply's lengths as it streamed:", lengths[:8])
    browser.evaluate("document.getElementById('stop').click()")
    browser.wait_for("!document.getElementById('send').disabled", "Stop to end the reply", timeout=10)
    check(browser.evaluate(f"{LAST_BUBBLE}.classList.contains('stopped')"), "the stopped reply is not marked")
    check(browser.evaluate("document.getElementById('usage').textContent").startswith("stopped"), "no 'stopped'")
    for _ in range(250):  # the server notices the closed connection at its next write
        if metric(server, "mambacpp_http_client_disconnects_total") > disconnects:
            break
        browser.evaluate("new Promise((done) => setTimeout(done, 20))")
    check(metric(server, "mambacpp_http_client_disconnects_total") > disconnects, "the server did not cancel")

    # New chat in the middle of a reply abandons it, and the next message goes out at once.
    send_message(browser, "Another long one")
    browser.wait_for(f"{LAST_BUBBLE} && {LAST_BUBBLE}.dataset.length > 0", "the second long reply to start")
    browser.evaluate("document.getElementById('new-chat').click()")
    set_settings(browser, max_tokens=8)
    send_message(browser, "Short")
    browser.wait_for(DONE, "the reply after New chat")
    check(browser.evaluate("document.querySelectorAll('#log .msg').length") == 2, "New chat kept the old reply")
    check(browser.evaluate(USAGE)["completionTokens"] == "8", "the reply after New chat")
    check(not browser.problems, f"the page reported problems: {browser.problems}")


def record_requests(browser):
    """From now on, the body of every chat request the page sends goes to window.sentBodies too."""
    browser.evaluate("""window.sentBodies = [];
        const realFetch = window.fetch;
        window.fetch = (url, init) => {
          if (String(url).endsWith('/v1/chat/completions')) window.sentBodies.push(JSON.parse(init.body));
          return realFetch(url, init);
        };""")


def click(browser, selector, index=-1):
    """Clicks the index-th element (from the end when negative) the selector matches."""
    browser.evaluate(f"[...document.querySelectorAll({js(selector)})].at({index}).click()")


def messages_shown(browser):
    return browser.evaluate("[...document.querySelectorAll('#log .msg')].length")


def test_conversations(server, browser):
    browser.open(f"http://127.0.0.1:{server.port}/")
    browser.evaluate("localStorage.clear()")
    browser.reload()
    settings = {"seed": 5, "temperature": 1.2, "max_tokens": 12}
    set_settings(browser, **settings)

    # Two conversations, the first of two turns.
    send_message(browser, "First question")
    browser.wait_for(DONE, "the first reply")
    send_message(browser, "Follow-up")
    browser.wait_for(DONE + " && document.querySelectorAll('#log .msg').length === 4", "the follow-up's reply")
    first = browser.evaluate(CONVERSATION)
    browser.evaluate("document.getElementById('new-chat').click()")
    send_message(browser, "Second question")
    browser.wait_for(DONE, "the second conversation's reply")
    second = browser.evaluate(CONVERSATION)
    check(first["id"] != second["id"] and second["title"] == "Second question", f"the conversations {first} {second}")

    # They survive a reload: the list (newest first), the one shown and its messages.
    browser.reload()
    titles = browser.evaluate("[...document.querySelectorAll('#conversations .open')].map((b) => b.textContent)")
    check(titles == ["Second question", "First question"], f"the list after a reload: {titles}")
    check(browser.evaluate(CONVERSATION) == second, "the shown conversation changed across the reload")
    check(messages_shown(browser) == 2, "the reloaded log")
    check(browser.evaluate("document.querySelector('#log .user .body').textContent") == "Second question", "log")

    set_settings(browser, **settings)  # the settings are not kept across a reload

    # Switching shows the other conversation.
    click(browser, "#conversations .open", 1)
    check(browser.evaluate(CONVERSATION)["id"] == first["id"] and messages_shown(browser) == 4, "the switch")
    check(browser.evaluate("document.querySelector('#conversations li.current .open').textContent") == "First question",
          "the list does not mark the shown conversation")

    # Copy gives the message as the model wrote it.
    browser.evaluate("navigator.clipboard.writeText = async (text) => { window.copied = text; }")
    click(browser, "#log .assistant .copy")
    check(browser.wait_for("window.copied", "the copy") == first["messages"][3]["content"], "copied text")

    # Regenerate sends the conversation up to the last user message and replaces the last reply
    # (the same seed gives the same reply).
    record_requests(browser)
    click(browser, "#log .regenerate")
    browser.wait_for(DONE + " && window.sentBodies.length === 1", "the regenerated reply")
    check(browser.evaluate("window.sentBodies[0].messages") == first["messages"][:3],
          f"regenerate sent {browser.evaluate('window.sentBodies[0].messages')}")
    regenerated = browser.evaluate(CONVERSATION)["messages"]
    check(regenerated == first["messages"], f"the regenerated conversation: {regenerated} vs {first['messages']}")
    check(messages_shown(browser) == 4, "regenerate added messages")

    # Editing the first message continues the conversation from it: the later turns are dropped.
    click(browser, "#log .user .edit", 0)
    check(browser.evaluate("document.querySelector('#log .editor textarea').value") == "First question", "editor")
    browser.evaluate("document.querySelector('#log .editor textarea').value = 'Edited question'")
    browser.evaluate("document.querySelector('#log .editor .save').click()")
    browser.wait_for(DONE + " && window.sentBodies.length === 2", "the reply to the edited message")
    check(browser.evaluate("window.sentBodies[1].messages") == [{"role": "user", "content": "Edited question"}],
          f"the edit sent {browser.evaluate('window.sentBodies[1].messages')}")
    edited = browser.evaluate(CONVERSATION)["messages"]
    expected = api_reply(server, [{"role": "user", "content": "Edited question"}], settings)
    check(edited == [{"role": "user", "content": "Edited question"},
                     {"role": "assistant", "content": expected["choices"][0]["message"]["content"]}],
          f"the edited conversation: {edited}")
    check(messages_shown(browser) == 2, "the edit left the later turns in the log")
    check(browser.evaluate("document.querySelector('#conversations li.current .open').textContent") == "Edited question",
          "the edited conversation's title")

    # Delete: the other conversation goes from the list; deleting the shown one empties the log.
    click(browser, "#conversations li:not(.current) .delete")
    check(browser.evaluate("document.querySelectorAll('#conversations li').length") == 1, "delete")
    check(messages_shown(browser) == 2, "deleting another conversation changed the log")
    click(browser, "#conversations li.current .delete")
    check(browser.evaluate("document.querySelectorAll('#conversations li').length") == 0, "delete the shown one")
    check(messages_shown(browser) == 0, "the deleted conversation is still shown")
    browser.reload()
    check(browser.evaluate("document.querySelectorAll('#conversations li').length") == 0, "deleted, then reloaded")
    check(not browser.problems, f"the page reported problems: {browser.problems}")


def test_api_key(server, browser):
    auth = {"Authorization": "Bearer " + KEY}
    browser.open(f"http://127.0.0.1:{server.port}/")
    browser.wait_for("!document.getElementById('key-form').hidden", "the page to ask for the API key")
    browser.wait_for("!document.getElementById('error').hidden", "the 401's message")

    # A wrong key is refused and asked for again; the right one loads the model's name.
    unauthorized = metric(server, "mambacpp_http_unauthorized_total", auth)
    browser.evaluate("document.getElementById('api-key').focus()")
    browser.type_text("wrong-key")
    browser.evaluate("document.getElementById('api-key-save').click()")
    browser.wait_for("!document.getElementById('key-form').hidden", "the key to be asked for again")
    model_id = json.loads(server.request("GET", "/v1/models", headers=auth)[2])["data"][0]["id"]
    check(metric(server, "mambacpp_http_unauthorized_total", auth) > unauthorized, "the wrong key was not sent")
    browser.evaluate("document.getElementById('api-key').focus()")
    browser.type_text(KEY)
    browser.evaluate("document.getElementById('api-key-save').click()")
    browser.wait_for(f"document.getElementById('model').textContent === {js(model_id)}", "the model's name")
    check(browser.evaluate("document.getElementById('key-form').hidden"), "the key form is still shown")
    check(browser.evaluate("sessionStorage.getItem('mambacpp-api-key')") == KEY, "the key is not kept for the tab")

    set_settings(browser, seed=11, max_tokens=24)
    send_message(browser, "Hello")
    browser.wait_for(DONE, "the reply with the key")
    check(browser.evaluate(LAST_REPLY), "no reply with the key")

    # A key that stops working (here: forgotten) is asked for when a message gets a 401, and the
    # message is sent again once it is entered.
    browser.evaluate("sessionStorage.clear()")
    send_message(browser, "Again")
    browser.wait_for("!document.getElementById('key-form').hidden", "the key to be asked for on a 401")
    check(browser.evaluate("document.querySelectorAll('#log .msg').length") == 2, "the refused turn stayed")
    browser.type_text(KEY)  # the key box has the focus
    browser.evaluate("document.getElementById('api-key-save').click()")
    browser.wait_for(DONE + " && document.querySelectorAll('#log .msg').length === 4", "the resent message's reply")
    check(int(browser.evaluate(USAGE)["cachedTokens"]) > 0, "the resent turn reports no cached tokens")
    check(not browser.problems, f"the page reported problems: {browser.problems}")


def main():
    chromium = find_chromium()
    if chromium is None:
        print("SKIP: no Chromium to drive the chat page (Debian: apt-get install chromium, or set MB_CHROMIUM)")
        return SKIP
    model = make_model(os.path.join(tempfile.mkdtemp(prefix="mambacpp_chat_page_"), "model"))
    with Browser(chromium) as browser:
        with Server(model) as server:
            test_chat(server, browser)
            test_conversations(server, browser)
        with Server(model, "--api-key", KEY) as server:
            test_api_key(server, browser)
    print("chat page browser test: OK")
    return 0


if __name__ == "__main__":
    sys.exit(main())
