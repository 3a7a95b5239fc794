// SPDX-License-Identifier: MIT
// A chat with the model `mambacpp serve` has loaded, over its own /v1/chat/completions stream.
// The whole conversation is sent with every turn, so the server's prefix cache resumes from the
// state it kept at the end of the previous reply. Conversations are kept in the browser's
// localStorage, so they survive a reload. Model output reaches the page only as text nodes
// (`markdown.render` builds its elements itself).
"use strict";

const $ = (id) => document.getElementById(id);
const keyName = "mambacpp-api-key";
const storeName = "mambacpp-conversations";
const themeName = "mambacpp-theme";
// The stored conversations ({id, title, updated, messages}) and the one shown (null: a new chat,
// stored once its first message is sent).
const store = { conversations: [], current: null };
// The request in flight, and what to run again once an API key is entered after a 401.
const chat = { controller: null, retry: null };

function element(tag, className, text) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined) node.textContent = text;
  return node;
}

function showError(text) {
  $("error").textContent = text;
  $("error").hidden = !text;
}

// A reply's tool calls as the server sent them ([{id, type, function: {name, arguments}}]),
// keeping only well-formed entries: they come from storage or the network, so nothing is assumed.
function validToolCalls(calls) {
  if (!Array.isArray(calls)) return [];
  return calls
    .filter((c) => c && c.function && typeof c.function.name === "string" && typeof c.function.arguments === "string")
    .map((c) => ({ id: String(c.id || ""), type: "function",
                   function: { name: c.function.name, arguments: c.function.arguments } }));
}

// The stored conversations. Anything malformed (a hand edit, another version) is dropped rather
// than trusted, so what storage holds can never break the page.
function loadStore() {
  let data = null;
  try {
    data = JSON.parse(localStorage.getItem(storeName) || "null");
  } catch (e) { /* unreadable: start afresh */ }
  const validMessage = (m) => m && (m.role === "user" || m.role === "assistant") && typeof m.content === "string";
  const list = data && Array.isArray(data.conversations) ? data.conversations : [];
  store.conversations = list
    .filter((c) => c && typeof c.id === "string" && Array.isArray(c.messages) && c.messages.every(validMessage))
    .map((c) => ({
      id: c.id, title: String(c.title || ""), updated: Number(c.updated) || 0,
      messages: c.messages.map((m) => {
        const message = { role: m.role, content: m.content };
        if (typeof m.reasoning_content === "string") message.reasoning_content = m.reasoning_content;
        const calls = validToolCalls(m.tool_calls);
        if (calls.length) message.tool_calls = calls;
        if (m.stopped === true) message.stopped = true;
        return message;
      }),
    }));
  store.current = data && store.conversations.some((c) => c.id === data.current) ? data.current : null;
}

function saveStore() {
  const data = { version: 1, current: store.current, conversations: store.conversations };
  try {
    localStorage.setItem(storeName, JSON.stringify(data));
  } catch (e) {
    showError("the conversations cannot be saved in the browser's storage (" + e.message +
              "): delete old ones to make room");
  }
}

const currentConversation = () => store.conversations.find((c) => c.id === store.current) || null;

function newConversation(text) {
  const id = Date.now().toString(36) + Math.random().toString(36).slice(2, 8);
  return { id, title: text.trim().replace(/\s+/g, " ").slice(0, 80), updated: Date.now(), messages: [] };
}

// The reply in progress, if any, is abandoned at once, so the next message can go out straight away.
function abandonReply() {
  if (chat.controller) chat.controller.abort();
  chat.controller = null;
  setBusy(false);
}

