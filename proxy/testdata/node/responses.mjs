// The Responses API clients of today against a running gateway: the
// official OpenAI Node SDK (responses.create), the Vercel AI SDK's default
// OpenAI provider (ai + @ai-sdk/openai) and LangChain JS with
// useResponsesApi. TestNodeResponsesClients (proxy/responses_node_test.go)
// starts the gateway and fake upstreams and runs `node responses.mjs` with
// PGW_BASE_URL set; every check that fails throws and the script exits
// non-zero. Expected answers come in PGW_EXPECT (JSON):
//
//	content   the text of model gpt-4o, reasoning its reasoning text
//	json      the object model json answers
//	prefix    what model cut relays before its stream is cut
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import { createOpenAI } from '@ai-sdk/openai';
import { APICallError, generateObject, generateText, jsonSchema, stepCountIs, streamText, tool } from 'ai';
import { ChatOpenAI } from '@langchain/openai';
import { z } from 'zod';

const expect = JSON.parse(process.env.PGW_EXPECT);
const baseURL = process.env.PGW_BASE_URL;
const apiKey = 'client-key';
const client = new OpenAI({ baseURL, apiKey, maxRetries: 0, timeout: 20_000 });
const provider = createOpenAI({ baseURL, apiKey });
const weatherParams = { type: 'object', properties: { city: { type: 'string' } }, required: ['city'], additionalProperties: false };
const tools = [{ type: 'function', name: 'get_weather', description: 'the weather in a city', parameters: weatherParams, strict: true }];
const weather = { city: 'Paris' };
const person = { type: 'object', properties: { city: { type: 'string' }, temp: { type: 'number' } }, required: ['city', 'temp'], additionalProperties: false };
const langchain = (model, extra = {}) => new ChatOpenAI({ model, apiKey, useResponsesApi: true, maxRetries: 0, configuration: { baseURL }, ...extra });

// usageOK checks a Responses usage object.
function usageOK(u) {
  assert.ok(u.input_tokens > 0 && u.output_tokens > 0, JSON.stringify(u));
  assert.equal(u.total_tokens, u.input_tokens + u.output_tokens);
}

