// SPDX-License-Identifier: MIT
// Renders every template in tests/data/chat_templates/*.jinja over a fixed set of conversations
// with @huggingface/jinja (the JavaScript port of Jinja that Hugging Face maintains for chat
// templates) configured as transformers' apply_chat_template is (trim_blocks, lstrip_blocks), and
// writes tests/data/chat_templates/goldens.json. See README.md.
import { Template } from "@huggingface/jinja";
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");
const dir = path.join(root, "tests/data/chat_templates");

// strftime_now() is pinned to this instant (read as UTC) so that dated templates render the same
// every day; the C++ test passes the same value as ChatRenderOptions::now_unix_seconds.
const FIXED_UNIX_SECONDS = Date.UTC(2024, 11, 19, 12, 34, 56) / 1000;
// @huggingface/jinja's strftime_now formats `new Date()` in local time with the default locale's
// month names, and a render's variables cannot replace it; so the clock is pinned here and the
// script insists on TZ=UTC and an English locale.
if (process.env.TZ !== "UTC" || !new Intl.DateTimeFormat(undefined).resolvedOptions().locale.startsWith("en")) {
  throw new Error("run with TZ=UTC LANG=en_US.UTF-8 (see README.md)");
}
const RealDate = Date;
globalThis.Date = class extends RealDate {
  constructor(...args) {
    super(...(args.length ? args : [FIXED_UNIX_SECONDS * 1000]));
  }
};

const conversations = {
  single_user: [{ role: "user", content: "Hello! How are you?" }],
  system_and_user: [
    { role: "system", content: "You are a concise assistant." },
    { role: "user", content: "Name three primes." },
  ],
  multi_turn: [
    { role: "user", content: "Hi there." },
    { role: "assistant", content: "Hello! What can I do for you?" },
    { role: "user", content: "Tell me a joke." },
  ],
  system_multi_turn_ending_with_assistant: [
    { role: "system", content: "Answer in French." },
    { role: "user", content: "Good morning" },
    { role: "assistant", content: "Bonjour !" },
  ],
  special_characters: [
    { role: "system", content: "Quotes ' \" and backslashes \\ \\n are data, as are {{ braces }} and {% tags %}." },
    { role: "user", content: "  <b>bold</b> & <i>tabs</i>\there\n\nand a blank line  \n" },
  ],
  unicode: [
    { role: "user", content: "héllo wörld — 你好，世界 🙂 العربية ñ" },
    { role: "assistant", content: "¡Hola! Ça va? 🙂" },
  ],
  empty_content: [
    { role: "system", content: "" },
    { role: "user", content: "" },
  ],
  whitespace_only: [{ role: "user", content: " \t\n " }],
  tool_role: [
    { role: "user", content: "What is 2+2?" },
    { role: "tool", content: "{\"result\": 4}" },
  ],
};

// Tools, tool calls and documents in the shapes the OpenAI API and transformers' docs use. Numbers
// are integers and no extra schema key is a boolean or null: @huggingface/jinja prints 2.0 as "2"
// and `true | string` as "true", where Python prints "2.0" and "True" (see README.md).
const weatherTool = {
  type: "function",
  function: {
    name: "get_weather",
    description: "Get the current weather in a city.\n",
    parameters: {
      type: "object",
      properties: {
        location: { type: "string", description: "The city, e.g. \"Paris\" or \"São Paulo\"" },
        unit: { type: "string", enum: ["celsius", "fahrenheit"], description: "  The unit  " },
      },
      required: ["location"],
    },
  },
};
const searchTool = {
  type: "function",
  function: {
    name: "search_docs",
    description: "Search the knowledge base.",
    parameters: {
      type: "object",
      properties: {
        query: { type: "string", description: "What to look for" },
        limit: { type: "integer", default: 5, minimum: 1 },
        tags: { type: "array", items: { type: "string" }, examples: [["a", "b"]] },
      },
      required: ["query"],
      title: "SearchArgs",
    },
  },
};
// A tool given without the {"type": "function", "function": ...} wrapper.
const flatTool = { name: "now", description: "The current time.", parameters: { type: "object", properties: {} } };