function renderList() {
  const items = [...store.conversations].sort((a, b) => b.updated - a.updated).map((c) => {
    const item = element("li", c.id === store.current ? "current" : "");
    item.dataset.id = c.id;
    const open = element("button", "open", c.title || "(untitled)");
    open.type = "button";
    open.title = c.title;
    open.addEventListener("click", () => switchTo(c.id));
    const remove = element("button", "delete", "\u00d7");
    remove.type = "button";
    remove.title = "Delete this conversation";
    remove.addEventListener("click", () => deleteConversation(c.id));
    item.append(open, remove);
    return item;
  });
  $("conversations").replaceChildren(...items);
}

// Shows conversation `id` (null: a new, empty one) in place of the current one.
function showConversation(id) {
  abandonReply();
  store.current = id;
  saveStore();
  renderList();
  renderLog();
  clearUsage("");
  showError("");
  document.body.classList.remove("show-list");
}

function switchTo(id) {
  if (id !== store.current) showConversation(id);
}

function deleteConversation(id) {
  if (id === store.current) {
    abandonReply();
    store.current = null;
    renderLog();
    clearUsage("");
  }
  store.conversations = store.conversations.filter((c) => c.id !== id);
  saveStore();
  renderList();
}

// An assistant message's answer and reasoning: the server's reasoning_content, then a
// <think>...</think> block at the start of the content, or everything before a lone </think>
// (templates such as Qwen3's open the block in the prompt). `thinking`: the block is still open.
// While a reply streams, a start that may yet become "<think>" is not shown as the answer.
function splitReasoning(content, reasoningContent, streaming) {
  let answer = content, thought = "", thinking = false;
  const open = /^\s*<think>/.exec(content);
  if (open) {
    const end = content.indexOf("</think>", open[0].length);
    thinking = end < 0;
    thought = content.slice(open[0].length, thinking ? undefined : end);
    answer = thinking ? "" : content.slice(end + 8);
  } else if (streaming && content.trim() && "<think>".startsWith(content.trim())) {
    answer = "";  // the start of a block still streaming
  } else {
    const end = content.indexOf("</think>");
    if (end >= 0 && !content.slice(0, end).includes("<think>")) {
      thought = content.slice(0, end);
      answer = content.slice(end + 8);
    }
  }
  thought = [reasoningContent || "", thought].map((s) => s.trim()).filter(Boolean).join("\n\n");
  return { thought, answer: answer.replace(/^\s+/, ""), thinking };
}

// A message's element: its reasoning (collapsible), its body and its action buttons.
function messageParts(role) {
  const root = element("div", "msg " + role);
  const reasoning = element("details", "reasoning");
  reasoning.hidden = true;
  const thought = element("div", "thought");
  reasoning.append(element("summary", "", "Reasoning"), thought);
  const body = element("div", "body");
  const calls = element("div", "tool-calls");
  calls.hidden = true;
  const actions = element("div", "actions");
  root.append(reasoning, body, calls, actions);
  return { root, reasoning, thought, body, calls, actions };
}

// A reply's tool calls, each as its function's name and its arguments (indented when they are
// JSON), built from text nodes like everything the model writes.
function showToolCalls(parts, calls) {
  parts.calls.replaceChildren();
  parts.calls.hidden = !calls || calls.length === 0;
  for (const call of calls || []) {
    const box = element("div", "tool-call");
    let args = call.function.arguments;
    try {
      args = JSON.stringify(JSON.parse(args), null, 2);
    } catch (e) { /* still streaming, or not JSON: shown as it is */ }
    const code = element("code", "", args);
    const pre = element("pre");
    pre.append(code);
    box.append(element("span", "tool-label", "Tool call"), element("span", "tool-name", call.function.name), pre);
    parts.calls.append(box);
  }
}

// Shows a message's text; returns the split of an assistant's content.
function showMessage(parts, role, content, reasoningContent, streaming, toolCalls) {
  if (role === "user") {
    parts.body.textContent = content;
    return null;
  }
  const split = splitReasoning(content, reasoningContent, streaming);
  parts.reasoning.hidden = !split.thought && !split.thinking;
  parts.thought.textContent = split.thought;
  markdown.render(split.answer, parts.body);
  showToolCalls(parts, toolCalls);
  return split;
}

