// SPDX-License-Identifier: MIT
// /v1/chat/completions through the official openai Node SDK: plain and streamed replies, tool calls
// forced by tool_choice (named and required, streamed and not), the tool loop (the call, its result
// sent back as role "tool", an answer) and response_format json_schema / json_object.
import assert from 'node:assert/strict';
import { test } from 'node:test';

import OpenAI from 'openai';

import { answerSchema, chatTools, checkAnswer, checkWeatherArguments, model, openai, parseJson, timeParameters } from './common.mjs';

const question = [{ role: 'user', content: 'What is the weather in Paris?' }];
const answerFormat = { type: 'json_schema', json_schema: { name: 'answer', schema: answerSchema, strict: true } };

// The assembled tool calls of a stream of chunks, as OpenAI sends them: a call's first piece has
// its index, id, type and name, later pieces argument fragments.
function assembleToolCalls(chunks) {
  const calls = [];
  for (const chunk of chunks) {
    for (const piece of chunk.choices[0]?.delta?.tool_calls ?? []) {
      if (!calls[piece.index]) {
        assert.ok(piece.id, `the first delta of tool call ${piece.index} must carry its id: ${JSON.stringify(piece)}`);
        assert.equal(piece.type, 'function', `the first delta of tool call ${piece.index} must say type "function"`);
        assert.ok(piece.function?.name, `the first delta of tool call ${piece.index} must carry the function's name`);
        calls[piece.index] = { id: piece.id, name: piece.function.name, arguments: piece.function.arguments ?? '' };
      } else {
        assert.equal(piece.id, undefined, 'only a tool call\'s first delta carries its id');
        calls[piece.index].arguments += piece.function?.arguments ?? '';
      }
    }
  }
  return calls;
}

test('chat: a plain reply with usage', async () => {
  const reply = await openai.chat.completions.create({ model: await model(), messages: [{ role: 'user', content: 'Hello' }], max_tokens: 8, seed: 1 });
  assert.equal(reply.object, 'chat.completion');
  assert.equal(reply.choices.length, 1);
  const choice = reply.choices[0];
  assert.equal(choice.message.role, 'assistant');
  assert.equal(typeof choice.message.content, 'string');
  assert.ok(['stop', 'length'].includes(choice.finish_reason), `finish_reason ${choice.finish_reason}`);
  assert.ok(reply.usage.prompt_tokens > 0);
  assert.ok(reply.usage.completion_tokens <= 8);
});

test('chat: a streamed reply equals the same greedy reply unstreamed', async () => {
  const request = { model: await model(), messages: [{ role: 'user', content: 'Tell me a story' }], max_tokens: 12, temperature: 0 };
  const whole = await openai.chat.completions.create(request);
  const stream = await openai.chat.completions.create({ ...request, stream: true, stream_options: { include_usage: true } });
  let text = '';
  let finish = null;
  let usage = null;
  for await (const chunk of stream) {
    assert.equal(chunk.object, 'chat.completion.chunk');
    if (chunk.usage) usage = chunk.usage;
    if (chunk.choices.length === 0) continue;
    text += chunk.choices[0].delta.content ?? '';
    if (chunk.choices[0].finish_reason) finish = chunk.choices[0].finish_reason;
  }
  assert.equal(text, whole.choices[0].message.content);
  assert.equal(finish, whole.choices[0].finish_reason);
  assert.ok(usage, 'stream_options.include_usage: expected a final chunk with usage');
  assert.equal(usage.completion_tokens, whole.usage.completion_tokens);
});

test('chat: tool_choice naming a function forces that call', async () => {
  const reply = await openai.chat.completions.create({
    model: await model(), messages: question, tools: chatTools, max_tokens: 256,
    tool_choice: { type: 'function', function: { name: 'get_weather' } },
  });
  const choice = reply.choices[0];
  assert.ok(choice.message.tool_calls?.length >= 1, `expected message.tool_calls (the server constrains the output to a get_weather call), got ${JSON.stringify(choice.message)}`);
  const call = choice.message.tool_calls[0];
  assert.equal(call.type, 'function');
  assert.ok(typeof call.id === 'string' && call.id.length > 0, 'a tool call has an id');
  assert.equal(call.function.name, 'get_weather');
  checkWeatherArguments(parseJson(call.function.arguments, 'tool call arguments (a JSON string)'), assert, 'get_weather arguments');
  assert.equal(choice.finish_reason, 'tool_calls');
});

test('chat: tool_choice "auto" and "none" leave the random model free: text, or well-formed calls', async () => {
  for (const tool_choice of ['auto', 'none']) {
    for (const seed of [1, 2]) {
      const reply = await openai.chat.completions.create({ model: await model(), messages: question, tools: chatTools, tool_choice, max_tokens: 32, seed });
      const choice = reply.choices[0];
      const calls = choice.message.tool_calls ?? [];
      if (tool_choice === 'none') assert.equal(calls.length, 0, 'tool_choice "none": no tool call');
      for (const call of calls) {
        assert.ok(['get_weather', 'get_time'].includes(call.function.name), `a parsed call names an offered tool: ${call.function.name}`);
        parseJson(call.function.arguments, 'a parsed call\'s arguments');
      }
      assert.equal(choice.finish_reason, calls.length > 0 ? 'tool_calls' : choice.finish_reason === 'length' ? 'length' : 'stop');
      if (calls.length === 0) assert.equal(typeof choice.message.content, 'string');
    }
  }
});

