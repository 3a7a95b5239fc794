// SPDX-License-Identifier: MIT
// /v1/responses (the OpenAI Responses API, stateless mode) through the official openai Node SDK:
// plain and streamed responses, a forced function call, the function_call_output loop both with
// the items re-sent and with previous_response_id (served from the prefix cache: cached_tokens).
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { answerSchema, checkAnswer, checkWeatherArguments, model, openai, parseJson, responseTools } from './common.mjs';

const forceWeather = { type: 'function', name: 'get_weather' };
const answerText = { format: { type: 'json_schema', name: 'answer', schema: answerSchema, strict: true } };

function functionCalls(response) {
  return response.output.filter((item) => item.type === 'function_call');
}

test('responses: a plain response with usage', async () => {
  const response = await openai.responses.create({ model: await model(), instructions: 'Be brief.', input: 'Hello', max_output_tokens: 16 });
  assert.equal(response.object, 'response');
  assert.ok(['completed', 'incomplete'].includes(response.status), `status ${response.status}`);
  assert.equal(typeof response.output_text, 'string');
  assert.ok(response.usage.input_tokens > 0);
  assert.ok(response.usage.output_tokens <= 16);
  assert.equal(response.usage.total_tokens, response.usage.input_tokens + response.usage.output_tokens);
});

test('responses: input as message items', async () => {
  const response = await openai.responses.create({
    model: await model(), max_output_tokens: 8,
    input: [{ role: 'system', content: 'Be brief.' }, { role: 'user', content: [{ type: 'input_text', text: 'Hello' }] }],
  });
  assert.ok(['completed', 'incomplete'].includes(response.status), `status ${response.status}`);
});

test('responses: streamed events, their text equals the greedy unstreamed response', async () => {
  const request = { model: await model(), input: 'Tell me a story', max_output_tokens: 12, temperature: 0 };
  const whole = await openai.responses.create(request);
  const events = [];
  for await (const event of await openai.responses.create({ ...request, stream: true })) events.push(event);
  const types = events.map((e) => e.type);
  assert.equal(types[0], 'response.created', `the first event: ${types.join(', ')}`);
  const last = events[events.length - 1];
  assert.ok(['response.completed', 'response.incomplete'].includes(last.type), `the last event: ${types.join(', ')}`);
  for (const expected of ['response.output_item.added', 'response.content_part.added', 'response.output_text.done', 'response.output_item.done'])
    assert.ok(types.includes(expected), `expected a ${expected} event among ${types.join(', ')}`);
  const numbers = events.map((e) => e.sequence_number);
  assert.deepEqual(numbers, [...numbers].sort((a, b) => a - b), 'sequence_number increases');
  const text = events.filter((e) => e.type === 'response.output_text.delta').map((e) => e.delta).join('');
  assert.equal(text, whole.output_text);
  assert.equal(last.response.output_text ?? last.response.output.flatMap((i) => i.content ?? []).map((c) => c.text).join(''), whole.output_text);
  // The SDK's stream helper assembles the same response.
  const final = await openai.responses.stream(request).finalResponse();
  assert.equal(final.output_text, whole.output_text);
});

test('responses: a forced function call, streamed and not', async () => {
  const request = { model: await model(), input: 'What is the weather in Paris?', tools: responseTools, tool_choice: forceWeather, max_output_tokens: 256, temperature: 0 };
  const response = await openai.responses.create(request);
  const calls = functionCalls(response);
  assert.equal(calls.length >= 1, true, `expected a function_call output item, got ${JSON.stringify(response.output)}`);
  assert.equal(calls[0].name, 'get_weather');
  assert.ok(calls[0].call_id, 'a function_call has a call_id');
  checkWeatherArguments(parseJson(calls[0].arguments, 'function_call arguments'), assert, 'get_weather arguments');

  const events = [];
  for await (const event of await openai.responses.create({ ...request, stream: true })) events.push(event);
  const deltas = events.filter((e) => e.type === 'response.function_call_arguments.delta').map((e) => e.delta).join('');
  const done = events.find((e) => e.type === 'response.function_call_arguments.done');
  assert.ok(done, `expected a response.function_call_arguments.done event among ${events.map((e) => e.type).join(', ')}`);
  assert.equal(deltas, done.arguments);
  assert.equal(done.arguments, calls[0].arguments);
});

test('responses: the function_call_output loop, re-sent and by previous_response_id, gives one answer; the latter from the cache', async () => {
  const question = [{ role: 'user', content: 'What is the weather in Paris?' }];
  const first = await openai.responses.create({ model: await model(), input: question, tools: responseTools, tool_choice: forceWeather, max_output_tokens: 256, temperature: 0 });
  const call = functionCalls(first)[0];
  assert.ok(call, `expected a forced function_call, got ${JSON.stringify(first.output)}`);
  const result = { type: 'function_call_output', call_id: call.call_id, output: JSON.stringify({ temperature: 21, sky: 'clear' }) };
  const follow = { model: await model(), tools: responseTools, tool_choice: 'none', text: answerText, max_output_tokens: 128, temperature: 0 };

  const chained = await openai.responses.create({ ...follow, previous_response_id: first.id, input: [result] });
  assert.equal(functionCalls(chained).length, 0, 'tool_choice "none": no function call');
  checkAnswer(parseJson(chained.output_text, 'the structured answer'), assert, 'the answer by previous_response_id');
  const cached = chained.usage.input_tokens_details?.cached_tokens;
  assert.ok(cached > 0, `previous_response_id should resume from the prefix cache: usage.input_tokens_details.cached_tokens is ${cached}`);

  const resent = await openai.responses.create({ ...follow, input: [...question, ...first.output, result] });
  assert.equal(resent.output_text, chained.output_text, 'the re-sent items and previous_response_id give the same greedy answer');
  assert.equal(resent.usage.input_tokens, chained.usage.input_tokens, 'both render the same conversation');
});

test('responses: an unknown previous_response_id is refused with a 4xx', async () => {
  await assert.rejects(openai.responses.create({ model: await model(), input: 'Hi', previous_response_id: 'resp_unknown', max_output_tokens: 4 }),
    (error) => error.status >= 400 && error.status < 500 && error.message.includes('resp_unknown'), 'expected a client error naming the unknown response id');
});