function actionButton(parts, className, label, onClick) {
  const button = element("button", className, label);
  button.type = "button";
  button.addEventListener("click", onClick);
  parts.actions.append(button);
  return button;
}

// Copies text to the clipboard; a page served over plain HTTP from another host has no
// navigator.clipboard, so the older copy command is the fallback there.
async function copyText(text, button) {
  try {
    await navigator.clipboard.writeText(text);
  } catch (e) {
    const area = element("textarea");
    area.value = text;
    document.body.append(area);
    area.select();
    document.execCommand("copy");
    area.remove();
  }
  button.textContent = "Copied";
  setTimeout(() => { button.textContent = "Copy"; }, 1500);
}

function messageView(conversation, index) {
  const message = conversation.messages[index];
  const parts = messageParts(message.role);
  const split = showMessage(parts, message.role, message.content, message.reasoning_content, false,
                            message.tool_calls);
  if (message.stopped) parts.root.classList.add("stopped");
  // Each code block of a reply gets a bar with its language and a copy button of its own.
  for (const pre of parts.body.querySelectorAll("pre")) {
    const block = element("div", "code-block");
    const bar = element("div", "code-bar", pre.firstChild.dataset.language || "");
    const button = element("button", "copy-code", "Copy");
    button.type = "button";
    button.addEventListener("click", () => copyText(pre.textContent, button));
    bar.append(button);
    pre.replaceWith(block);
    block.append(bar, pre);
  }
  const copy = actionButton(parts, "copy", "Copy", () => copyText(split ? split.answer : message.content, copy));
  if (message.role === "user") {
    actionButton(parts, "edit", "Edit", () => startEdit(conversation, index, parts));
  } else if (index === conversation.messages.length - 1) {
    actionButton(parts, "regenerate", "Regenerate", () => regenerate(conversation));
  }
  return parts.root;
}

function renderLog() {
  const conversation = currentConversation();
  const views = conversation ? conversation.messages.map((_, i) => messageView(conversation, i)) : [];
  $("log").replaceChildren(...views);
  $("log").scrollTop = $("log").scrollHeight;
}

// Replaces a user message's text with a box to edit it in; sending it drops everything after the
// message and continues the conversation from the edited text.
function startEdit(conversation, index, parts) {
  if (chat.controller) return;
  const editor = element("div", "editor");
  const area = element("textarea");
  area.value = conversation.messages[index].content;
  const buttons = element("div");
  const save = element("button", "save", "Send");
  const cancel = element("button", "cancel", "Cancel");
  save.type = cancel.type = "button";
  buttons.append(save, cancel);
  editor.append(area, buttons);
  parts.body.replaceChildren(editor);
  parts.actions.hidden = true;
  area.focus();
  save.addEventListener("click", () => sendEdit(conversation, index, area.value));
  cancel.addEventListener("click", renderLog);
}

function sendEdit(conversation, index, text) {
  if (!text.trim()) return;
  turn(conversation, (messages) => {
    messages.splice(index);
    messages.push({ role: "user", content: text });
    if (index === 0) conversation.title = newConversation(text).title;
  }, () => sendEdit(conversation, index, text));
}

function regenerate(conversation) {
  turn(conversation, (messages) => {
    if (messages.length && messages[messages.length - 1].role === "assistant") messages.pop();
  }, () => regenerate(conversation));
}

function send() {
  const text = $("input").value;
  if (!text.trim() || chat.controller) return;
  $("input").value = "";
  const conversation = currentConversation() || newConversation(text);
  // A turn that produced no text is taken back whole, so it can be sent again as it was.
  turn(conversation, (messages) => messages.push({ role: "user", content: text }), send, () => {
    if (!$("input").value) $("input").value = text;
  });
}

function requestHeaders() {
  const headers = { "Content-Type": "application/json" };
  const key = sessionStorage.getItem(keyName);
  if (key) headers.Authorization = "Bearer " + key;
  return headers;
}

