// SPDX-License-Identifier: MIT
'use strict';
// Unicode edge cases for the split regexes, beyond corpus.js: combining marks, emoji ZWJ
// sequences, CJK and kana, numbers of many scripts, \r\n runs, apostrophes of every kind, and
// the letter categories the GPT-4o pattern tells apart (Lu, Ll, Lt, Lm, Lo, M). Each case aims
// at one class boundary; the list is fixed, so the goldens are deterministic.

function edgeCases() {
  const cases = [];
  const add = (name, text) => cases.push({ name, text });
  // Combining marks: after letters, digits, spaces, punctuation, at the start, stacked.
  add('marks-after-letters', 'cafe\u0301 nai\u0308ve Zu\u0308rich');
  add('marks-stacked', 'a\u0301\u0302\u0303\u0304 b\u0323\u0307');
  add('marks-after-digit', '1\u0301 2\u20e3 3\ufe0f\u20e3');
  add('marks-after-space', 'x \u0301y  \u0308z');
  add('marks-after-punct', '!\u0301 ?\u0308.');
  add('marks-leading', '\u0301abc');
  add('marks-spacing', 'क्षत्रिय हिन्दी');
  add('marks-enclosing', 'a\u20dd b\u20de');
  // Emoji: ZWJ sequences, skin tones, flags, keycaps, variation selectors, tags.
  add('emoji-zwj-sequences', '👩‍💻👨‍👩‍👧 🏳️‍🌈 🧑🏽‍🚀 ❤️‍🔥');
  add('emoji-zwj-between-letters', 'a\u200db x\u200d\u200dy');
  add('emoji-tag-flag', '🏴\u{e0067}\u{e0062}\u{e0073}\u{e0063}\u{e0074}\u{e007f} Scotland');
  add('emoji-vs16-text', '☺️☺︎ ✔️ok');
  add('emoji-keycaps', '#️⃣*️⃣0️⃣9️⃣');
  add('emoji-glued-to-words', 'hi😀there 😀😀 yes!😀');
  // CJK, kana, Hangul, fullwidth forms, ideographic punctuation.
  add('cjk-sentence', '我们今天去公园散步，天气很好。');
  add('cjk-mixed-latin', 'GPU加速的LLM推理engine很快');
  add('japanese-kana', 'ひらがなカタカナｶﾀｶﾅ漢字ー・「引用」');
  add('japanese-long-vowel', 'コーヒーとケーキ');
  add('korean-mixed', '한국어 텍스트와 English 혼합 123개');
  add('cjk-extension-b', '𠀀𠀁𠮷野家');
  add('fullwidth-latin', 'ＡＢＣ ａｂｃ ＦＵＬＬ！？');
  add('cjk-compat', '㍿㌀ ㈱ ㊙');
  // Numbers of many scripts, digit runs of every length class, number-like symbols.
  add('digits-arabic-indic', '٠١٢٣٤٥٦٧٨٩ ۰۱۲۳۴۵۶۷۸۹');
  add('digits-devanagari-bengali', '०१२३४५६७८९ ০১২৩৪৫৬৭৮৯');
  add('digits-thai-lao-tibetan', '๐๑๒๓๔ ໐໑໒໓ ༠༡༢༣');
  add('digits-fullwidth-run', '１２３４５６７');
  add('digits-mathematical', '𝟎𝟏𝟐𝟑𝟒𝟓 𝟘𝟙𝟚');
  add('numbers-letterlike', 'Ⅰ Ⅱ Ⅻ ⅻ ↉ ½¾ ⅓');
  add('numbers-super-sub', 'x²³⁴ H₂O₁₂₃');
  add('numbers-circled', '①②③⑩⑳ ❶❷');
  add('numbers-cjk-han', '一二三四 〇 壹貳參 〡〢〣');
  add('numbers-mixed-scripts', '12٣४５6');
  add('digits-seven', '1234567');
  add('digits-with-separators', '1,234,567.89 10_000 3.14e-10');
  // \r\n runs with spaces and tabs, lone CR and LF, line and paragraph separators.
  add('crlf-runs', 'a\r\n\r\n\r\nb');
  add('crlf-spaced', 'a \r\n \r\n  b');
  add('crlf-trailing', 'end\r\n\r\n');
  add('crlf-leading', '\r\n\r\nstart');
  add('cr-runs', 'a\r\r\rb\n\r\n\rc');
  add('crlf-after-punct', 'x.\r\n\r\n!!\r\ny');
  add('crlf-tabs', '\t\r\n\t\r\n\tz');
  add('line-separators', 'a\u2028b\u2029c\u0085d');
  add('whitespace-only-mixed', ' \t\r\n \u3000\u00a0');
  // Apostrophes: ASCII contractions in every case, typographic, modifier letters, primes.
  add('apostrophe-contractions', "I'M YOU'RE we'Ve It'S she'LL he'D can't");
  add('apostrophe-typographic', 'it’s don’t ‘quoted’ “double”');
  add('apostrophe-modifier', 'Hawaiʻi ʼOkina Oʼ ꞌ');
  add('apostrophe-primes', "5′ 10″ 3' 4'' ''s '''");
  add('apostrophe-after-digits', "90's 1980's '80s");
  add('apostrophe-nonlatin', "Пушкин's 東京's ʼs");
  add('apostrophe-backtick', '`s `t ´s');
  // Letter categories: titlecase digraphs, modifier letters, other letters, case pairs.
  add('letters-titlecase', 'ǅungla ǈudi ǋ ᾈ');
  add('letters-modifier', 'ʰʲʷ ᵃᵇᶜ kʰat');
  add('letters-other', 'אבג ابت ᚠᚢᚦ ꦲꦏ');
  add('letters-camel-case', 'camelCaseWord HTTPServer getHTTPResponse iPhone XMLHttpRequest');
  add('letters-upper-lower-marks', 'ÀÉÎ àéî A\u0300E\u0301 a\u0300e\u0301');
  add('letters-greek-final-sigma', 'ΣΊΣΥΦΟΣ σίσυφος');
  add('letters-turkish', 'İstanbul ıi İI');
  // Punctuation and symbols next to letters, slashes and newlines (GPT-4o keeps "/" with \r\n).
  add('punct-slash-newline', 'a/\nb //\r\n c\\/\n');
  add('punct-runs', '...!!!??? --- *** ### @@@');
  add('punct-before-letters', '#include <stdio.h> @user $var %d &amp;');
  add('punct-unicode', '«guillemets» „quotes“ ¡hola! ¿qué? — – …');
  add('symbols-math-currency', '∑∫√∞ ≤≥≠ €£¥₹ $100 ©®™');
  add('code-snippet', 'def f(x):\n    return x**2  # square\n\tif a!=b: pass\r\n');
  add('url-email', 'https://example.com/a/b?c=1&d=2 user@example.org');
  // Mixed everything.
  add('mixed-dense', 'Ünïcödé 123 日本語 🇯🇵 it’s\r\n٣٤ ǅ ʰ\u0301!');
  add('control-and-format', 'a\u0000b\u0007c\u200bd\ufeffe\u00adf');
  return cases;
}

module.exports = { edgeCases };
