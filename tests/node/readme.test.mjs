// SPDX-License-Identifier: MIT
// The Node examples of README.md's "Using mambacpp from agent SDKs" run as written: its ```js
// blocks, joined in order (they share their variables), against this server (its URL, key and
// model name in place of the README's).
import assert from 'node:assert/strict';
import { readFileSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { test } from 'node:test';
import { fileURLToPath, pathToFileURL } from 'node:url';

import { apiKey, baseURL, model } from './common.mjs';

const here = dirname(fileURLToPath(import.meta.url));

function readmeExamples() {
  const readme = readFileSync(join(here, '..', '..', 'README.md'), 'utf8');
  const start = readme.indexOf('\n## Using mambacpp from agent SDKs\n');
  assert.ok(start >= 0, 'README.md has a section "Using mambacpp from agent SDKs"');
  const end = readme.indexOf('\n## ', start + 1);
  const section = readme.slice(start, end < 0 ? undefined : end);
  const blocks = [...section.matchAll(/```js\n([\s\S]*?)```/g)].map((m) => m[1]);
  assert.ok(blocks.length >= 3, `expected the section's Node examples, found ${blocks.length} js blocks`);
  return blocks.join('\n');
}

test('readme: the Node examples of "Using mambacpp from agent SDKs" run as written', async () => {
  const name = await model();
  const code = readmeExamples()
    .replaceAll('http://127.0.0.1:8080', baseURL)
    .replaceAll("apiKey: 'secret'", `apiKey: ${JSON.stringify(apiKey)}`)
    .replaceAll("model: 'tiny'", `model: ${JSON.stringify(name)}`)
    .replaceAll('console.log(', 'void (');
  // Written next to this file, so that its imports resolve to tests/node/node_modules.
  const file = join(here, `.readme_example_${process.pid}.mjs`);
  writeFileSync(file, code);
  try {
    await import(pathToFileURL(file).href);
  } finally {
    rmSync(file, { force: true });
  }
});