// The message of an OpenAI-shaped error body, else the HTTP status.
async function errorMessage(response) {
  try {
    const body = await response.json();
    if (body.error && body.error.message) return body.error.message;
  } catch (e) { /* not JSON: the status says enough */ }
  return "HTTP " + response.status + " " + response.statusText;
}

function askForKey(message) {
  showError(message);
  $("key-form").hidden = false;
  $("api-key").focus();
}

async function loadModel() {
  try {
    const response = await fetch("/v1/models", { headers: requestHeaders() });
    if (response.status === 401) return askForKey(await errorMessage(response));
    if (response.status === 503) {
      $("model").textContent = "the model is loading...";
      return setTimeout(loadModel, 1000);
    }
    if (!response.ok) return showError(await errorMessage(response));
    const body = await response.json();
    $("model").textContent = body.data && body.data[0] ? body.data[0].id : "";
  } catch (e) {
    $("model").textContent = "";
    showError("cannot reach the server: " + e.message);
  }
}

// Shows a streamed reply at most once a frame, however fast its tokens come, and keeps the log
// scrolled to its end unless the reader has scrolled up. Each frame renders the whole reply's
// markdown again, so a long reply is rendered less often: after a render that took t ms the next
// waits 3t, which keeps rendering to a quarter of the time. The reasoning block is open while the
// model reasons and closes when the answer starts (the reader may open it again).
function replyView(parts) {
  let content = "", reasoning = "", frame = 0, timer = 0, answered = false, nextRender = 0;
  const calls = [];
  parts.reasoning.open = true;
  const render = () => {
    frame = 0;
    const started = performance.now();
    const log = $("log");
    const following = log.scrollHeight - log.scrollTop - log.clientHeight < 40;
    const split = showMessage(parts, "assistant", content, reasoning, true, calls);
    parts.root.dataset.length = content.length + reasoning.length;
    if ((split.answer || calls.length) && !answered) {
      answered = true;
      parts.reasoning.open = false;
    }
    if (following) log.scrollTop = log.scrollHeight;
    nextRender = performance.now() + 3 * (performance.now() - started);
  };
  const schedule = () => {
    timer = 0;
    frame = requestAnimationFrame(render);
  };
  return {
    get content() { return content; },
    get reasoning() { return reasoning; },
    get calls() { return calls; },
    // `callPieces`: delta.tool_calls, a call's first piece with its id and name, then pieces of
    // its arguments, each saying which call by its index.
    add(piece, thought, callPieces) {
      content += piece;
      reasoning += thought;
      for (const p of callPieces || []) {
        if (!p || !Number.isInteger(p.index) || p.index < 0 || p.index > calls.length) continue;
        if (p.index === calls.length) calls.push({ id: "", type: "function", function: { name: "", arguments: "" } });
        const call = calls[p.index];
        if (typeof p.id === "string") call.id = p.id;
        if (p.function && typeof p.function.name === "string") call.function.name += p.function.name;
        if (p.function && typeof p.function.arguments === "string") call.function.arguments += p.function.arguments;
      }
      if (frame || timer) return;
      const wait = nextRender - performance.now();
      if (wait > 0) timer = setTimeout(schedule, wait);
      else schedule();
    },
    finish() {
      if (frame) cancelAnimationFrame(frame);
      clearTimeout(timer);
      render();
    },
  };
}

function setBusy(busy) {
  $("send").disabled = busy;
  $("stop").disabled = !busy;
  document.body.classList.toggle("busy", busy);
}

// The request body: the conversation (without what only the page keeps), and the settings that
// are filled in, the rest left to the server's defaults.
function requestBody(conversation) {
  const body = { messages: [], stream: true, stream_options: { include_usage: true } };
  const system = $("system").value.trim();
  if (system) body.messages.push({ role: "system", content: system });
  for (const m of conversation.messages) body.messages.push({ role: m.role, content: m.content });
  for (const name of ["temperature", "top_p", "top_k", "min_p", "max_tokens", "seed"]) {
    const value = $(name).value.trim();
    if (value !== "") body[name] = Number(value);
  }
  return body;
}