const checks = {
  async sdkCreate() {
    const r = await client.responses.create({ model: 'gpt-4o', input: 'hello', instructions: 'be terse', max_output_tokens: 64, temperature: 0.2, store: false });
    assert.equal(r.object, 'response');
    assert.equal(r.status, 'completed');
    assert.equal(r.output_text, expect.content);
    assert.equal(r.model, expect.model);
    usageOK(r.usage);
    const reasoning = r.output.find((o) => o.type === 'reasoning');
    assert.equal(reasoning.summary[0].text, expect.reasoning);
    assert.equal(r.gateway.route, 'gpt-4o');
  },
  async sdkStream() {
    const s = await client.responses.create({ model: 'gpt-4o', input: [{ role: 'user', content: [{ type: 'input_text', text: 'hello' }] }], stream: true });
    let text = '', reasoning = '', completed = null, types = [];
    for await (const ev of s) {
      types.push(ev.type);
      if (ev.type === 'response.output_text.delta') text += ev.delta;
      if (ev.type === 'response.reasoning_summary_text.delta') reasoning += ev.delta;
      if (ev.type === 'response.completed') completed = ev.response;
    }
    assert.equal(text, expect.content);
    assert.equal(reasoning, expect.reasoning);
    assert.equal(types[0], 'response.created');
    assert.equal(types.at(-1), 'response.completed');
    assert.equal(completed.output_text, expect.content);
    usageOK(completed.usage);
  },
  async sdkStreamHelper() {
    const s = client.responses.stream({ model: 'gpt-4o', input: 'hello' });
    const final = await s.finalResponse();
    assert.equal(final.output_text, expect.content);
    usageOK(final.usage);
  },
  async sdkTools() {
    const r = await client.responses.create({ model: 'tools', input: 'weather in Paris?', tools, tool_choice: 'auto', parallel_tool_calls: false });
    const call = r.output.find((o) => o.type === 'function_call');
    assert.equal(call.name, 'get_weather');
    assert.equal(call.call_id, 'call_1');
    assert.deepEqual(JSON.parse(call.arguments), weather);
    usageOK(r.usage);
    // The tool's answer, sent back with the call: the next turn.
    const next = await client.responses.create({
      model: 'gpt-4o', tools,
      input: [{ role: 'user', content: 'weather in Paris?' }, ...r.output, { type: 'function_call_output', call_id: call.call_id, output: '{"temp":21}' }],
    });
    assert.equal(next.output_text, expect.content);
  },
  async sdkToolsStream() {
    const s = client.responses.stream({ model: 'tools', input: 'weather in Paris?', tools });
    let args = '';
    s.on('response.function_call_arguments.delta', (ev) => { args += ev.delta; });
    const final = await s.finalResponse();
    const call = final.output.find((o) => o.type === 'function_call');
    assert.equal(call.name, 'get_weather');
    assert.deepEqual(JSON.parse(call.arguments), weather);
    assert.equal(args, call.arguments);
    usageOK(final.usage);
  },
  async sdkJSONSchema() {
    const r = await client.responses.create({ model: 'json', input: 'weather?', text: { format: { type: 'json_schema', name: 'weather', schema: person, strict: true } } });
    assert.deepEqual(JSON.parse(r.output_text), expect.json);
    usageOK(r.usage);
    const parsed = await client.responses.parse({ model: 'json', input: 'weather?', text: { format: { type: 'json_schema', name: 'weather', schema: person, strict: true } } });
    assert.deepEqual(parsed.output_parsed, expect.json);
  },
  async sdkErrors() {
    await assert.rejects(client.responses.create({ model: 'no-such-model', input: 'hi' }),
      (e) => e instanceof OpenAI.NotFoundError && e.code === 'model_not_found' && e.param === 'model');
    await assert.rejects(client.responses.create({ model: 'gpt-4o', input: 'hi', previous_response_id: 'resp_1' }),
      (e) => e instanceof OpenAI.BadRequestError && e.param === 'previous_response_id');
    await assert.rejects(client.responses.create({ model: 'gpt-4o', input: 'hi', tools: [{ type: 'web_search' }] }),
      (e) => e instanceof OpenAI.BadRequestError && e.param === 'tools[0].type');
    await assert.rejects(client.responses.create({ model: 'rejects', input: 'hi', temperature: 7 }),
      (e) => e instanceof OpenAI.BadRequestError && e.code === 'invalid_value' && e.param === 'temperature');
    await assert.rejects(client.responses.create({ model: 'down', input: 'hi' }),
      (e) => e instanceof OpenAI.APIError && e.status === 503 && e.headers.get('retry-after') !== null);
  },
  async sdkStreamCut() {
    // The answer is cut after part of it went out: a failure, never a
    // completed response, in the raw events and through the helper.
    const s = await client.responses.create({ model: 'cut', input: 'hello', stream: true });
    let text = '', types = [];
    await assert.rejects((async () => {
      for await (const ev of s) {
        types.push(ev.type);
        if (ev.type === 'response.output_text.delta') text += ev.delta;
      }
    })(), (e) => e instanceof OpenAI.APIError);
    assert.equal(text, expect.prefix);
    assert.ok(types.includes('response.failed') && !types.includes('response.completed'), types.join(','));
    await assert.rejects(client.responses.stream({ model: 'cut', input: 'hello' }).finalResponse(), OpenAI.APIError);
  },
  async aiGenerateText() {
    const r = await generateText({ model: provider('gpt-4o'), prompt: 'hello', maxOutputTokens: 64 });
    assert.equal(r.text, expect.content);
    assert.equal(r.reasoningText, expect.reasoning);
    assert.equal(r.finishReason, 'stop');
    assert.ok(r.usage.inputTokens > 0 && r.usage.outputTokens > 0, JSON.stringify(r.usage));
  },
  async aiGenerateTextTools() {
    const r = await generateText({
      model: provider('tools'), prompt: 'weather in Paris?',
      tools: { get_weather: tool({ description: 'the weather in a city', inputSchema: jsonSchema(weatherParams) }) },
    });
    assert.equal(r.toolCalls.length, 1);
    assert.equal(r.toolCalls[0].toolName, 'get_weather');
    assert.equal(r.toolCalls[0].toolCallId, 'call_1');
    assert.deepEqual(r.toolCalls[0].input, weather);
    assert.equal(r.finishReason, 'tool-calls');
    assert.ok(r.usage.inputTokens > 0 && r.usage.outputTokens > 0);
  },
  async aiMultiTurn() {
    // With store: false the AI SDK sends earlier answers and tool results
    // themselves; with its default it refers to stored items, which the
    // gateway refuses by name.
    const noStore = { openai: { store: false } };
    const first = await generateText({ model: provider('gpt-4o'), prompt: 'hello', providerOptions: noStore });
    const messages = [{ role: 'user', content: 'hello' }, ...first.response.messages, { role: 'user', content: 'again' }];
    const second = await generateText({ model: provider('gpt-4o'), messages, providerOptions: noStore });
    assert.equal(second.text, expect.content);
    await assert.rejects(generateText({ model: provider('gpt-4o'), messages, maxRetries: 0 }),
      (e) => APICallError.isInstance(e) && e.statusCode === 400 && JSON.parse(e.responseBody).error.param === 'input[1].type');
    const loop = await generateText({
      model: provider('tools'), prompt: 'weather in Paris?', stopWhen: stepCountIs(2), providerOptions: noStore,
      tools: { get_weather: tool({ description: 'the weather in a city', inputSchema: jsonSchema(weatherParams), execute: async () => ({ temp: 21 }) }) },
    });
    assert.equal(loop.steps.length, 2);
    assert.deepEqual(loop.steps[0].toolResults[0].output, { temp: 21 });
  },
  async aiStreamText() {
    const r = streamText({ model: provider('gpt-4o'), prompt: 'hello' });
    let text = '';
    for await (const t of r.textStream) text += t;
    assert.equal(text, expect.content);
    assert.equal(await r.reasoningText, expect.reasoning);
    assert.equal(await r.finishReason, 'stop');
    const usage = await r.usage;
    assert.ok(usage.inputTokens > 0 && usage.outputTokens > 0, JSON.stringify(usage));
  },
  async aiStreamTextTools() {
    const r = streamText({
      model: provider('tools'), prompt: 'weather in Paris?',
      tools: { get_weather: tool({ description: 'the weather in a city', inputSchema: jsonSchema(weatherParams) }) },
    });
    const calls = await r.toolCalls;
    assert.equal(calls.length, 1);
    assert.equal(calls[0].toolName, 'get_weather');
    assert.deepEqual(calls[0].input, weather);
    assert.equal(await r.finishReason, 'tool-calls');
  },
  async aiStreamTextCut() {
    const errors = [];
    const r = streamText({ model: provider('cut'), prompt: 'hello', onError: ({ error }) => errors.push(error) });
    let text = '';
    for await (const t of r.textStream) text += t;
    assert.equal(text, expect.prefix);
    assert.equal(await r.finishReason, 'error');
    assert.ok(errors.length > 0);
  },
  async aiGenerateObject() {
    const r = await generateObject({ model: provider('json'), prompt: 'weather?', schema: z.object({ city: z.string(), temp: z.number() }) });
    assert.deepEqual(r.object, expect.json);
    assert.ok(r.usage.inputTokens > 0 && r.usage.outputTokens > 0);
  },
  async langchainInvoke() {
    const msg = await langchain('gpt-4o').invoke('hello');
    assert.equal(msg.text, expect.content);
    assert.ok(msg.usage_metadata.input_tokens > 0 && msg.usage_metadata.output_tokens > 0, JSON.stringify(msg.usage_metadata));
    assert.equal(msg.usage_metadata.total_tokens, msg.usage_metadata.input_tokens + msg.usage_metadata.output_tokens);
  },
  async langchainStream() {
    let full = null;
    for await (const chunk of await langchain('gpt-4o').stream('hello')) full = full ? full.concat(chunk) : chunk;
    assert.equal(full.text, expect.content);
    assert.ok(full.usage_metadata.output_tokens > 0, JSON.stringify(full.usage_metadata));
  },
  async langchainTools() {
    const model = langchain('tools').bindTools([{ type: 'function', function: { name: 'get_weather', description: 'the weather in a city', parameters: weatherParams } }]);
    const msg = await model.invoke('weather in Paris?');
    assert.equal(msg.tool_calls.length, 1);
    assert.equal(msg.tool_calls[0].name, 'get_weather');
    assert.deepEqual(msg.tool_calls[0].args, weather);
    assert.ok(msg.usage_metadata.output_tokens > 0);
    // The next turn sends the call and the tool's answer back.
    const next = await langchain('gpt-4o').invoke([
      { role: 'user', content: 'weather in Paris?' }, msg,
      { role: 'tool', tool_call_id: msg.tool_calls[0].id, content: '{"temp":21}' },
    ]);
    assert.equal(next.text, expect.content);
  },
  async langchainStructured() {
    const model = langchain('json').withStructuredOutput(z.object({ city: z.string(), temp: z.number() }), { method: 'jsonSchema' });
    assert.deepEqual(await model.invoke('weather?'), expect.json);
  },
  async langchainStreamCut() {
    await assert.rejects((async () => {
      for await (const _ of await langchain('cut').stream('hello')) { /* drain */ }
    })());
  },
};

let failed = 0;
const only = process.env.PGW_ONLY;
for (const [name, check] of Object.entries(checks)) {
  if (only && only !== name) continue;
  try {
    await check();
    console.log(`ok ${name}`);
  } catch (e) {
    failed++;
    console.log(`FAIL ${name}: ${e.stack ?? e}`);
  }
}
process.exit(failed === 0 ? 0 : 1);
