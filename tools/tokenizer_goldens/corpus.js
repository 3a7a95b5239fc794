// SPDX-License-Identifier: MIT
'use strict';
// Builds the tokenizer test corpus: hand-written cases that each aim at one rule of the
// pipeline, then seeded pseudo-random lines that mix every kind of fragment, so that
// interactions between the rules are covered too. The output is deterministic.

function mulberry32(seed) {
  let a = seed >>> 0;
  return function next() {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

// Every character the Rust regex / Oniguruma `\s` treats as white space (the Unicode
// White_Space property), plus a few look-alikes that are not white space.
const WHITE_SPACE = ['\t', '\n', '\u000b', '\u000c', '\r', ' ', '\u0085', '\u00a0', '\u1680', '\u2000',
  '\u2003', '\u2007', '\u200a', '\u2028', '\u2029', '\u202f', '\u205f', '\u3000'];
const NOT_WHITE_SPACE = ['\ufeff', '\u200b', '\u180e', '\u200d', '\u00ad', '\u0000', '\u0001', '\u007f', '\u009f'];

const SPECIAL_TOKENS = ['<|endoftext|>', '<|padding|>', '<|im_start|>', '<|im_end|>', '<tool_call>', '</tool_call>',
  '<|fim_prefix|>', '<|begin_of_text|>', '<|end_of_text|>', '<|eot_id|>', '<|start_header_id|>',
  '<|end_header_id|>', '<|reserved_special_token_7|>', '<think>'];

function handWritten() {
  const cases = [];
  const add = (name, text) => cases.push({ name, text });
  const addHex = (name, hex) => cases.push({ name, hex });

  add('empty', '');
  add('single-space', ' ');
  add('single-newline', '\n');
  add('single-letter', 'a');
  add('english-sentence', 'The quick brown fox jumps over the lazy dog.');
  add('english-paragraph', 'Mamba is a selective state space model. It scales linearly with sequence length, ' +
    'and its recurrent form makes decoding cheap: one step per token, no growing cache!');
  add('hello-world-punct', 'Hello, world! How are you? I\'m fine -- thanks... (really) [yes] {ok} <tag>');

  for (let n = 1; n <= 30; n++) {
    add(`spaces-between-${n}`, `a${' '.repeat(n)}b`);
  }
  for (const n of [1, 2, 3, 5, 8, 13, 24, 25, 30]) {
    add(`spaces-trailing-${n}`, `end${' '.repeat(n)}`);
    add(`spaces-leading-${n}`, `${' '.repeat(n)}start`);
    add(`spaces-before-newline-${n}`, `x${' '.repeat(n)}\ny`);
    add(`spaces-after-newline-${n}`, `x\n${' '.repeat(n)}y`);
    add(`spaces-only-${n}`, ' '.repeat(n));
  }
  for (let n = 1; n <= 5; n++) {
    add(`tabs-${n}`, `a${'\t'.repeat(n)}b`);
    add(`newlines-${n}`, `a${'\n'.repeat(n)}b`);
    add(`crlf-${n}`, `a${'\r\n'.repeat(n)}b`);
  }
  add('mixed-whitespace-1', 'a \t \n \t b');
  add('mixed-whitespace-2', 'line one\r\n\r\n  line two\n\n\n\tindented\n');
  add('mixed-whitespace-3', '  \n  \n  x  \t\n');
  add('newline-then-punct', 'end.\n\n!!\n\n');
  add('cr-alone', 'a\rb\r\rc');
  WHITE_SPACE.concat(NOT_WHITE_SPACE).forEach((c, i) => {
    const code = c.codePointAt(0).toString(16).padStart(4, '0');
    add(`char-${code}-between`, `a${c}b`);
    add(`char-${code}-spaced`, `a ${c} b`);
    add(`char-${code}-doubled-before-word`, `${c}${c}word`);
    add(`char-${code}-trailing`, `word${c}`);
    add(`char-${code}-tripled`, `a${c}${c}${c}b`);
    add(`char-${code}-after-space`, ` ${c}x`);
    add(`char-${code}-before-digits`, `${c}123 ${c}.`);
    if (i % 2 === 0) add(`char-${code}-with-newline`, `x${c}\n${c}y`);
  });
  add('bom-at-start', '\ufeffBOM at the start of a file');

  const digits = '1234567890';
  for (let n = 1; n <= 10; n++) {
    add(`digits-${n}`, `x ${digits.slice(0, n)} y`);
    add(`digits-${n}-glued`, `${digits.slice(0, n)}abc${digits.slice(0, n)}`);
  }
  add('digits-long', '3141592653589793238462643383279502884197');
  add('numbers-formats', 'pi=3.14159, 1,000,000 items on 2024-01-05 at 10:30; v1.2.3 0x1F 1e-5 -42 +7 50%');
  add('numbers-unicode', 'Arabic-Indic ١٢٣٤٥ fullwidth １２３ super x²³ fraction ½ roman Ⅻ circled ① CJK 一二三');

  for (const c of ['DON\'T', 'don\'t', 'Don\'T', 'we\'ll', 'WE\'LL', 'We\'Ll', 'I\'m', 'I\'M', 'you\'re', 'YOU\'RE',
    'they\'ve', 'THEY\'VE', 'it\'s', 'IT\'S', 'he\'d', 'HE\'D', 'x\'sy', '\'S', '\'s', '\'ſ', 'it\'ſ',
    'rock \'n\' roll', '\'ſx', 'it\'ſnice', '\'Sx', '\'REx', '\'LLama', 'we\'VEry', '\'dx', '\'\'s', 'it’s', 'o\'clock', '\'LL\'', 'she\'D\'ve', 'y\'all', '\'', '\'\'\'', ' \'re']) {
    add(`contraction-${c}`, c);
  }
  add('contractions-sentence', 'I\'M sure we\'ll see THAT\'S what they\'VE said, but DON\'T you\'d think it\'s odd?');

  add('latin-nfc', 'café naïve Ångström résumé Tiếng Việt élève Œuvre façade Straße');
  add('latin-nfd', 'cafe\u0301 nai\u0308ve A\u030angstro\u0308m re\u0301sume\u0301 Tie\u0302\u0301ng Vie\u0323\u0302t ' +
    'e\u0300le\u0300ve fac\u0327ade');
  add('latin-nfd-single', 'e\u0301');
  add('combining-after-space', 'a \u0301b \u0308');
  add('combining-alone', '\u0301\u0302\u0303');
  add('compatibility-chars', 'Å (angstrom sign) Ω (ohm sign) ﬁ ligature ｶﾀｶﾅ half-width ℌ ㎏ ①');
  add('hangul-jamo-nfd', '\u1100\u1161\u11a8 \u1112\u1161\u11ab\u1100\u1173\u11af');
  add('greek-nfd', 'α\u0301 ε\u0301 ο\u0301 Καλημε\u0301ρα');
  add('cyrillic', 'Привет, мир! Как дела? Съешь же ещё этих мягких французских булок.');
  add('cyrillic-upper', 'МОСКВА — СТОЛИЦА РОССИИ. Ёлка, йогурт.');
  add('greek', 'Καλημέρα κόσμε. Ξεσκεπάζω την ψυχοφθόρα βδελυγμία.');
  add('chinese', '你好，世界！我们今天去公园散步。人工智能正在改变世界。');
  add('japanese', 'こんにちは、世界。カタカナとひらがな、そして漢字。東京タワーは333メートルです。');
  add('korean', '안녕하세요 세계! 다람쥐 헌 쳇바퀴에 타고파.');
  add('arabic', 'مرحبا بالعالم. هذا اختبار للترميز، مع أرقام ١٢٣.');
  add('hebrew', 'שלום עולם! זהו מבחן.');
  add('hindi', 'नमस्ते दुनिया, यह एक परीक्षण है। क्षत्रिय ज्ञान');
  add('thai', 'สวัสดีชาวโลก ภาษาไทยไม่มีช่องว่างระหว่างคำ');
  add('tamil-bengali', 'வணக்கம் உலகம் — হ্যালো বিশ্ব');
  add('georgian-armenian', 'გამარჯობა მსოფლიო; Բարեւ աշխարհ');
  add('vietnamese', 'Tôi yêu tiếng Việt. Đường phố Hà Nội rất đông đúc.');
  add('mixed-scripts', 'English русский 中文 日本語 한국어 العربية हिन्दी ελληνικά עברית ไทย');

  add('emoji-single', '👍');
  add('emoji-skin-tone', '👍🏽 👋🏿');
  add('emoji-zwj-family', '👨‍👩‍👧‍👦 family');
  add('emoji-rainbow-flag', '🏳️‍🌈');
  add('emoji-flags', '🇫🇷🇯🇵🇺🇸 flags 🇩🇪');
  add('emoji-heart-vs16', '❤️ vs ❤');
  add('emoji-run', '😀😃😄😁😆😅😂🤣');
  add('emoji-technologist', '🧑🏿‍💻 writes code');
  add('emoji-keycap', '#️⃣ 1️⃣ *️⃣');
  add('emoji-in-word', 'a👍b c🎉d');
  add('emoji-spaced', ' 🎉 party 🎉 ');

  add('code-cpp', '#include <vector>\n\nint main(int argc, char** argv) {\n  std::vector<int> v{1, 2, 3};\n' +
    '  for (auto& x : v) x *= 2;  // double\n  return v.size() > 2 ? 0 : 1;\n}\n');
  add('code-python', 'def fib(n: int) -> int:\n    """Return the n-th Fibonacci number."""\n    if n < 2:\n' +
    '        return n\n    return fib(n - 1) + fib(n - 2)\n\n\nprint([fib(i) for i in range(10)])\n');
  add('code-json', '{"name": "mamba", "layers": 24, "d_model": 768, "tags": ["ssm", "lm"], "ok": true, "x": null}');
  add('code-shell', 'for f in *.txt; do echo "$f" | sed -e \'s/a/b/g\' >> out.log 2>&1; done && ls -la ~/dir');
  add('code-html', '<!DOCTYPE html>\n<html lang="en"><body><p class=\'x\'>Hi &amp; bye</p></body></html>');
  add('code-regex', '^(?:[a-z0-9!#$%&\'*+/=?^_`{|}~-]+)@example\\.com$');
  add('markdown-table', '| col A | col B |\n|-------|------:|\n| 1     |  2.50 |\n\n* item\n  * nested\n');
  add('urls-paths', 'See https://example.com/path?q=1&r=two#frag or C:\\Users\\me\\file.txt or /usr/local/bin');
  add('email', 'contact: first.last+tag@sub.example.org');

  add('special-between-letters', 'a<|endoftext|>b');
  add('special-alone', '<|endoftext|>');
  add('special-twice', '<|endoftext|><|endoftext|>');
  add('special-truncated', '<|endoftext|');
  add('special-extra-bar', '<|endoftext||>');
  add('special-spaced', ' <|endoftext|> ');
  add('special-nested-brackets', '<<|endoftext|>>');
  add('special-padding', '<|padding|>x<|padding|>');
  add('special-chatml', '<|im_start|>system\nYou are helpful.<|im_end|>\n<|im_start|>user\nhi<|im_end|>\n');
  add('special-tool-call', '<tool_call>{"name": "f", "arguments": {}}</tool_call>');
  add('special-llama3-header', '<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nHello<|eot_id|>');
  add('special-reserved', '<|reserved_special_token_5|> and <|reserved_special_token_250|>');
  add('special-fim', '<|fim_prefix|>def f():<|fim_suffix|>    return 1<|fim_middle|>');
  add('special-think', '<think>\nplan\n</think>\n\nanswer');
  add('special-end-of-text', 'done<|end_of_text|>');
  add('special-with-space-runs', 'x' + ' '.repeat(25) + '<|endoftext|>' + ' '.repeat(4) + 'y');
  add('special-in-nfd', 'cafe\u0301<|endoftext|>e\u0301');

  add('control-nul', 'a\u0000b');
  add('control-chars', '\u0001\u0002\u0007\u001b[31mred\u001b[0m\u007f');
  add('c1-controls', '\u0080\u0085\u009f');
  add('soft-hyphen', 'co\u00adoperate');
  add('zero-width', 'zero\u200bwidth\u200djoiner\u2060word');
  add('long-word', 'a'.repeat(300));
  add('long-digits', '1'.repeat(100));
  add('long-punct', '!'.repeat(50) + '?'.repeat(7) + '.'.repeat(40));
  add('punct-unicode', '— … « guillemets » „quotes“ ‘single’ ¿qué? ¡olé! • · ※ § ¶ © ® ™ € £ ¥ ₹');
  add('backslashes-quotes', '\\\\ "double" \'single\' `back` \\n \\t');
  add('math-symbols', '∀x∈ℝ: x² ≥ 0, ∑ᵢ aᵢ ≤ ∞, √2 ≈ 1.414, α→β ⇒ γ');

  addHex('invalid-ff', 'ff');
  addHex('invalid-fe-between', '61fe62');
  addHex('invalid-lone-lead-c3', 'c3');
  addHex('invalid-c3-then-ascii', 'c328');
  addHex('invalid-truncated-3byte', 'e282');
  addHex('invalid-truncated-3byte-then-ascii', 'e28228');
  addHex('invalid-truncated-4byte', 'f09f98');
  addHex('invalid-truncated-4byte-then-letter', 'f09f9841');
  addHex('invalid-surrogate', 'eda080');
  addHex('invalid-overlong-2', 'c0af');
  addHex('invalid-overlong-3', 'e080af');
  addHex('invalid-above-max', 'f4908080');
  addHex('invalid-5byte', 'f888808080');
  addHex('invalid-lone-continuations', '80bf8081');
  addHex('invalid-inside-word', '68656c6c6fc3a9ff776f726c64');
  addHex('invalid-extra-continuation', 'f09f988080');
  addHex('invalid-mixed-cjk', 'e4bda0e5a5bdffe4b896e7958c');
  addHex('invalid-spaces', '2020ff2020fe200a');

  // SentencePiece-style tokenizers: the "▁" word marker in the input itself, the <s> </s> <unk>
  // special tokens, and characters outside a 32k vocabulary that only byte fallback can encode.
  add('sp-marker-alone', '\u2581');
  add('sp-marker-doubled', '\u2581\u2581');
  add('sp-marker-in-text', 'a\u2581b \u2581c\u2581\u2581d \u2581');
  add('sp-marker-leading', '\u2581\u2581start and \u2581 end');
  add('sp-marker-with-spaces', ' \u2581 ');
  add('sp-bos-eos', '<s>Hello</s>');
  add('sp-bos-eos-spaced', ' <s> Hello </s> ');
  add('sp-bos-alone', '<s>');
  add('sp-eos-then-text', '</s>next');
  add('sp-bos-then-space', '<s> x');
  add('sp-unk-literal', '<unk> and <unk><unk>');
  add('sp-specials-and-spaces', '</s> </s>  x  <s>');
  add('sp-special-lookalikes', '<s <s>> </ s> <S> <unk');
  add('sp-byte-token-text', '<0x41><0xE4> <0x0A> <0xff>');
  add('sp-fallback-emoji', '\u{1f999}\u{1fa90}\u{1fae0} llama \u{1f999}');
  add('sp-fallback-cjk-rare', '\u{20000}\u{20001} 龘 丗 ㊙ 𪚥');
  add('sp-fallback-rare-scripts', 'ᚠᛇᚻ ꦱꦸ 𐌰𐌱 ߊߋ ⵜⴰ ᏣᎳᎩ 𓀀𓀁 ꯃꯤ');
  add('sp-fallback-mixed', 'a😀b😀😀c 中文𝕏𝕐ℤ end');
  add('sp-fallback-private-use', '\ue000\uf8ff\u{f0000}\u{10fffd}');
  add('sp-fallback-noncharacters', '\ufdd0 \ufffe\uffff');
  add('sp-fallback-in-word', 'naïve𐍈word');
  add('sp-control-chars', '\u0000\u0001\u001f\u007f\u0080\u009f');
  add('sp-control-spaced', 'x \u0007 y \u001b z');
  add('sp-tabs-newlines', '\tindent\n\n\ttwo\r\n\tthree\n');
  add('sp-leading-trailing', '   lead and trail   ');
  add('sp-only-newlines', '\n\n\n');
  add('sp-only-tabs', '\t\t');
  add('sp-space-newline-mix', ' \n \n ');
  add('sp-nbsp-ideographic-space', 'a\u00a0b\u3000c');
  return cases;
}

function generated(count, seed) {
  const random = mulberry32(seed);
  const pick = (list) => list[Math.floor(random() * list.length)];
  const english = ('the of and to in is was that for on with as by at from this be are have it not or ' +
    'which an they their were one all has been but more can would we there when its model state space ' +
    'sequence token layer selective scan recurrent linear attention memory hardware kernel throughput ' +
    'language inference training decoding prompt Mamba Transformer GPU CPU The It We They In However ' +
    'running jumped quickly beautiful understanding implementation tokenization internationalization').split(' ');
  const foreign = ['Привет', 'мир', 'данные', 'Καλημέρα', 'κόσμε', '你好', '世界', '模型', 'こんにちは', 'カタカナ',
    '안녕하세요', '세계', 'مرحبا', 'العالم', 'שלום', 'नमस्ते', 'दुनिया', 'สวัสดี', 'café', 'cafe\u0301',
    'naïve', 'nai\u0308ve', 'Ångström', 'A\u030angstro\u0308m', 'Straße', 'Việt', 'Vie\u0323\u0302t', 'Ελλάδα',
    'Ελλα\u0301δα', 'Ёлка', 'Е\u0308лка', 'ﬁne', 'Ωmega'];
  const emoji = ['👍', '👍🏽', '👨‍👩‍👧‍👦', '🏳️‍🌈', '🇫🇷', '🇯🇵🇺🇸', '❤️', '😂', '🎉', '🧑🏿‍💻', '#️⃣', '🚀'];
  const punct = ['.', ',', '!', '?', ';', ':', '...', '—', '(', ')', '[', ']', '{', '}', '"', '\'', '-', '--',
    '/', '\\', '@', '#', '$', '%', '^', '&', '*', '+', '=', '<', '>', '|', '~', '`', '«', '»', '…', '•', '→'];
  const contractions = ['\'s', '\'t', '\'re', '\'ve', '\'m', '\'ll', '\'d', '\'S', '\'T', '\'RE', '\'VE', '\'M',
    '\'LL', '\'D', 'n\'t', 'N\'T', '\'ſ'];
  const whitespace = () => {
    const r = random();
    if (r < 0.55) return ' ';
    if (r < 0.65) return ' '.repeat(1 + Math.floor(random() * 30));
    if (r < 0.72) return '\n';
    if (r < 0.76) return '\n'.repeat(2 + Math.floor(random() * 3));
    if (r < 0.8) return '\t';
    if (r < 0.83) return '\r\n';
    if (r < 0.88) return pick(WHITE_SPACE);
    if (r < 0.9) return pick(NOT_WHITE_SPACE);
    if (r < 0.95) return ' '.repeat(1 + Math.floor(random() * 4)) + '\n' + ' '.repeat(Math.floor(random() * 9));
    return '';
  };
  const fragment = () => {
    const r = random();
    if (r < 0.5) return pick(english);
    if (r < 0.62) return pick(foreign);
    if (r < 0.7) {
      const length = 1 + Math.floor(random() * 10);
      let digits = '';
      for (let i = 0; i < length; i++) digits += String(Math.floor(random() * 10));
      return digits;
    }
    if (r < 0.8) return pick(punct) + (random() < 0.3 ? pick(punct) : '');
    if (r < 0.86) return pick(english) + pick(contractions);
    if (r < 0.91) return pick(emoji);
    if (r < 0.93) return pick(SPECIAL_TOKENS);
    if (r < 0.96) return pick(english).toUpperCase();
    return pick(english) + pick(punct) + pick(english);
  };
  const lines = [];
  for (let i = 0; i < count; i++) {
    const fragments = 20 + Math.floor(random() * 60);
    let text = '';
    for (let f = 0; f < fragments; f++) {
      text += fragment();
      text += whitespace();
    }
    lines.push({ name: `generated-${i}`, text });
  }
  return lines;
}

// Lines for SentencePiece-style tokenizers: the fragments above plus the "▁" marker, <s> </s>
// <unk> and characters that fall back to bytes, with runs of spaces at either end.
function generatedSentencePiece(count, seed) {
  const random = mulberry32(seed);
  const pick = (list) => list[Math.floor(random() * list.length)];
  const words = ['the', 'model', 'state', 'space', 'Mamba', 'Codestral', 'token', 'byte', 'fallback', 'über', 'naïve',
    'Привет', '你好', '世界', 'こんにちは', '안녕', 'مرحبا', 'नमस्ते', 'Ελλάδα', 'def', 'return', '{', '}', '();', '42',
    '3.14', '2024'];
  const rare = ['\u{1f999}', '\u{1fae0}', '\u{20000}', '龘', '𪚥', 'ᚠᛇᚻ', 'ꦱꦸ', '𐌰', 'ߊ', 'ⵜ', 'Ꮳ', '𓀀', '𝕏',
    '\ue000', '\u{f0000}', '\u0001', '\u007f', '\u0085'];
  const specials = ['<s>', '</s>', '<unk>', '\u2581', '\u2581\u2581', '<0x41>'];
  const whitespace = () => {
    const r = random();
    if (r < 0.6) return ' ';
    if (r < 0.7) return ' '.repeat(2 + Math.floor(random() * 6));
    if (r < 0.8) return '\n';
    if (r < 0.85) return '\t';
    if (r < 0.9) return '\r\n';
    return '';
  };
  const lines = [];
  for (let i = 0; i < count; i++) {
    const fragments = 5 + Math.floor(random() * 30);
    let text = random() < 0.3 ? ' '.repeat(1 + Math.floor(random() * 3)) : '';
    for (let f = 0; f < fragments; f++) {
      const r = random();
      text += r < 0.6 ? pick(words) : r < 0.85 ? pick(rare) : pick(specials);
      text += whitespace();
    }
    lines.push({ name: `generated-sp-${i}`, text });
  }
  return lines;
}

function buildCorpus() {
  return handWritten().concat(generated(205, 20240601), generatedSentencePiece(60, 20250301));
}

module.exports = { buildCorpus };