// The rate is taken over the whole request as the browser saw it, from sending to the last token.
function showUsage(usage, startMs, firstTokenMs, endMs) {
  const cached = usage.prompt_tokens_details ? usage.prompt_tokens_details.cached_tokens : 0;
  const line = $("usage");
  line.dataset.promptTokens = usage.prompt_tokens;
  line.dataset.cachedTokens = cached;
  line.dataset.completionTokens = usage.completion_tokens;
  let text = "prompt " + usage.prompt_tokens + " tokens (" + cached + " cached), " +
             usage.completion_tokens + " generated in " + ((endMs - startMs) / 1000).toFixed(2) + " s";
  if (endMs > startMs) text += ", " + (usage.completion_tokens * 1000 / (endMs - startMs)).toFixed(1) + " tokens/s";
  if (firstTokenMs !== null) text += ", first token after " + Math.round(firstTokenMs - startMs) + " ms";
  line.textContent = text;
}

// Reads server-sent events, calling onData with each parsed data object until [DONE].
async function readEvents(response, onData) {
  const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) throw new Error("the connection closed before the reply ended");
    buffer += value.replace(/\r/g, "");
    let end;
    while ((end = buffer.indexOf("\n\n")) >= 0) {
      const event = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      for (const line of event.split("\n")) {
        if (!line.startsWith("data: ")) continue;
        if (line === "data: [DONE]") return;
        onData(JSON.parse(line.slice(6)));
      }
    }
  }
}

function clearUsage(text) {
  const line = $("usage");
  for (const name of ["promptTokens", "cachedTokens", "completionTokens"]) delete line.dataset[name];
  line.textContent = text;
}

