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
