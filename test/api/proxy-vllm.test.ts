import OpenAI from 'openai';
import { createFakeVllm, type FakeVllm } from '../../sim/vllm/server';
import { call, type Harness, startHarness, twoDomainLayout } from './support/harness';
import { waitUntil } from './support/wait';

/** The proxy in front of the simulator's fake vLLM (vLLM's endpoints, SSE framing and error JSON). */
describe('proxy to a fake vLLM', () => {
  const model = 'qwen-sim';
  let vllm: FakeVllm;
  let h: Harness;
  let openai: OpenAI;
  let fleetSlug: string;

  beforeAll(async () => {
    vllm = createFakeVllm({ model, port: 0, gpuIndex: 0, tokensPerSecond: 1_000, onCrash: () => {} });
    const port = await vllm.listen();
    h = await startHarness({ config: { HARU_CHAT_HEADER_TIMEOUT_MS: 250 } });
    const url = `http://127.0.0.1:${port}`;
    fleetSlug = (await h.seed(twoDomainLayout({ eastUrl: url, westUrl: url, models: [model] }))).slug;
    openai = new OpenAI({
      baseURL: `${h.url}/v1`,
      apiKey: 'x',
      maxRetries: 0,
      defaultHeaders: { 'x-haru-fleet': fleetSlug },
    });
  });
  afterAll(async () => {
    await h?.close();
    await vllm?.close();
  });
  afterEach(async () => {
    await vllm.setFaults(null);
  });

  it('serves chat, completions (streamed and not) and embeddings through the OpenAI SDK', async () => {
    const chat = await openai.chat.completions.create({ model, messages: [{ role: 'user', content: 'hi' }] });
    expect(chat.choices[0]?.message.content).toMatch(/simulated reply/);
    const parts: string[] = [];
    const stream = await openai.chat.completions.create({ model, messages: [], stream: true });
    for await (const chunk of stream) parts.push(chunk.choices[0]?.delta.content ?? '');
    expect(parts.join('')).toBe(chat.choices[0]?.message.content);
    const text = await openai.completions.create({ model, prompt: 'x', max_tokens: 4 });
    expect(text.choices[0]?.finish_reason).toBe('length');
    const embedding = await openai.embeddings.create({ model, input: 'hello' });
    expect(embedding.data[0]?.embedding.length).toBeGreaterThan(0);
  });

  it('delivers stream chunks while vLLM is still generating, and a client abort frees the vLLM request', async () => {
    await vllm.setFaults({ tokensPerSecond: 4 });
    const controller = new AbortController();
    const stream = await openai.chat.completions.create(
      { model, messages: [], stream: true },
      { signal: controller.signal },
    );
    const iterator = stream[Symbol.asyncIterator]();
    const first = await iterator.next(); // the role chunk
    expect(first.value?.choices[0]?.delta.role).toBe('assistant');
    const second = await iterator.next();
    expect(second.value?.choices[0]?.delta.content).toBe('This');
    expect(vllm.state().running).toBe(1);
    controller.abort();
    await waitUntil('vLLM to drop the aborted request', () => vllm.state().running === 0);
  });

  it('does not cut a stream whose tokens come slower than the header timeout', async () => {
    await vllm.setFaults({ tokensPerSecond: 2 }); // 500 ms between tokens, twice the 250 ms headers bound
    const stream = await openai.chat.completions.create({ model, messages: [], max_tokens: 3, stream: true });
    const parts: string[] = [];
    for await (const chunk of stream) parts.push(chunk.choices[0]?.delta.content ?? '');
    expect(parts.join('')).toBe('This is a');
  });

  it('answers 504 upstream_timeout for a wedged engine and releases its request upstream', async () => {
    await vllm.setFaults({ hang: true });
    const res = await call(`${h.url}/v1/chat/completions`, {
      body: { model, messages: [] },
      headers: { 'x-haru-fleet': fleetSlug },
    });
    expect(res.status).toBe(504);
    expect(res.body.error.code).toBe('upstream_timeout');
    await waitUntil('vLLM to see the request closed', () => vllm.state().running === 0);
  });

  it('passes vLLM errors through unchanged (a request vLLM rejects answers 400 with its own JSON)', async () => {
    // A sleeping vLLM queues requests until its wake (no error to pass on); a rejected body is vLLM's own error.
    const res = await call(`${h.url}/v1/chat/completions`, {
      body: { model, messages: [], stream_options: { include_usage: true } },
      headers: { 'x-haru-fleet': fleetSlug },
    });
    expect(res.status).toBe(400);
    expect(res.body).toMatchObject({ error: { type: 'BadRequestError', code: 400 } });
  });

  it('answers 502 upstream_unreachable when vLLM refuses connections and no failover can come', async () => {
    await vllm.setFaults({ refuse: true });
    const err = await openai.chat.completions.create({ model, messages: [] }).catch((e: unknown) => e);
    expect((err as InstanceType<typeof OpenAI.APIError>).status).toBe(502);
    expect((err as { error?: { code?: string } }).error?.code).toBe('upstream_unreachable');
  });
});