// One turn: `change` edits the conversation's messages (adds the user's, drops a reply to
// regenerate it, cuts at an edited message), then the reply streams in. If no reply text comes (a
// refusal, an error, an early Stop) the conversation is put back as it was, `onUndo` runs, and
// `retry` is what an API key entered after a 401 runs again. A reply still streaming when the
// reader switches away is finished into its own conversation, stopped where it was.
async function turn(conversation, change, retry, onUndo) {
  if (chat.controller) return;
  chat.retry = null;
  showError("");
  const before = conversation.messages.slice();
  change(conversation.messages);
  conversation.updated = Date.now();
  if (!store.conversations.includes(conversation)) store.conversations.push(conversation);
  store.current = conversation.id;
  saveStore();
  renderList();
  renderLog();
  const shown = () => store.current === conversation.id;
  const undo = () => {
    conversation.messages = before;
    if (!before.length) store.conversations = store.conversations.filter((c) => c !== conversation);
    if (shown() && !before.length) store.current = null;
    saveStore();
    renderList();
    if (shown() || store.current === null) renderLog();
    if (onUndo) onUndo();
  };
  const parts = messageParts("assistant");
  $("log").appendChild(parts.root);
  $("log").scrollTop = $("log").scrollHeight;
  const view = replyView(parts);
  const controller = new AbortController();
  chat.controller = controller;
  setBusy(true);
  clearUsage("generating...");
  let firstTokenMs = null, stopped = false;
  const started = performance.now();
  try {
    const response = await fetch("/v1/chat/completions", {
      method: "POST", headers: requestHeaders(), body: JSON.stringify(requestBody(conversation)),
      signal: controller.signal,
    });
    if (!response.ok) {
      const message = await errorMessage(response);
      undo();
      clearUsage("");
      if (response.status === 401) {
        chat.retry = retry;
        askForKey(message);
      } else {
        showError(message);
      }
      return;
    }
    await readEvents(response, (data) => {
      if (data.error) throw new Error(data.error.message || "the server reported an error");
      const delta = data.choices && data.choices[0] && data.choices[0].delta;
      const piece = (delta && typeof delta.content === "string" && delta.content) || "";
      const thought = (delta && typeof delta.reasoning_content === "string" && delta.reasoning_content) || "";
      const callPieces = delta && Array.isArray(delta.tool_calls) ? delta.tool_calls : [];
      if (piece || thought || callPieces.length) {
        if (firstTokenMs === null) firstTokenMs = performance.now();
        view.add(piece, thought, callPieces);
      }
      if (data.usage) showUsage(data.usage, started, firstTokenMs, performance.now());
    });
  } catch (e) {
    if (e.name === "AbortError") {
      stopped = true;
      if (shown()) clearUsage("stopped after " + ((performance.now() - started) / 1000).toFixed(1) + " s");
    } else {
      showError(e instanceof TypeError ? "cannot reach the server: " + e.message : e.message);
    }
  } finally {
    view.finish();
    if (chat.controller === controller) {
      chat.controller = null;
      setBusy(false);
    }
  }
  // A partial reply (stopped, or cut by an error) stays in the conversation as it was shown.
  if (!view.content && !view.reasoning && !view.calls.length) {
    if (shown()) undo();
    else parts.root.remove();
    return;
  }
  const reply = { role: "assistant", content: view.content };
  if (view.reasoning) reply.reasoning_content = view.reasoning;
  // The calls are shown and kept with the reply; the page runs no tools, so the conversation sent
  // back holds the reply's text alone.
  if (view.calls.length) reply.tool_calls = view.calls;
  if (stopped) reply.stopped = true;
  conversation.messages.push(reply);
  conversation.updated = Date.now();
  if (store.conversations.includes(conversation)) saveStore();
  renderList();
  if (shown()) {
    const open = parts.reasoning.open;
    renderLog();
    $("log").lastChild.querySelector(".reasoning").open = open;
  }
}

// The theme: the system's (prefers-color-scheme) unless the toggle chose the other one.
function applyTheme() {
  const theme = localStorage.getItem(themeName);
  if (theme === "dark" || theme === "light") document.documentElement.dataset.theme = theme;
  else delete document.documentElement.dataset.theme;
}

$("theme").addEventListener("click", () => {
  const systemDark = matchMedia("(prefers-color-scheme: dark)").matches;
  const dark = document.documentElement.dataset.theme ? document.documentElement.dataset.theme === "dark"
                                                      : systemDark;
  // Choosing what the system prefers goes back to following the system.
  if (!dark === systemDark) localStorage.removeItem(themeName);
  else localStorage.setItem(themeName, dark ? "light" : "dark");
  applyTheme();
});
$("composer").addEventListener("submit", (event) => {
  event.preventDefault();
  send();
});
$("input").addEventListener("keydown", (event) => {
  if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
    event.preventDefault();
    send();
  }
});
$("stop").addEventListener("click", () => {
  if (chat.controller) chat.controller.abort();
});
$("new-chat").addEventListener("click", () => {
  showConversation(null);
  $("input").focus();
});
$("list-toggle").addEventListener("click", () => document.body.classList.toggle("show-list"));
$("key-form").addEventListener("submit", (event) => {
  event.preventDefault();
  sessionStorage.setItem(keyName, $("api-key").value);
  $("api-key").value = "";
  $("key-form").hidden = true;
  showError("");
  loadModel();
  const retry = chat.retry;
  chat.retry = null;
  if (retry) retry();
});
// Another tab's change to the conversations shows here too, unless a reply is streaming.
window.addEventListener("storage", (event) => {
  if (event.key === themeName) applyTheme();
  if (event.key !== storeName || chat.controller) return;
  loadStore();
  renderList();
  renderLog();
});
applyTheme();
loadStore();
renderList();
renderLog();
loadModel();