test('chat: tool_choice "required" forces a call to one of the tools', async () => {
  const reply = await openai.chat.completions.create({ model: await model(), messages: question, tools: chatTools, tool_choice: 'required', max_tokens: 256, seed: 7 });
  const choice = reply.choices[0];
  assert.ok(choice.message.tool_calls?.length >= 1, `expected message.tool_calls for tool_choice "required", got ${JSON.stringify(choice.message)}`);
  for (const call of choice.message.tool_calls) {
    const args = parseJson(call.function.arguments, `${call.function.name} arguments`);
    if (call.function.name === 'get_weather') checkWeatherArguments(args, assert, 'get_weather arguments');
    else {
      assert.equal(call.function.name, 'get_time', 'a call names one of the offered tools');
      assert.ok(timeParameters.properties.zone.enum.includes(args.zone), `get_time zone ${JSON.stringify(args.zone)}`);
    }
  }
  assert.equal(choice.finish_reason, 'tool_calls');
});

test('chat: a streamed forced call arrives as delta.tool_calls and equals the unstreamed one', async () => {
  const request = {
    model: await model(), messages: question, tools: chatTools, max_tokens: 256, temperature: 0,
    tool_choice: { type: 'function', function: { name: 'get_weather' } },
  };
  const whole = await openai.chat.completions.create(request);
  const chunks = [];
  for await (const chunk of await openai.chat.completions.create({ ...request, stream: true })) chunks.push(chunk);
  const calls = assembleToolCalls(chunks);
  assert.ok(calls.length >= 1, 'expected delta.tool_calls pieces in the stream');
  assert.equal(calls[0].name, 'get_weather');
  checkWeatherArguments(parseJson(calls[0].arguments, 'streamed arguments'), assert, 'streamed get_weather arguments');
  const finish = chunks.map((c) => c.choices[0]?.finish_reason).filter(Boolean);
  assert.deepEqual(finish, ['tool_calls'], 'one finish_reason, "tool_calls"');
  assert.equal(calls[0].arguments, whole.choices[0].message.tool_calls?.[0]?.function.arguments);
  // The SDK's own stream helper assembles the same call.
  const final = await openai.chat.completions.stream(request).finalChatCompletion();
  assert.equal(final.choices[0].message.tool_calls[0].function.arguments, calls[0].arguments);
});

test('chat: the tool loop (forced call, role "tool" result, structured answer) resumes from the cache', async () => {
  const first = await openai.chat.completions.create({
    model: await model(), messages: question, tools: chatTools, max_tokens: 256,
    tool_choice: { type: 'function', function: { name: 'get_weather' } },
  });
  const call = first.choices[0].message.tool_calls?.[0];
  assert.ok(call, `expected a forced get_weather call, got ${JSON.stringify(first.choices[0].message)}`);
  const messages = [
    ...question,
    first.choices[0].message,
    { role: 'tool', tool_call_id: call.id, content: JSON.stringify({ temperature: 21, sky: 'clear' }) },
  ];
  const second = await openai.chat.completions.create({ model: await model(), messages, tools: chatTools, tool_choice: 'none', response_format: answerFormat, max_tokens: 128 });
  const choice = second.choices[0];
  assert.ok(!(choice.message.tool_calls?.length > 0), 'tool_choice "none": no tool call');
  assert.equal(choice.finish_reason, 'stop');
  checkAnswer(parseJson(choice.message.content, 'the structured answer'), assert, 'the answer after the tool result');
  const cached = second.usage.prompt_tokens_details?.cached_tokens;
  assert.ok(cached > 0, `the second turn should resume from the prefix cache: usage.prompt_tokens_details.cached_tokens is ${cached}`);
});

test('chat: response_format json_schema output parses and has the required keys', async () => {
  for (const seed of [1, 2, 3]) {
    const reply = await openai.chat.completions.create({ model: await model(), messages: [{ role: 'user', content: 'Describe the weather as JSON' }], response_format: answerFormat, max_tokens: 128, seed, temperature: 1 });
    checkAnswer(parseJson(reply.choices[0].message.content, `json_schema output (seed ${seed})`), assert, `seed ${seed}`);
  }
});

test('chat: response_format json_object output is a JSON object', async () => {
  const reply = await openai.chat.completions.create({ model: await model(), messages: [{ role: 'user', content: 'Reply in JSON' }], response_format: { type: 'json_object' }, max_tokens: 256, seed: 4 });
  const choice = reply.choices[0];
  assert.match(choice.message.content, /^\s*\{/, 'json_object: the output is constrained to start an object');
  if (choice.finish_reason === 'length') return; // an object may be longer than max_tokens
  const value = parseJson(choice.message.content, 'json_object output');
  assert.ok(value !== null && typeof value === 'object' && !Array.isArray(value), `expected an object, got ${choice.message.content}`);
});

test('chat: a malformed schema is refused with a 400 that names the problem', async () => {
  await assert.rejects(
    openai.chat.completions.create({ model: await model(), messages: question, max_tokens: 8, response_format: { type: 'json_schema', json_schema: { name: 'bad', schema: { type: 'frobnicate' } } } }),
    (error) => error instanceof OpenAI.BadRequestError && /frobnicate|type/.test(error.message),
    'expected a 400 naming the schema\'s bad type');
});

test('chat: a wrong API key is refused with a 401', async () => {
  const stranger = new OpenAI({ baseURL: openai.baseURL, apiKey: 'wrong-key', maxRetries: 0 });
  await assert.rejects(stranger.chat.completions.create({ model: await model(), messages: question, max_tokens: 4 }), OpenAI.AuthenticationError);
});