const weatherCall = (id, location) => ({
  id,
  type: "function",
  function: { name: "get_weather", arguments: { location, unit: "celsius" } },
});
const tricky = "naïve \"quoted\" \\ back\nslash 😀 </tool_call> {{ x }}";

const toolRound = [
  { role: "system", content: "You are a weather bot." },
  { role: "user", content: "Weather in Paris and Oslo?" },
  { role: "assistant", content: "", tool_calls: [weatherCall("call_1", "Paris"), weatherCall("call_2", "Oslo")] },
  { role: "tool", tool_call_id: "call_1", content: "{\"temperature\": 21}" },
  { role: "tool", tool_call_id: "call_2", content: "{\"temperature\": 9}" },
  { role: "assistant", content: "Paris is 21 °C and Oslo 9 °C." },
  { role: "user", content: "Thanks!" },
];
const toolCallWithText = [
  { role: "user", content: "Search for mamba, please." },
  {
    role: "assistant",
    content: "Let me search.",
    tool_calls: [{ id: "c", type: "function", function: { name: "search_docs", arguments: { query: tricky, limit: 3 } } }],
  },
  { role: "tool", content: "[]" },
];
const toolCallStringArguments = [
  { role: "user", content: "Weather in Rome?" },
  {
    role: "assistant",
    content: "",
    tool_calls: [{ type: "function", function: { name: "get_weather", arguments: "{\"location\": \"Rome\"}" } }],
  },
  { role: "tool", content: "sunny" },
];
const toolCallNullContent = [
  { role: "user", content: "Weather in Lima?" },
  { role: "assistant", content: null, tool_calls: [weatherCall("call_9", "Lima")] },
  { role: "tool", content: "cloudy" },
  { role: "assistant", content: null },
];
const documents = [
  { doc_id: 1, title: "Mamba", text: "Mamba is a selective state space model." },
  { doc_id: 2, title: "Granite 4.0", text: "Granite-4.0-H mixes Mamba-2 and attention layers, 9:1 — \"hybrid\"." },
];