/** A vLLM started with `--api-key` reached directly: the layout's `upstreamAuth` names the key the proxy sends. */
describe('proxy to a keyed fake vLLM', () => {
  const model = 'qwen-keyed';
  const KEY_ENV = 'HARU_SECRET_UPSTREAM_KEY';
  let vllm: FakeVllm;
  let h: Harness;
  let url: string;

  beforeAll(async () => {
    process.env[KEY_ENV] = 'vllm-key-0123456789';
    vllm = createFakeVllm({ model, port: 0, gpuIndex: 0, apiKey: 'vllm-key-0123456789', onCrash: () => {} });
    url = `http://127.0.0.1:${await vllm.listen()}`;
    h = await startHarness({});
  });
  afterAll(async () => {
    await h?.close();
    await vllm?.close();
    delete process.env[KEY_ENV];
  });

  /** A fleet serving `model` from the keyed vLLM, its bindings with `upstreamAuth` when given. */
  const seed = async (upstreamAuth?: { env: string }) => {
    const layout = twoDomainLayout({ eastUrl: url, westUrl: url, models: [model] });
    for (const d of layout.domains) {
      for (const slot of d.slots) {
        if (slot.kind === 'inference') slot.models = slot.models.map((m) => ({ ...m, upstreamAuth }));
      }
    }
    return (await h.seed(layout)).slug;
  };
  const client = (fleet: string) =>
    new OpenAI({
      baseURL: `${h.url}/v1`,
      apiKey: 'the-clients-own-key',
      maxRetries: 0,
      defaultHeaders: { 'x-haru-fleet': fleet },
    });
  const ask = (fleet: string) =>
    client(fleet).chat.completions.create({ model, messages: [{ role: 'user', content: 'hi' }], max_tokens: 4 });

  it("serves clients with the key upstreamAuth names (never the client's own Authorization)", async () => {
    const fleet = await seed({ env: KEY_ENV });
    const answer = await ask(fleet);
    expect(answer.choices[0]?.message.content).toMatch(/simulated/);
    const parts: string[] = [];
    const stream = await client(fleet).chat.completions.create({
      model,
      messages: [{ role: 'user', content: 'hi' }],
      max_tokens: 4,
      stream: true,
    });
    for await (const chunk of stream) parts.push(chunk.choices[0]?.delta.content ?? '');
    expect(parts.join('')).toBe(answer.choices[0]?.message.content);
  });

  it('without upstreamAuth the keyed vLLM refuses proxied traffic (its 401 passes through)', async () => {
    const fleet = await seed();
    const err = await ask(fleet).catch((e: unknown) => e);
    expect((err as InstanceType<typeof OpenAI.APIError>).status).toBe(401);
  });

  it('a token the API cannot read is a 500 naming the reference', async () => {
    const fleet = await seed({ env: 'HARU_SECRET_UNSET' });
    const res = await call(`${h.url}/v1/chat/completions`, {
      body: { model, messages: [] },
      headers: { 'x-haru-fleet': fleet },
    });
    expect(res.status).toBe(500);
    expect(res.body.error.message).toMatch(/upstreamAuth names HARU_SECRET_UNSET, which is not set/);
  });
});
