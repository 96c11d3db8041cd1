// The official OpenAI Node SDK against a running gateway. TestNodeSDK
// (proxy/node_test.go) starts the gateway and fake upstreams and runs
// `node sdk.mjs` with PGW_BASE_URL set; every check that fails throws and
// the script exits non-zero. Expected answers come in PGW_EXPECT (JSON).
import assert from 'node:assert/strict';
import OpenAI from 'openai';

const expect = JSON.parse(process.env.PGW_EXPECT);
const client = new OpenAI({ baseURL: process.env.PGW_BASE_URL, apiKey: 'client-key', maxRetries: 0, timeout: 20_000 });
const user = [{ role: 'user', content: 'hello' }];
const tools = [{ type: 'function', function: { name: 'get_weather', parameters: { type: 'object', properties: { city: { type: 'string' } } } } }];

const checks = {
  async chat() {
    const r = await client.chat.completions.create({ model: 'gpt-4o', messages: user, temperature: 0.2 });
    assert.equal(r.object, 'chat.completion');
    assert.equal(r.choices[0].message.content, expect.content);
    assert.equal(r.choices[0].finish_reason, 'stop');
    assert.ok(r.usage.total_tokens > 0);
    assert.equal(r.model, expect.model);
  },
  async stream() {
    const s = await client.chat.completions.create({ model: 'gpt-4o', messages: user, stream: true, stream_options: { include_usage: true } });
    let text = '', models = new Set(), usage = null, finish = null;
    for await (const c of s) {
      models.add(c.model);
      if (c.usage) usage = c.usage;
      for (const ch of c.choices) {
        text += ch.delta.content ?? '';
        finish = ch.finish_reason ?? finish;
      }
    }
    assert.equal(text, expect.content);
    assert.equal(finish, 'stop');
    assert.ok(usage && usage.completion_tokens > 0);
    assert.deepEqual([...models], [expect.model]);
  },
  async streamHelper() {
    const s = client.chat.completions.stream({ model: 'gpt-4o', messages: user });
    const final = await s.finalChatCompletion();
    assert.equal(final.choices[0].message.content, expect.content);
  },
  async tools() {
    const r = await client.chat.completions.create({ model: 'tools', messages: user, tools });
    const tc = r.choices[0].message.tool_calls;
    assert.equal(r.choices[0].finish_reason, 'tool_calls');
    assert.equal(tc.length, 1);
    assert.equal(tc[0].type, 'function');
    assert.equal(tc[0].function.name, 'get_weather');
    assert.deepEqual(JSON.parse(tc[0].function.arguments), { city: 'Paris' });
  },
  async toolsStream() {
    const s = client.chat.completions.stream({ model: 'tools', messages: user, tools });
    const final = await s.finalChatCompletion();
    const tc = final.choices[0].message.tool_calls;
    assert.equal(tc[0].function.name, 'get_weather');
    assert.deepEqual(JSON.parse(tc[0].function.arguments), { city: 'Paris' });
  },
  async embeddingsFloat() {
    const r = await client.embeddings.create({ model: 'embed', input: ['a', 'bbb'], encoding_format: 'float' });
    assert.equal(r.data.length, 2);
    assert.deepEqual(r.data.map((d) => Array.from(d.embedding)), [[1, 1, 0.5], [2, 3, 0.5]]);
  },
  async embeddingsBase64() {
    // Without encoding_format the SDK asks for base64 and decodes it.
    const r = await client.embeddings.create({ model: 'embed', input: ['a', 'bbb'] });
    assert.deepEqual(r.data.map((d) => Array.from(d.embedding)), [[1, 1, 0.5], [2, 3, 0.5]]);
    const raw = await client.embeddings.create({ model: 'embed', input: 'cc', encoding_format: 'base64' });
    const bytes = Buffer.from(raw.data[0].embedding, 'base64');
    assert.deepEqual(Array.from(new Float32Array(bytes.buffer, bytes.byteOffset, bytes.length / 4)), [1, 2, 0.5]);
  },
  async models() {
    const list = [];
    for await (const m of client.models.list()) list.push(m.id);
    assert.ok(list.includes('gpt-4o') && list.includes('tools') && list.includes('embed'), list.join(','));
    const m = await client.models.retrieve('gpt-4o');
    assert.equal(m.id, 'gpt-4o');
    assert.equal(m.object, 'model');
  },
  async typedErrors() {
    await assert.rejects(client.models.retrieve('no-such-model'), (e) => e instanceof OpenAI.NotFoundError && e.status === 404 && e.code === 'model_not_found');
    await assert.rejects(client.chat.completions.create({ model: 'no-such-model', messages: user }), OpenAI.NotFoundError);
    await assert.rejects(client.chat.completions.create({ model: 'rejects', messages: user, temperature: 7 }),
      (e) => e instanceof OpenAI.BadRequestError && e.status === 400 && e.code === 'invalid_value' && e.param === 'temperature');
    await assert.rejects(client.chat.completions.create({ model: 'gpt-4o', messages: [] }),
      (e) => e instanceof OpenAI.BadRequestError && e.param === 'messages');
    await assert.rejects(client.chat.completions.create({ model: 'down', messages: user }),
      (e) => e instanceof OpenAI.APIError && e.status === 503 && e.headers.get('retry-after') !== null);
    await assert.rejects(client.chat.completions.create({ model: 'gpt-4o', messages: user }, { headers: { 'X-PolyGateway-Stream-Commit': 'soon' } }),
      OpenAI.BadRequestError);
  },
};

let failed = 0;
for (const [name, check] of Object.entries(checks)) {
  try {
    await check();
    console.log(`ok ${name}`);
  } catch (e) {
    failed++;
    console.log(`FAIL ${name}: ${e.stack ?? e}`);
  }
}
process.exit(failed === 0 ? 0 : 1);