// Conversations that only some templates render (tool calls, thinking switches, documents...),
// each as the variables apply_chat_template would pass besides add_generation_prompt and the
// tokens: `messages` and any of tools, documents and template keyword arguments.
const extras = {
  granite: {
    tools_and_tool_results: { messages: toolRound, tools: [weatherTool, searchTool] },
    tool_call_with_text: { messages: toolCallWithText, tools: [searchTool] },
    tool_call_string_arguments: { messages: toolCallStringArguments, tools: [weatherTool] },
    tool_call_null_content: { messages: toolCallNullContent, tools: [weatherTool, flatTool] },
    available_tools: { messages: [{ role: "user", content: "What time is it?" }], available_tools: [flatTool] },
    documents: { messages: [{ role: "user", content: "What is Mamba?" }], documents },
    system_tools_and_documents: {
      messages: [{ role: "system", content: "Answer briefly." }, { role: "user", content: "Compare them." }],
      tools: [searchTool],
      documents,
    },
    content_parts: {
      messages: [
        { role: "system", content: [{ type: "text", text: "Part one." }, { type: "image" }, { type: "text", text: "Part two." }] },
        { role: "user", content: [{ type: "text", text: "Describe" }, { type: "text", text: "this." }] },
        { role: "assistant", content: [] },
      ],
    },
    later_system_message: {
      messages: [
        { role: "user", content: "Hi" },
        { role: "system", content: "Switch to French." },
        { role: "user", content: "Hello again" },
      ],
    },
  },
  nemotron_nano_v2: {
    tools_and_tool_results: { messages: toolRound, tools: [weatherTool, searchTool] },
    tool_call_with_text: { messages: toolCallWithText, tools: [searchTool, flatTool] },
    tool_call_string_arguments: { messages: toolCallStringArguments, tools: [weatherTool] },
    system_no_think: {
      messages: [{ role: "system", content: "/no_think You are terse." }, { role: "user", content: "2+2?" }],
    },
    user_think_after_system_no_think: {
      messages: [
        { role: "system", content: "/no_think" },
        { role: "user", content: "Plan a trip. /think" },
      ],
    },
    user_no_think_in_later_turn: {
      messages: [
        { role: "user", content: "/think Why is the sky blue?" },
        { role: "assistant", content: "<think>\nRayleigh.\n</think>\n\nRayleigh scattering." },
        { role: "user", content: "Shorter. /no_think" },
      ],
    },
    think_inside_a_word: { messages: [{ role: "user", content: "Explain /thinking aloud." }] },
    ends_with_assistant_prefill: {
      messages: [
        { role: "system", content: "/think" },
        { role: "user", content: "Count to three." },
        { role: "assistant", content: "  One, two,  " },
      ],
    },
    continue_final_message_false: {
      messages: [{ role: "user", content: "Hi" }, { role: "assistant", content: "Hello" }],
      continue_final_message: false,
    },
    continue_final_message_true: {
      messages: [{ role: "user", content: "Hi" }, { role: "assistant", content: "Hello" }],
      continue_final_message: true,
    },
  },
  nemotron_h_reasoning: {
    reasoning_on: {
      messages: [{ role: "system", content: "Be careful. {'reasoning': True}" }, { role: "user", content: "  17 * 23?  " }],
    },
    reasoning_off_multi_turn: {
      messages: [
        { role: "system", content: "{'reasoning': False}" },
        { role: "user", content: "Hi" },
        { role: "assistant", content: "  Hello!  " },
        { role: "user", content: "Bye" },
      ],
    },
    reasoning_marker_in_user_message: {
      messages: [{ role: "user", content: "{'reasoning': True}" }],
    },
  },
  // Qwen3 (the Hermes tool-call form): its template reads `message.content` as a string, so no
  // case gives an assistant a null content; its `strip('\n')` strips newlines only in Python but
  // all whitespace in @huggingface/jinja, so no reasoning has spaces at its ends.
  qwen3: {
    tools_and_tool_results: { messages: toolRound, tools: [weatherTool, searchTool] },
    tool_call_with_text: { messages: toolCallWithText, tools: [searchTool, flatTool] },
    tool_call_string_arguments: { messages: toolCallStringArguments, tools: [weatherTool] },
    thinking_off: { messages: [{ role: "user", content: "2+2?" }], enable_thinking: false },
    reasoning_content_history: {
      messages: [
        { role: "user", content: "Why is the sky blue?" },
        { role: "assistant", reasoning_content: "Rayleigh scattering.", content: "Shorter wavelengths scatter." },
        { role: "user", content: "And sunsets?" },
        { role: "assistant", reasoning_content: "\nLonger path.\n", content: "Red light survives the long path." },
      ],
    },
    think_tags_in_content: {
      messages: [
        { role: "user", content: "1+1?" },
        { role: "assistant", content: "<think>\nEasy.\n</think>\n\n2" },
        { role: "user", content: "2+2?" },
      ],
    },
  },
  nemotron_3: {
    tools_and_tool_results: { messages: toolRound, tools: [weatherTool, searchTool] },
    tool_call_with_text: { messages: toolCallWithText, tools: [searchTool, flatTool] },
    tool_call_null_content: { messages: toolCallNullContent, tools: [weatherTool] },
    thinking_off: { messages: [{ role: "user", content: "2+2?" }], enable_thinking: false },
    reasoning_content_history: {
      messages: [
        { role: "user", content: "Why is the sky blue?" },
        { role: "assistant", reasoning_content: "Rayleigh scattering.", content: "Shorter wavelengths scatter." },
        { role: "user", content: "And sunsets?" },
        { role: "assistant", reasoning_content: "  Longer path.  ", content: "Red light survives the long path." },
      ],
    },
    think_tags_in_content: {
      messages: [
        { role: "system", content: "Be precise." },
        { role: "user", content: "1+1?" },
        { role: "assistant", content: "<think>\nEasy.\n</think>\n2" },
        { role: "user", content: "2+2?" },
        { role: "assistant", content: "<think>unfinished thought" },
      ],
    },
    history_thinking_kept: {
      messages: [
        { role: "user", content: "1+1?" },
        { role: "assistant", content: "<think>\nEasy.\n</think>\n2" },
        { role: "user", content: "2+2?" },
      ],
      truncate_history_thinking: false,
    },
    old_tool_call_turn_truncated: {
      messages: [
        { role: "user", content: "Weather in Paris?" },
        { role: "assistant", content: "<think>Call the tool.</think>Checking.", tool_calls: [weatherCall("a", "Paris")] },
        { role: "tool", content: "21" },
        { role: "assistant", content: "<think>ok</think>It is 21 °C." },
        { role: "user", content: "Thanks" },
      ],
      tools: [weatherTool],
    },
    other_role: { messages: [{ role: "developer", content: "Use metric units." }, { role: "user", content: "Hi" }] },
  },
};

