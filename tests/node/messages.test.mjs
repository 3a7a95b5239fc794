// SPDX-License-Identifier: MIT
// /v1/messages (the Anthropic Messages API) through the official @anthropic-ai/sdk: plain and
// streamed messages (the SDK's stream helper and finalMessage()), a tool forced by tool_choice
// {type: "tool"}, the tool_use -> tool_result loop, count_tokens and the x-api-key check.
import assert from 'node:assert/strict';
import { test } from 'node:test';

import Anthropic from '@anthropic-ai/sdk';

import { anthropic, anthropicTools, baseURL, checkWeatherArguments, model } from './common.mjs';

const question = [{ role: 'user', content: 'What is the weather in Paris?' }];
const forceWeather = { type: 'tool', name: 'get_weather' };

// The whole prompt of a message's usage: Anthropic counts the tokens read from (or written to) its
// cache apart from input_tokens.
function promptTokens(usage) {
  return usage.input_tokens + (usage.cache_read_input_tokens ?? 0) + (usage.cache_creation_input_tokens ?? 0);
}

function textOf(message) {
  return message.content.filter((b) => b.type === 'text').map((b) => b.text).join('');
}

test('messages: a plain message with usage', async () => {
  const message = await anthropic.messages.create({ model: await model(), max_tokens: 16, system: 'Be brief.', messages: [{ role: 'user', content: 'Hello' }] });
  assert.equal(message.type, 'message');
  assert.equal(message.role, 'assistant');
  assert.ok(message.id);
  for (const block of message.content) assert.equal(block.type, 'text');
  assert.ok(['end_turn', 'max_tokens'].includes(message.stop_reason), `stop_reason ${message.stop_reason}`);
  assert.ok(promptTokens(message.usage) > 0);
  assert.ok(message.usage.output_tokens <= 16);
});

test('messages: a streamed message (stream helper, finalMessage) equals the greedy unstreamed one', async () => {
  const request = { model: await model(), max_tokens: 12, temperature: 0, messages: [{ role: 'user', content: 'Tell me a story' }] };
  const whole = await anthropic.messages.create(request);
  const stream = anthropic.messages.stream(request);
  let text = '';
  stream.on('text', (delta) => { text += delta; });
  const final = await stream.finalMessage();
  assert.equal(text, textOf(whole));
  assert.equal(textOf(final), textOf(whole));
  assert.equal(final.stop_reason, whole.stop_reason);
  assert.equal(final.usage.output_tokens, whole.usage.output_tokens);
});

test('messages: the raw event sequence', async () => {
  const events = [];
  for await (const event of await anthropic.messages.create({ model: await model(), max_tokens: 8, stream: true, messages: [{ role: 'user', content: 'Hi' }] })) events.push(event.type);
  assert.equal(events[0], 'message_start', events.join(', '));
  assert.equal(events[events.length - 1], 'message_stop', events.join(', '));
  assert.ok(events.includes('message_delta'), `expected message_delta among ${events.join(', ')}`);
});

test('messages: tool_choice {type: "tool"} forces a tool_use block, streamed and not', async () => {
  const request = { model: await model(), max_tokens: 256, temperature: 0, messages: question, tools: anthropicTools, tool_choice: forceWeather };
  const message = await anthropic.messages.create(request);
  const uses = message.content.filter((b) => b.type === 'tool_use');
  assert.ok(uses.length >= 1, `expected a tool_use block (the server constrains the output to a get_weather call), got ${JSON.stringify(message.content)}`);
  assert.equal(uses[0].name, 'get_weather');
  assert.ok(uses[0].id, 'a tool_use block has an id');
  assert.equal(typeof uses[0].input, 'object', 'tool_use input is an object');
  checkWeatherArguments(uses[0].input, assert, 'tool_use input');
  assert.equal(message.stop_reason, 'tool_use');

  const final = await anthropic.messages.stream(request).finalMessage();
  const streamed = final.content.filter((b) => b.type === 'tool_use');
  assert.ok(streamed.length >= 1, `expected a streamed tool_use block, got ${JSON.stringify(final.content)}`);
  assert.deepEqual(streamed[0].input, uses[0].input, 'the SDK assembles the input_json_delta pieces into the same input');
  assert.equal(final.stop_reason, 'tool_use');
});

test('messages: the tool_use -> tool_result loop answers and resumes from the cache', async () => {
  const first = await anthropic.messages.create({ model: await model(), max_tokens: 256, messages: question, tools: anthropicTools, tool_choice: forceWeather });
  const use = first.content.find((b) => b.type === 'tool_use');
  assert.ok(use, `expected a forced tool_use block, got ${JSON.stringify(first.content)}`);
  const messages = [
    ...question,
    { role: 'assistant', content: first.content },
    { role: 'user', content: [{ type: 'tool_result', tool_use_id: use.id, content: JSON.stringify({ temperature: 21, sky: 'clear' }) }] },
  ];
  const second = await anthropic.messages.create({ model: await model(), max_tokens: 24, messages, tools: anthropicTools, tool_choice: { type: 'none' } });
  assert.ok(['end_turn', 'max_tokens'].includes(second.stop_reason), `tool_choice none: stop_reason ${second.stop_reason}`);
  for (const block of second.content) assert.equal(block.type, 'text', 'tool_choice none: text only');
  const cached = second.usage.cache_read_input_tokens;
  assert.ok(cached > 0, `the second turn should resume from the prefix cache: usage.cache_read_input_tokens is ${cached}`);
});

test('messages: stop_sequences end the greedy reply before the sequence', async (t) => {
  const request = { model: await model(), max_tokens: 32, temperature: 0, messages: [{ role: 'user', content: 'Tell me a story' }] };
  const free = textOf(await anthropic.messages.create(request));
  const chars = Array.from(free);
  if (chars.length < 8) {
    t.skip(`the greedy reply is too short to take a stop sequence from: ${JSON.stringify(free)}`);
    return;
  }
  const stop = chars.slice(4, 7).join('');
  const stopped = await anthropic.messages.create({ ...request, stop_sequences: [stop] });
  assert.equal(stopped.stop_reason, 'stop_sequence', `expected stop_reason "stop_sequence" for ${JSON.stringify(stop)} in ${JSON.stringify(free)}`);
  assert.equal(stopped.stop_sequence, stop);
  assert.equal(textOf(stopped), free.slice(0, free.indexOf(stop)));
  // With several sequences, Anthropic names the one that matched.
  const among = await anthropic.messages.create({ ...request, stop_sequences: ['#never#', stop] });
  assert.equal(among.stop_reason, 'stop_sequence');
  assert.equal(among.stop_sequence, stop, 'stop_sequence names the sequence that matched, among several');
  assert.equal(textOf(among), textOf(stopped));
});

test('messages: count_tokens equals the input_tokens a message reports', async () => {
  const request = { model: await model(), system: 'Be brief.', messages: question, tools: anthropicTools };
  const counted = await anthropic.messages.countTokens(request);
  assert.ok(counted.input_tokens > 0);
  const message = await anthropic.messages.create({ ...request, max_tokens: 1 });
  assert.equal(counted.input_tokens, promptTokens(message.usage), `count_tokens vs the message's usage ${JSON.stringify(message.usage)}`);
});

test('messages: a wrong x-api-key is refused with a 401', async () => {
  const stranger = new Anthropic({ baseURL, apiKey: 'wrong-key', maxRetries: 0 });
  await assert.rejects(stranger.messages.create({ model: await model(), max_tokens: 4, messages: [{ role: 'user', content: 'Hi' }] }), Anthropic.AuthenticationError);
});
