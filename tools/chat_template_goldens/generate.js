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

const tokens = {
  "chatml.jinja": { bos_token: "", eos_token: "<|im_end|>" },
  "llama-3-instruct.jinja": { bos_token: "<|begin_of_text|>", eos_token: "<|eot_id|>" },
  "granite-3.1-instruct.jinja": { bos_token: "<|end_of_text|>", eos_token: "<|end_of_text|>" },
  "features.jinja": { bos_token: "<s>", eos_token: "</s>" },
};

const cases = [];
for (const file of Object.keys(tokens)) {
  const source = fs.readFileSync(path.join(dir, file), "utf8");
  const template = new Template(source);
  for (const [name, messages] of Object.entries(conversations)) {
    for (const addGenerationPrompt of [true, false]) {
      const expected = template.render({
        messages,
        add_generation_prompt: addGenerationPrompt,
        ...tokens[file],
      });
      cases.push({ template: file, conversation: name, add_generation_prompt: addGenerationPrompt, ...tokens[file],
        messages, expected });
    }
  }
}

const out = { generator: "@huggingface/jinja 0.5.11 (tools/chat_template_goldens/generate.js)",
  now_unix_seconds: FIXED_UNIX_SECONDS, cases };
fs.writeFileSync(path.join(dir, "goldens.json"), JSON.stringify(out, null, 1) + "\n");
console.log(`wrote ${cases.length} cases`);