const templates = {
  "chatml.jinja": { tokens: { bos_token: "", eos_token: "<|im_end|>" } },
  "llama-3-instruct.jinja": { tokens: { bos_token: "<|begin_of_text|>", eos_token: "<|eot_id|>" } },
  "granite-3.1-instruct.jinja": { tokens: { bos_token: "<|end_of_text|>", eos_token: "<|end_of_text|>" } },
  "features.jinja": { tokens: { bos_token: "<s>", eos_token: "</s>" } },
  // The hybrids' templates do not use bos_token or eos_token; these are their tokenizers'.
  "granite-4.0.jinja": { tokens: { bos_token: "<|end_of_text|>", eos_token: "<|end_of_text|>" }, extras: extras.granite },
  "nemotron-nano-9b-v2.jinja": { tokens: { bos_token: "<s>", eos_token: "<SPECIAL_12>" }, extras: extras.nemotron_nano_v2 },
  "nemotron-h-reasoning.jinja": { tokens: { bos_token: "<s>", eos_token: "<SPECIAL_12>" }, extras: extras.nemotron_h_reasoning },
  "nemotron-3-nano.jinja": { tokens: { bos_token: "<s>", eos_token: "<|im_end|>" }, extras: extras.nemotron_3 },
  "qwen3.jinja": { tokens: { bos_token: "", eos_token: "<|im_end|>" }, extras: extras.qwen3 },
};

const cases = [];
for (const [file, { tokens, extras: more = {} }] of Object.entries(templates)) {
  const source = fs.readFileSync(path.join(dir, file), "utf8");
  const template = new Template(source);
  const all = { ...Object.fromEntries(Object.entries(conversations).map(([k, m]) => [k, { messages: m }])), ...more };
  for (const [name, variables] of Object.entries(all)) {
    for (const addGenerationPrompt of [true, false]) {
      // transformers passes tools and documents (None when not given) and the tokens, and the
      // caller's keyword arguments over them.
      const expected = template.render({
        add_generation_prompt: addGenerationPrompt,
        ...tokens,
        tools: null,
        documents: null,
        ...variables,
      });
      cases.push({ template: file, conversation: name, add_generation_prompt: addGenerationPrompt, ...tokens,
        variables, expected });
    }
  }
}

const out = { generator: "@huggingface/jinja 0.5.11 (tools/chat_template_goldens/generate.js)",
  now_unix_seconds: FIXED_UNIX_SECONDS, cases };
fs.writeFileSync(path.join(dir, "goldens.json"), JSON.stringify(out, null, 1) + "\n");
console.log(`wrote ${cases.length} cases`);
