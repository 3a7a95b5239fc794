// SPDX-License-Identifier: MIT
// /v1/embeddings through the official openai Node SDK: float vectors (L2-normalised, one per input,
// the same whatever the batch), base64 (which the SDK requests by default and decodes itself) and
// a refused `dimensions`.
import assert from 'node:assert/strict';
import { test } from 'node:test';

import OpenAI from 'openai';

import { model, openai } from './common.mjs';

const inputs = ['The cat sat on the mat.', 'A longer sentence about the weather in Paris today.', 'x'];

function norm(vector) {
  return Math.sqrt(vector.reduce((sum, v) => sum + v * v, 0));
}

test('embeddings: float vectors, one per input, L2-normalised', async () => {
  const result = await openai.embeddings.create({ model: await model(), input: inputs, encoding_format: 'float' });
  assert.equal(result.object, 'list');
  assert.equal(result.data.length, inputs.length);
  const width = result.data[0].embedding.length;
  assert.ok(width > 0);
  result.data.forEach((item, i) => {
    assert.equal(item.object, 'embedding');
    assert.equal(item.index, i);
    assert.equal(item.embedding.length, width);
    assert.ok(Math.abs(norm(item.embedding) - 1) < 1e-4, `embedding ${i} has norm ${norm(item.embedding)}, expected 1 (L2-normalised)`);
  });
  assert.ok(result.usage.prompt_tokens > 0);
});

test('embeddings: base64 (the SDK\'s default request, decoded by it) equals float bit for bit', async () => {
  const asFloat = await openai.embeddings.create({ model: await model(), input: inputs, encoding_format: 'float' });
  const byDefault = await openai.embeddings.create({ model: await model(), input: inputs });
  const asBase64 = await openai.embeddings.create({ model: await model(), input: inputs, encoding_format: 'base64' });
  for (let i = 0; i < inputs.length; ++i) {
    const floats = asFloat.data[i].embedding.map(Math.fround);
    assert.deepEqual(Array.from(byDefault.data[i].embedding), floats, `input ${i}: the SDK's decoded base64 differs from the float vector`);
    const raw = asBase64.data[i].embedding;
    assert.equal(typeof raw, 'string', 'encoding_format "base64" given explicitly: the SDK returns the string');
    const bytes = Buffer.from(raw, 'base64');
    assert.equal(bytes.length, floats.length * 4, 'base64 holds little-endian float32 values');
    const decoded = Array.from({ length: floats.length }, (_, k) => bytes.readFloatLE(4 * k));
    assert.deepEqual(decoded, floats);
  }
});

test('embeddings: an input alone equals it in a batch, bit for bit', async () => {
  const batch = await openai.embeddings.create({ model: await model(), input: inputs, encoding_format: 'float' });
  for (let i = 0; i < inputs.length; ++i) {
    const alone = await openai.embeddings.create({ model: await model(), input: inputs[i], encoding_format: 'float' });
    assert.equal(alone.data.length, 1);
    assert.deepEqual(alone.data[0].embedding, batch.data[i].embedding, `input ${i} alone differs from the batch's`);
  }
});

test('embeddings: token ids are accepted as input', async () => {
  const result = await openai.embeddings.create({ model: await model(), input: [[1, 2, 3], [4, 5]], encoding_format: 'float' });
  assert.equal(result.data.length, 2);
  assert.equal(result.usage.prompt_tokens, 5);
});

test('embeddings: dimensions other than the model\'s is refused with a 400', async () => {
  const result = await openai.embeddings.create({ model: await model(), input: 'hello', encoding_format: 'float' });
  const width = result.data[0].embedding.length;
  await assert.rejects(openai.embeddings.create({ model: await model(), input: 'hello', dimensions: width + 1 }),
    (error) => error instanceof OpenAI.BadRequestError && /dimensions/.test(error.message), 'expected a 400 naming dimensions');
});
