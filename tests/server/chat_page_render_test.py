#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""How the chat page at GET / shows replies, in a real browser (headless Chromium over the DevTools
protocol): markdown renders (headings, lists, code blocks, inline code, tables, quotes, links that
open with rel=noopener), hostile strings in a reply (script, event handlers, javascript: and data:
URLs, frames, SVG, HTML in code) never run and never become elements or attributes, whether the
reply streams in or comes back from storage after a reload, reasoning (a <think> block, and the
server's delta.reasoning_content) shows in a block that is open while the model reasons and closes
when the answer starts, tool calls (delta.tool_calls) show as their names and arguments, stored
with the reply, and dark mode follows prefers-color-scheme and the toggle. The replies are
fed to the page by a stand-in for fetch, since the test model cannot be made to write them; the
page itself comes from a real server with its Content-Security-Policy. With MB_SCREENSHOTS=folder
the page is saved there as PNGs, light and dark. Run by ctest (server_chat_page_render_test);
exits 77 (a skip) when no Chromium is installed, non-zero on the first failure."""

import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from browser_util import Browser, check, find_chromium, js  # noqa: E402
from serve_util import Server, make_model  # noqa: E402

SKIP = 77
STORE = "mambacpp-conversations"


LINK = 'target="_blank" rel="noopener noreferrer"'
# Markdown and the HTML the page must make of it.
MARKDOWN_CASES = [
    ("# Title\n\nSome *em*, **strong**, ~~gone~~ and `a < b`.",
     "<h1>Title</h1><p>Some <em>em</em>, <strong>strong</strong>, <del>gone</del> and <code>a &lt; b</code>.</p>"),
    ("## Two\n### Three ###", "<h2>Two</h2><h3>Three</h3>"),
    ("- a\n- b\n  - c\n\n1. one\n2. two", "<ul><li>a</li><li>b<ul><li>c</li></ul></li></ul><ol><li>one</li><li>two</li></ol>"),
    ("3. three\n4. four", '<ol start="3"><li>three</li><li>four</li></ol>'),
    ("```python\nif a < b:\n    print('<b>')\n```\nafter",
     '<pre><code data-language="python">if a &lt; b:\n    print(\'&lt;b&gt;\')</code></pre><p>after</p>'),
    ("```\nstill streaming", "<pre><code>still streaming</code></pre>"),
    ("[site](https://example.com/a_b) and https://example.org/x.",
     f'<p><a href="https://example.com/a_b" {LINK}>site</a> and <a href="https://example.org/x" {LINK}>'
     "https://example.org/x</a>.</p>"),
    ("mail <mailto:a@example.com>", f'<p>mail <a href="mailto:a@example.com" {LINK}>mailto:a@example.com</a></p>'),
    ("![a cat](https://example.com/cat.png)", f'<p><a class="image-link" href="https://example.com/cat.png" {LINK}>'
     "a cat</a></p>"),
    ("> quoted\n> more\n\n---\nline one\nline two",
     "<blockquote><p>quoted<br>more</p></blockquote><hr><p>line one<br>line two</p>"),
    ("| a | b |\n|---|:-:|\n| 1 | `x\\|` |",
     '<div class="table-wrap"><table><thead><tr><th>a</th><th>b</th></tr></thead>'
     "<tbody><tr><td>1</td><td><code>x|</code></td></tr></tbody></table></div>"),
    ("snake_case_name, 2 * 3 * 4 and \\*not em\\*", "<p>snake_case_name, 2 * 3 * 4 and *not em*</p>"),
]

HOOK = "window.__pwned=1"
# Replies that would run HOOK if any markup in them became live.
HOSTILE = [
    f"<script>{HOOK}</script>",
    f'<img src=x onerror="{HOOK}">',
    f"<svg onload={HOOK}><circle r=1></svg>",
    f'<iframe src="javascript:{HOOK}"></iframe><iframe srcdoc="<script>{HOOK}</script>"></iframe>',
    f'<a href="javascript:{HOOK}">raw link</a> <object data="javascript:{HOOK}"></object>',
    f"[click me](javascript:{HOOK}) [upper](JAVASCRIPT:{HOOK}) [spaced]( javascript:{HOOK})",
    f"[data](data:text/html;base64,PHNjcmlwdD53aW5kb3cuX19wd25lZD0xPC9zY3JpcHQ+) ![pic](javascript:{HOOK})",
    f"![svg](data:image/svg+xml,<svg onload={HOOK}>) [<img src=x onerror={HOOK}>](https://example.com/)",
    f"```html\n<script>{HOOK}</script>\n<img src=x onerror={HOOK}>\n```\n`<svg onload={HOOK}>`",
    f"<think><img src=x onerror={HOOK}></think><details open ontoggle={HOOK}>x</details>",
    f'<style>body {{ display: none }}</style><base href="javascript:{HOOK}//"><form action="javascript:{HOOK}">'
    f'<button>go</button></form><meta http-equiv="refresh" content="0;url=javascript:{HOOK}">',
    f"**<img src=x onerror={HOOK}>** _<script>{HOOK}</script>_ <math><mtext><script>{HOOK}</script></mtext></math>",
]

# What any element in the log may be; anything else (img, svg, iframe, script, style...) is a bug.
CHECK_LOG = """(() => {
  const allowed = new Set(['DIV', 'P', 'BR', 'STRONG', 'EM', 'DEL', 'CODE', 'PRE', 'A', 'SPAN', 'UL', 'OL', 'LI',
    'H1', 'H2', 'H3', 'H4', 'H5', 'H6', 'BLOCKQUOTE', 'HR', 'TABLE', 'THEAD', 'TBODY', 'TR', 'TH', 'TD',
    'DETAILS', 'SUMMARY', 'BUTTON']);
  const problems = [];
  const root = window.__checkRoot || document.getElementById('log');
  for (const node of root.querySelectorAll('*')) {
    if (!allowed.has(node.tagName)) problems.push('element ' + node.tagName);
    for (const attribute of node.attributes)
      if (/^on/i.test(attribute.name) || /^(src|srcdoc|style|action|formaction)$/i.test(attribute.name))
        problems.push(node.tagName + ' ' + attribute.name);
    if (node.tagName === 'A' && !/^(https?|mailto):/.test(node.getAttribute('href')))
      problems.push('link to ' + node.getAttribute('href'));
    if (node.tagName === 'A' && node.rel !== 'noopener noreferrer') problems.push('link rel ' + node.rel);
  }
  if (window.__pwned !== undefined) problems.push('a script ran');
  return problems;
})()"""

# Replaces fetch of the chat endpoint, once, by a reply streamed from `events` (delta objects, or
# "wait": the stream pauses until window.releaseReply() is called).
FAKE_REPLY = """((events) => {
  const realFetch = window.fetch;
  let release;
  const gate = new Promise((resolve) => { release = resolve; });
  window.releaseReply = release;
  window.sentBodies = [];
  window.fetch = (url, init) => {
    if (!String(url).endsWith('/v1/chat/completions')) return realFetch(url, init);
    window.fetch = realFetch;
    window.sentBodies.push(JSON.parse(init.body));
    const encoder = new TextEncoder();
    const stream = new ReadableStream({ async start(controller) {
      for (const delta of events) {
        if (delta === 'wait') { await gate; continue; }
        const chunk = { choices: [{ index: 0, delta, finish_reason: null }] };
        controller.enqueue(encoder.encode('data: ' + JSON.stringify(chunk) + '\\n\\n'));
        await new Promise((done) => setTimeout(done, 5));
      }
      const usage = { prompt_tokens: 5, completion_tokens: events.length, total_tokens: 5 + events.length };
      controller.enqueue(encoder.encode('data: ' + JSON.stringify({ choices: [], usage }) + '\\n\\ndata: [DONE]\\n\\n'));
      controller.close();
    }});
    return Promise.resolve(new Response(stream, { headers: { 'Content-Type': 'text/event-stream' } }));
  };
})"""

DONE = "document.getElementById('usage').dataset.completionTokens !== undefined && !document.getElementById('send').disabled"
LAST = "[...document.querySelectorAll('#log .assistant')].pop()"


def fake_reply(browser, events):
    browser.evaluate(f"{FAKE_REPLY}({js(events)})")


def send(browser, text):
    browser.evaluate(f"document.getElementById('input').value = {js(text)}; document.getElementById('send').click()")


def test_markdown(browser):
    for text, expected in MARKDOWN_CASES:
        html = browser.evaluate(f"(() => {{ const d = document.createElement('div'); markdown.render({js(text)}, d); "
                                "return d.innerHTML; })()")
        check(html == expected, f"markdown {text!r}\n  renders {html!r}\n  expected {expected!r}")

    # A reply streamed in renders the same way, as it arrives, into the log.
    text = "\n\n".join(case[0] for case in MARKDOWN_CASES[:6])
    fake_reply(browser, [{"content": text[i:i + 7]} for i in range(0, len(text), 7)])
    send(browser, "markdown please")
    browser.wait_for(DONE, "the markdown reply")
    counts = browser.evaluate(f"['h1', 'h2', 'ul', 'ol', 'pre', 'code'].map((t) => {LAST}.querySelectorAll('.body ' + t).length)")
    check(counts[:5] == [1, 1, 2, 1, 2] and counts[5] >= 3, f"elements in the streamed reply: {counts}")
    # A code block's own copy button copies its code.
    browser.evaluate("navigator.clipboard.writeText = async (text) => { window.copied = text; }")
    browser.evaluate(f"{LAST}.querySelector('.code-block .copy-code').click()")
    check(browser.wait_for("window.copied", "the code's copy") == "if a < b:\n    print('<b>')", "the copied code")


def test_hostile(browser):
    # The checks themselves find what they look for: elements a sanitizer should have removed are
    # reported, and an event handler that would run is blocked by the page's CSP, which the browser
    # reports as a security problem.
    browser.evaluate("""(() => { window.__checkRoot = document.createElement('div');
        const img = document.createElement('img'); img.setAttribute('onerror', 'window.__pwned = 1');
        img.setAttribute('src', 'x'); window.__checkRoot.append(img);
        const a = document.createElement('a'); a.setAttribute('href', 'javascript:x'); window.__checkRoot.append(a);
        })()""")
    problems = browser.evaluate(CHECK_LOG)
    browser.evaluate("delete window.__checkRoot")
    check(len(problems) >= 3, f"the log check misses planted elements: {problems}")
    blocked = lambda: [p for p in browser.problems if "inline event handler" in p]  # noqa: E731
    for _ in range(250):
        if blocked():
            break
        browser.evaluate("new Promise((done) => setTimeout(done, 20))")
    check(blocked(), f"the planted event handler was not reported: {browser.problems}")
    browser.evaluate("new Promise((done) => setTimeout(done, 200))")  # the image's report too
    browser.problems.clear()

    # Each hostile string arrives as a streamed reply (split mid-tag), and as reasoning_content.
    for text in HOSTILE:
        pieces = [{"content": text[i:i + 5]} for i in range(0, len(text), 5)]
        fake_reply(browser, [{"reasoning_content": text}] + pieces)
        send(browser, "be hostile")
        browser.wait_for(DONE, "the hostile reply")
        problems = browser.evaluate(CHECK_LOG)
        check(not problems, f"{text!r} got into the page: {problems}")
    # Raw HTML is shown as the text it is.
    shown = browser.evaluate("document.getElementById('log').textContent")
    for fragment in ("<script>window.__pwned=1</script>", '<img src=x onerror="window.__pwned=1">',
                     "<svg onload=window.__pwned=1>", "<iframe src="):
        check(fragment in shown, f"{fragment!r} is not shown as text")
    check(browser.evaluate("[...document.querySelectorAll('#log a')].map((a) => a.href).join(' ')") ==
          "https://example.com/", "links made from the hostile replies")

    # The same conversation, from storage after a reload.
    browser.reload()
    browser.wait_for(f"document.querySelectorAll('#log .msg').length === {2 * len(HOSTILE)}", "the stored conversation")
    problems = browser.evaluate(CHECK_LOG)
    check(not problems, f"the stored hostile replies got into the page: {problems}")
    # A stored conversation that is not what the page wrote (a hand edit) is dropped, not trusted.
    browser.evaluate(f"""localStorage.setItem({js(STORE)}, JSON.stringify({{current: 'x', conversations: [
        {{id: 'x', title: '<img src=x onerror={HOOK}>', messages: [{{role: 'assistant', content: 7}}]}},
        {{id: 'y', title: '<img src=x onerror={HOOK}>', messages: [{{role: 'user', content: '<b>hi</b>'}}]}}]}}))""")
    browser.reload()
    check(browser.evaluate("document.querySelectorAll('#conversations li').length") == 1, "the bad conversation")
    check(browser.evaluate("document.querySelector('#conversations .open').textContent").startswith("<img"), "title")
    check(not browser.evaluate("document.querySelector('#conversations img')"), "the title became markup")
    browser.evaluate(f"localStorage.setItem({js(STORE)}, '{{not json')")
    browser.reload()
    check(browser.evaluate("document.querySelectorAll('#conversations li').length") == 0, "unreadable storage")
    check(browser.evaluate("window.__pwned") is None, "a hostile string ran")


def test_reasoning(browser):
    browser.evaluate("document.getElementById('new-chat').click()")
    # The server's reasoning_content, then the answer: open while reasoning, closed after.
    fake_reply(browser, [{"reasoning_content": "Let me think"}, {"reasoning_content": " about it."}, "wait",
                         {"content": "The **answer**."}])
    send(browser, "think")
    browser.wait_for(f"{LAST} && {LAST}.querySelector('.thought').textContent === 'Let me think about it.'",
                     "the reasoning to stream")
    check(browser.evaluate(f"{LAST}.querySelector('.reasoning').open && !{LAST}.querySelector('.reasoning').hidden"),
          "the reasoning block is not open while the model reasons")
    browser.evaluate("window.releaseReply()")
    browser.wait_for(DONE, "the answer")
    check(browser.evaluate(f"{LAST}.querySelector('.body').textContent") == "The answer.", "the answer")
    check(not browser.evaluate(f"{LAST}.querySelector('.reasoning').open"), "the reasoning did not collapse")
    browser.evaluate(f"{LAST}.querySelector('.reasoning summary').click()")
    check(browser.evaluate(f"{LAST}.querySelector('.reasoning').open"), "the reasoning does not open again")

    # A <think> block in the content; the whole content goes back to the server on the next turn.
    fake_reply(browser, [{"content": "<thi"}, {"content": "nk>Hmm, "}, {"content": "two steps."}, "wait",
                         {"content": "</think>\n\nDone: `ok`"}])
    send(browser, "think again")
    browser.wait_for(f"{LAST}.querySelector('.thought').textContent === 'Hmm, two steps.'", "the <think> block")
    check(browser.evaluate(f"{LAST}.querySelector('.reasoning').open"), "the <think> block is not open")
    check(browser.evaluate(f"{LAST}.querySelector('.body').textContent") == "", "reasoning shown as the answer")
    browser.evaluate("window.releaseReply()")
    browser.wait_for(DONE, "the answer after </think>")
    check(browser.evaluate(f"{LAST}.querySelector('.body').innerHTML") == "<p>Done: <code>ok</code></p>", "answer")
    check(not browser.evaluate(f"{LAST}.querySelector('.reasoning').open"), "the <think> block did not collapse")
    fake_reply(browser, [{"content": "fine"}])
    send(browser, "next")
    browser.wait_for(DONE, "the third reply")
    sent = browser.evaluate("window.sentBodies[0].messages")
    check(sent[1] == {"role": "assistant", "content": "The **answer**."} and
          sent[3] == {"role": "assistant", "content": "<think>Hmm, two steps.</think>\n\nDone: `ok`"},
          f"the conversation sent back: {sent}")
    # A reply that is only the start of "<think>" is shown as it is once it has ended.
    fake_reply(browser, [{"content": "<th"}])
    send(browser, "short")
    browser.wait_for(DONE, "the short reply")
    check(browser.evaluate(f"{LAST}.querySelector('.body').textContent") == "<th", "a reply of '<th'")
    check(browser.evaluate(f"{LAST}.querySelector('.reasoning').hidden"), "a reply of '<th' has reasoning")
    fake_reply(browser, [{"content": "fine"}])
    send(browser, "next")
    browser.wait_for(DONE, "the fourth reply")
    # A reply without a block has no reasoning shown; stored reasoning shows after a reload.
    check(browser.evaluate(f"{LAST}.querySelector('.reasoning').hidden"), "an empty reasoning block")
    browser.reload()
    browser.wait_for("document.querySelectorAll('#log .msg').length === 10", "the stored conversation")
    thoughts = browser.evaluate("[...document.querySelectorAll('#log .assistant .thought')].map((t) => t.textContent)")
    check(thoughts == ["Let me think about it.", "Hmm, two steps.", "", "", ""], f"the stored reasoning: {thoughts}")


def test_tool_calls(browser):
    browser.evaluate("document.getElementById('new-chat').click()")
    # Reasoning, a call streamed as OpenAI streams it (name first, then pieces of its arguments),
    # and a second call whose name and arguments are hostile text.
    fake_reply(browser, [
        {"reasoning_content": "Need the weather."},
        {"tool_calls": [{"index": 0, "id": "call_a", "type": "function",
                         "function": {"name": "get_weather", "arguments": ""}}]},
        {"tool_calls": [{"index": 0, "function": {"arguments": '{"city": '}}]},
        "wait",
        {"tool_calls": [{"index": 0, "function": {"arguments": '"Paris"}'}}]},
        {"tool_calls": [{"index": 1, "id": "call_b", "type": "function",
                         "function": {"name": f"<img src=x onerror={HOOK}>", "arguments": f"<script>{HOOK}</script>"}}]},
    ])
    send(browser, "weather?")
    browser.wait_for(f"{LAST} && {LAST}.querySelector('.tool-name') && "
                     f"{LAST}.querySelector('.tool-name').textContent === 'get_weather'", "the streamed call's name")
    browser.evaluate("window.releaseReply()")
    browser.wait_for(DONE, "the calls")
    names = browser.evaluate(f"[...{LAST}.querySelectorAll('.tool-call .tool-name')].map((n) => n.textContent)")
    check(names == ["get_weather", f"<img src=x onerror={HOOK}>"], f"the calls' names: {names}")
    args = browser.evaluate(f"[...{LAST}.querySelectorAll('.tool-call pre')].map((n) => n.textContent)")
    check(args == ['{\n  "city": "Paris"\n}', f"<script>{HOOK}</script>"], f"the calls' arguments: {args}")
    check(browser.evaluate(f"{LAST}.querySelector('.body').textContent") == "", "a call shown as text")
    check(browser.evaluate(f"{LAST}.querySelector('.thought').textContent") == "Need the weather.", "the reasoning")
    check(not browser.evaluate(f"{LAST}.querySelector('.reasoning').open"), "the reasoning did not collapse")
    problems = browser.evaluate(CHECK_LOG)
    check(not problems, f"hostile call text became markup: {problems}")
    # The calls are kept with the reply: they show again after a reload.
    browser.reload()
    browser.wait_for(f"{LAST} && {LAST}.querySelectorAll('.tool-call').length === 2", "the stored calls")
    check(browser.evaluate(f"{LAST}.querySelector('.tool-name').textContent") == "get_weather", "the stored call")
    check(browser.evaluate("window.__pwned") is None, "a hostile call ran")


def background(browser):
    return browser.evaluate("getComputedStyle(document.body).backgroundColor")


def test_dark_mode(browser, screenshots):
    light, dark = "rgb(245, 245, 247)", "rgb(23, 24, 27)"
    # The conversation with the most markdown in it, for the screenshots.
    browser.evaluate("[...document.querySelectorAll('#conversations .open')].pop().click()")
    check(browser.evaluate("document.querySelectorAll('#log pre').length") == 2, "the markdown conversation")
    browser.set_color_scheme("light")
    check(background(browser) == light, f"light background: {background(browser)}")
    if screenshots:
        browser.screenshot(os.path.join(screenshots, "chat_page_light.png"))
    browser.set_color_scheme("dark")
    check(background(browser) == dark, f"prefers-color-scheme: dark gives {background(browser)}")
    if screenshots:
        browser.screenshot(os.path.join(screenshots, "chat_page_dark.png"))
    # The toggle picks the other theme, which is kept across a reload; toggling back follows the system.
    browser.evaluate("document.getElementById('theme').click()")
    check(background(browser) == light, "the toggle did not switch to light")
    browser.reload()
    check(background(browser) == light, "the chosen theme is not kept")
    browser.evaluate("document.getElementById('theme').click()")
    check(background(browser) == dark, "toggling back")
    check(browser.evaluate("localStorage.getItem('mambacpp-theme')") is None, "toggling back should follow the system")
    browser.set_color_scheme("light")
    check(background(browser) == light, "the page no longer follows the system")
    browser.evaluate("document.getElementById('theme').click()")
    check(background(browser) == dark, "the toggle did not switch to dark")


def main():
    chromium = find_chromium()
    if chromium is None:
        print("SKIP: no Chromium to drive the chat page (Debian: apt-get install chromium, or set MB_CHROMIUM)")
        return SKIP
    screenshots = os.environ.get("MB_SCREENSHOTS")
    model = make_model(os.path.join(tempfile.mkdtemp(prefix="mambacpp_chat_render_"), "model"))
    with Browser(chromium) as browser, Server(model) as server:
        browser.open(f"http://127.0.0.1:{server.port}/")
        test_markdown(browser)
        test_reasoning(browser)
        test_tool_calls(browser)
        test_dark_mode(browser, screenshots)
        browser.evaluate("document.getElementById('new-chat').click()")
        test_hostile(browser)
        check(not browser.problems, f"the page reported problems: {browser.problems}")
    print("chat page render test: OK")
    return 0


if __name__ == "__main__":
    sys.exit(main())
