/**
 * The fake vLLM speaks vLLM's wire format: checked with the official OpenAI client and on the raw bytes.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import OpenAI from 'openai';
import { listLiveHolders, writeInventory } from '../gpu-state';
import { eventually } from '../../test/support/eventually';
import { createFakeVllm, type FakeVllm } from './server';

let fake: FakeVllm;
let base: string;
let client: OpenAI;
let stateDir: string;

beforeAll(async () => {
  stateDir = mkdtempSync(path.join(os.tmpdir(), 'haru-fake-vllm-'));
  writeInventory(stateDir, {
    gpus: [{ index: 0, uuid: 'GPU-0', name: 'NVIDIA H100 80GB HBM3', totalMiB: 81559 }],
    mig: null,
    baselineMiB: 0,
    fault: null,
  });
  fake = createFakeVllm({
    model: 'org/model-7b',
    port: 0,
    gpuIndex: 0,
    gpuStateDir: stateDir,
    tokensPerSecond: 5_000,
    weightsMiB: 14_000,
    kvCacheMiB: 6_000,
    residueMiB: 500,
    onCrash: () => {},
  });
  base = `http://127.0.0.1:${await fake.listen()}`;
  client = new OpenAI({ baseURL: `${base}/v1`, apiKey: 'unused', maxRetries: 0 });
});
afterEach(async () => {
  await fake.setFaults(null);
  if (fake.state().sleeping) await fetch(`${base}/wake_up`, { method: 'POST' });
});
afterAll(async () => {
  await fake.close();
  rmSync(stateDir, { recursive: true, force: true });
});

const post = (route: string, body: unknown, headers: Record<string, string> = { 'content-type': 'application/json' }) =>
  fetch(`${base}${route}`, { method: 'POST', headers, body: typeof body === 'string' ? body : JSON.stringify(body) });
const metricValue = async (name: string) => {
  const line = (await (await fetch(`${base}/metrics`)).text()).split('\n').find((l) => l.startsWith(`${name}{`));
  return line ? Number(line.split(' ').at(-1)) : null;
};
const vram = () => listLiveHolders(stateDir).find((h) => h.pid === process.pid)?.usedMiB;

describe('fake vLLM: OpenAI-compatible endpoints', () => {
  it('answers a chat completion as vLLM does', async () => {
    const res = await client.chat.completions.create({
      model: 'org/model-7b',
      messages: [{ role: 'user', content: 'Say hello in five words' }],
      max_tokens: 4,
    });
    expect(res.id).toMatch(/^chatcmpl-[0-9a-f]{32}$/);
    expect(res).toMatchObject({
      object: 'chat.completion',
      model: 'org/model-7b',
      choices: [{ index: 0, message: { role: 'assistant', content: 'This is a simulated' }, finish_reason: 'length' }],
      usage: { prompt_tokens: 5, completion_tokens: 4, total_tokens: 9 },
    });
  });

  it('streams chat chunks: role first, content deltas, finish reason, usage chunk, then [DONE]', async () => {
    const raw = await (
      await post('/v1/chat/completions', {
        model: 'org/model-7b',
        messages: [{ role: 'user', content: 'hi' }],
        max_tokens: 3,
        stream: true,
        stream_options: { include_usage: true },
      })
    ).text();
    const events = raw.split('\n\n');
    expect(events.pop()).toBe('');
    expect(events.every((e) => e.startsWith('data: '))).toBe(true);
    expect(events.at(-1)).toBe('data: [DONE]');
    type Chunk = { id: string; choices: { delta: { content?: string }; finish_reason: string | null }[] };
    const chunks = events.slice(0, -1).map((e) => JSON.parse(e.slice(6)) as Chunk);
    expect(chunks[0]!.choices[0]).toEqual({
      index: 0,
      delta: { role: 'assistant', content: '' },
      logprobs: null,
      finish_reason: null,
    });
    expect(
      chunks
        .slice(1, 4)
        .map((c) => c.choices[0]!.delta.content)
        .join(''),
    ).toBe('This is a');
    expect(chunks[3]!.choices[0]!.finish_reason).toBe('length');
    expect(chunks[4]).toMatchObject({
      object: 'chat.completion.chunk',
      choices: [],
      usage: { prompt_tokens: 1, completion_tokens: 3, total_tokens: 4 },
    });
    expect(new Set(chunks.map((c) => c.id)).size).toBe(1);

    const stream = await client.chat.completions.create({
      model: 'org/model-7b',
      messages: [{ role: 'user', content: 'hi' }],
      max_tokens: 100,
      stream: true,
    });
    let text = '';
    let finish: string | null = null;
    for await (const chunk of stream) {
      text += chunk.choices[0]?.delta.content ?? '';
      finish = chunk.choices[0]?.finish_reason ?? finish;
      expect(chunk).not.toHaveProperty('usage');
    }
    expect(text).toBe('This is a simulated reply from the Haru GPU host simulator, served by a fake vLLM engine.');
    expect(finish).toBe('stop');
  });

  it('serves completions, embeddings and the model list', async () => {
    const completion = await client.completions.create({ model: 'org/model-7b', prompt: 'Once upon', max_tokens: 2 });
    expect(completion).toMatchObject({
      object: 'text_completion',
      choices: [{ text: 'This is', finish_reason: 'length' }],
    });
    expect(completion.id).toMatch(/^cmpl-/);

    const embeddings = await client.embeddings.create({
      model: 'org/model-7b',
      input: ['a', 'b', 'a'],
      encoding_format: 'float',
    });
    expect(embeddings.data.map((d) => d.index)).toEqual([0, 1, 2]);
    expect(embeddings.data[0]!.embedding).toEqual(embeddings.data[2]!.embedding);
    expect(Math.hypot(...embeddings.data[0]!.embedding)).toBeCloseTo(1);
    const b64 = await client.embeddings.create({ model: 'org/model-7b', input: 'a' }); // the SDK asks for base64
    expect(b64.data[0]!.embedding).toHaveLength(8);
    expect(b64.data[0]!.embedding[0]).toBeCloseTo(embeddings.data[0]!.embedding[0]!, 5);

    const models = await client.models.list();
    expect(models.data).toEqual([expect.objectContaining({ id: 'org/model-7b', object: 'model', owned_by: 'vllm' })]);
  });

  it('answers errors with vLLM’s error JSON and status codes', async () => {
    const unknown = await post('/v1/chat/completions', { model: 'nope', messages: [] });
    expect(unknown.status).toBe(404);
    expect(await unknown.json()).toEqual({
      error: { message: 'The model `nope` does not exist.', type: 'NotFoundError', param: 'model', code: 404 },
    });
    await expect(client.chat.completions.create({ model: 'nope', messages: [] })).rejects.toMatchObject({
      status: 404,
    });

    const noMessages = await post('/v1/chat/completions', { model: 'org/model-7b' });
    expect(noMessages.status).toBe(400);
    expect(await noMessages.json()).toMatchObject({ error: { type: 'BadRequestError', code: 400 } });
    expect((await post('/v1/chat/completions', '{"model":')).status).toBe(400);
    expect((await post('/v1/chat/completions', '{}', { 'content-type': 'text/plain' })).status).toBe(400);
    const streamOptions = await post('/v1/chat/completions', { messages: [], stream_options: { include_usage: true } });
    expect(streamOptions.status).toBe(400);

    expect(await (await fetch(`${base}/v2/anything`)).json()).toEqual({ detail: 'Not Found' });
    const wrongMethod = await fetch(`${base}/v1/chat/completions`);
    expect([wrongMethod.status, await wrongMethod.json()]).toEqual([405, { detail: 'Method Not Allowed' }]);
  });
});

describe('fake vLLM: sleep mode', () => {
  it('sleeps, queues inference while asleep until the wake, frees VRAM, and wakes with tags', async () => {
    expect(vram()).toBe(20_500);
    const sleep = await post('/sleep?level=1', '', {});
    expect([sleep.status, await sleep.text()]).toEqual([200, '']);
    expect(await (await fetch(`${base}/is_sleeping`)).json()).toEqual({ is_sleeping: true });
    expect(vram()).toBe(500);
    let answered = false;
    const queued = post('/v1/chat/completions', { messages: [{ role: 'user', content: 'hi' }] }).then((res) => {
      answered = true;
      return res;
    });
    await eventually('the request waiting', () => fake.state().waiting === 1);
    expect(await metricValue('vllm:num_requests_waiting')).toBe(1);
    expect((await fetch(`${base}/v1/models`)).status).toBe(200); // no weights needed

    expect((await post('/wake_up?tags=weights', '', {})).status).toBe(200);
    expect(await (await fetch(`${base}/is_sleeping`)).json()).toEqual({ is_sleeping: true }); // KV cache still asleep
    expect(vram()).toBe(14_500);
    expect(answered).toBe(false);
    expect((await post('/wake_up?tags=kv_cache', '', {})).status).toBe(200);
    expect(await (await fetch(`${base}/is_sleeping`)).json()).toEqual({ is_sleeping: false });
    expect(vram()).toBe(20_500);
    const res = await queued;
    expect(res.status).toBe(200);
    expect(await res.json()).toMatchObject({ choices: [{ finish_reason: 'stop' }] });
    expect(fake.state().waiting).toBe(0);
  });

  it('ends in-flight streams with finish_reason "abort" on a sleep in abort mode (the default)', async () => {
    await fake.setFaults({ tokensPerSecond: 20 });
    const stream = await client.chat.completions.create({
      model: 'org/model-7b',
      messages: [{ role: 'user', content: 'x' }],
      max_tokens: 200,
      stream: true,
    });
    const chunks: { finish: string | null; content: string }[] = [];
    const read = (async () => {
      for await (const c of stream)
        chunks.push({ finish: c.choices[0]!.finish_reason, content: c.choices[0]!.delta.content ?? '' });
    })();
    await eventually('a few tokens', () => chunks.length >= 3);
    expect((await post('/sleep?level=1', '', {})).status).toBe(200);
    await read;
    expect(chunks.at(-1)).toEqual({ finish: 'abort', content: '' });
    expect(chunks.length).toBeLessThan(50);
    expect(fake.state().running).toBe(0);
  });

  it('drains in-flight requests before sleeping in wait mode', async () => {
    await fake.setFaults({ tokensPerSecond: 50 });
    const pending = client.chat.completions.create({
      model: 'org/model-7b',
      messages: [{ role: 'user', content: 'x' }],
      max_tokens: 10,
    });
    await eventually('the request running', () => fake.state().running === 1);
    expect((await post('/sleep?level=1&mode=wait', '', {})).status).toBe(200);
    expect((await pending).choices[0]!.finish_reason).toBe('length');
    expect(fake.state().sleeping).toBe(true);
  });

  it('queues /is_sleeping behind a wake in progress, as an engine-core utility call', async () => {
    await post('/sleep?level=1', '', {});
    await fake.setFaults({ wakeDelayMs: 400 });
    const before = fake.state().calls.length;
    const wake = post('/wake_up', '', {});
    await eventually('the wake received', () => fake.state().calls.slice(before).includes('POST /wake_up'));
    const started = Date.now();
    const answer = (await (await fetch(`${base}/is_sleeping`)).json()) as { is_sleeping: boolean };
    expect(answer).toEqual({ is_sleeping: false }); // answered only once the wake finished
    expect(Date.now() - started).toBeGreaterThanOrEqual(300);
    expect((await wake).status).toBe(200);
  });

  it('slows the non-inference endpoints by the event-loop lag knob, more under load', async () => {
    await fake.setFaults({ adminLagMs: 300, adminLagPerRequestMs: 200, tokensPerSecond: 10 });
    const timed = async (route: string) => {
      const started = Date.now();
      await (await fetch(`${base}${route}`)).text();
      return Date.now() - started;
    };
    for (const route of ['/health', '/is_sleeping', '/metrics']) expect(await timed(route)).toBeGreaterThanOrEqual(290);
    const load = [1, 2].map(() =>
      post('/v1/chat/completions', { messages: [{ role: 'user', content: 'x' }], max_tokens: 100 }).catch(() => null),
    );
    await eventually('two running', () => fake.state().running === 2);
    expect(await timed('/health')).toBeGreaterThanOrEqual(690); // 300 + 2 x 200
    await fake.setFaults({ tokensPerSecond: 5_000 });
    await Promise.all(load);
  });

  it('needs reload_weights after a level-2 sleep, and reports the level in its metrics', async () => {
    await post('/sleep?level=2', '', {});
    const metrics = await (await fetch(`${base}/metrics`)).text();
    expect(metrics).toContain(
      'vllm:engine_sleep_state{engine="0",model_name="org/model-7b",sleep_state="discard_all"} 1.0',
    );
    expect(metrics).toContain('vllm:engine_sleep_state{engine="0",model_name="org/model-7b",sleep_state="awake"} 0.0');
    expect(metrics).toContain('vllm:num_requests_running{engine="0",model_name="org/model-7b"} 0.0');

    expect((await post('/collective_rpc', { method: 'reload_weights' })).status).toBe(500); // weights still released
    await post('/wake_up', '', {});
    const garbage = await client.chat.completions.create({
      model: 'org/model-7b',
      messages: [{ role: 'user', content: 'hi' }],
    });
    expect(garbage.choices[0]!.message.content).toBe(''); // discarded weights produce nothing useful
    const reload = await post('/collective_rpc', { method: 'reload_weights' });
    expect([reload.status, await reload.json()]).toEqual([200, { results: [null] }]);
    const ok = await client.chat.completions.create({
      model: 'org/model-7b',
      messages: [{ role: 'user', content: 'hi' }],
    });
    expect(ok.choices[0]!.message.content).not.toBe('');
    expect((await post('/reset_prefix_cache', '', {})).status).toBe(200);

    const missing = await post('/collective_rpc', {});
    expect([missing.status, await missing.json()]).toEqual([400, { detail: "Missing 'method' in request body" }]);
  });

  it('counts running requests in vllm:num_requests_running while they generate', async () => {
    await fake.setFaults({ tokensPerSecond: 20 });
    const pending = client.chat.completions.create({
      model: 'org/model-7b',
      messages: [{ role: 'user', content: 'x' }],
      max_tokens: 5,
    });
    const deadline = Date.now() + 10_000;
    while (fake.state().running === 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 10));
    expect(await (await fetch(`${base}/metrics`)).text()).toContain(
      'vllm:num_requests_running{engine="0",model_name="org/model-7b"} 1.0',
    );
    await pending;
    expect(fake.state().running).toBe(0);
  });
});
