// SPDX-License-Identifier: MIT
// What the SDK tests share: clients of the server run.sh started ($MB_BASE_URL, $MB_API_KEY), the
// model's name, and the tools the tests offer. The model is tiny and random, so a test never relies
// on what it would choose: a call is forced with a named tool_choice (which the server enforces by
// constraining the output) and a free answer is bounded by max_tokens; the arguments' schemas use
// enums, so a forced call is short and always complete.
import Anthropic from '@anthropic-ai/sdk';
import OpenAI from 'openai';

export const baseURL = process.env.MB_BASE_URL;
export const apiKey = process.env.MB_API_KEY;
if (!baseURL || !apiKey) throw new Error('MB_BASE_URL and MB_API_KEY are unset: run the tests through tests/node/run.sh');

// No retries: a failure is reported as the server's first answer.
export const openai = new OpenAI({ baseURL: `${baseURL}/v1`, apiKey, maxRetries: 0, timeout: 60_000 });
export const anthropic = new Anthropic({ baseURL, apiKey, maxRetries: 0, timeout: 60_000 });

let modelId;
// The served model's id, as /v1/models lists it.
export async function model() {
  if (!modelId) {
    const page = await openai.models.list();
    modelId = page.data[0].id;
  }
  return modelId;
}

export const weatherParameters = {
  type: 'object',
  properties: {
    city: { type: 'string', enum: ['Paris', 'Oslo', 'Lima'] },
    unit: { type: 'string', enum: ['celsius', 'fahrenheit'] },
  },
  required: ['city', 'unit'],
  additionalProperties: false,
};
export const timeParameters = {
  type: 'object',
  properties: { zone: { type: 'string', enum: ['UTC', 'CET'] } },
  required: ['zone'],
  additionalProperties: false,
};

// Chat Completions' tool list.
export const chatTools = [
  { type: 'function', function: { name: 'get_weather', description: 'The weather in a city', parameters: weatherParameters } },
  { type: 'function', function: { name: 'get_time', description: 'The time in a zone', parameters: timeParameters } },
];
// The Responses API's (flat) tool list.
export const responseTools = chatTools.map((t) => ({ type: 'function', name: t.function.name, description: t.function.description, parameters: t.function.parameters, strict: true }));
// The Messages API's tool list.
export const anthropicTools = chatTools.map((t) => ({ name: t.function.name, description: t.function.description, input_schema: t.function.parameters }));

// A bounded final answer the random model cannot leave empty: a JSON object with required enum
// keys (json_schema response_format).
export const answerSchema = {
  type: 'object',
  properties: {
    summary: { type: 'string', enum: ['sunny', 'rainy', 'cloudy'] },
    confident: { type: 'boolean' },
  },
  required: ['summary', 'confident'],
  additionalProperties: false,
};

// Parses JSON, failing with the text that did not parse and what was expected of it.
export function parseJson(text, what) {
  try {
    return JSON.parse(text);
  } catch (error) {
    throw new Error(`${what}: expected valid JSON, got ${JSON.stringify(text)} (${error.message})`);
  }
}

// Checks a weather call's arguments (an object): the required keys with allowed values.
export function checkWeatherArguments(args, assert, what) {
  assert.ok(weatherParameters.properties.city.enum.includes(args.city), `${what}: city ${JSON.stringify(args.city)} is not one of the schema's enum`);
  assert.ok(weatherParameters.properties.unit.enum.includes(args.unit), `${what}: unit ${JSON.stringify(args.unit)} is not one of the schema's enum`);
}

// Checks an answer object against answerSchema.
export function checkAnswer(answer, assert, what) {
  assert.deepEqual(Object.keys(answer).sort(), ['confident', 'summary'], `${what}: expected exactly the schema's required keys`);
  assert.ok(answerSchema.properties.summary.enum.includes(answer.summary), `${what}: summary ${JSON.stringify(answer.summary)} is not in the enum`);
  assert.equal(typeof answer.confident, 'boolean', `${what}: confident must be a boolean`);
}
