import { spawn } from 'node:child_process';
import path from 'node:path';
import OpenAI from 'openai';
import type { Counter } from 'prom-client';
import { createFakeVllm, type FakeVllm } from '../../sim/vllm/server';
import type { VllmControlInput } from '../../sim/vllm/control';
import { type Harness, startHarness, twoDomainLayout } from './support/harness';
import { waitUntil } from './support/wait';
import { ensurePythonTool, OPENAI_PYTHON } from '../support/python-tools';

/**
 * Requests in flight when the active's vLLM dies (the simulator's `crashAfterTokens`: the fake vLLM closes
 * every connection at a known token) continue on the new active through the OpenAI SDK with no retries.
 * The failover itself is a promotion committed by the test once the proxy holds the interrupted request.
 */
const model = 'qwen-sim';

/** The OpenAI Python SDK's interpreter (its pinned venv, made on first use), or why there is none. */
const openaiPython = ((): { python: string } | { why: string } => {
  try {
    return { python: path.join(ensurePythonTool(OPENAI_PYTHON), 'bin', 'python') };
  } catch (err) {
    return { why: (err as Error).message };
  }
})();
if ('why' in openaiPython) {
  // Loud on purpose: a skipped check must never read as a passed one.
  process.stderr.write(`\nSKIPPED: the OpenAI Python SDK as a client: ${openaiPython.why}\n\n`);
}
const itWithPython = 'python' in openaiPython ? it : it.skip;
const PYTHON_CLIENT = path.join(__dirname, '../fixtures/openai-python/chat.py');

/** Runs test/fixtures/openai-python/chat.py (one request, `max_retries=0`); resolves with its JSON line. */
function pythonChat(baseUrl: string, fleet: string, args: { stream: boolean; maxTokens: number }) {
  return new Promise<{ content?: string; error?: string }>((resolve, reject) => {
    const python = (openaiPython as { python: string }).python;
    const argv = [PYTHON_CLIENT, baseUrl, fleet, model, String(args.maxTokens), args.stream ? 'stream' : 'plain'];
    const child = spawn(python, argv, { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    child.stdout.on('data', (c: Buffer) => (out += c.toString()));
    child.stderr.on('data', (c: Buffer) => (err += c.toString()));
    child.on('error', reject);
    child.on('close', (code) => {
      try {
        resolve(JSON.parse(out) as { content?: string; error?: string });
      } catch {
        reject(new Error(`chat.py exited ${code}: ${out}${err}`));
      }
    });
  });
}
const question = [{ role: 'user' as const, content: 'tell me something' }];

const sdk = (baseURL: string, headers: Record<string, string> = {}) =>
  new OpenAI({ baseURL, apiKey: 'x', maxRetries: 0, defaultHeaders: headers });

async function counter(c: Counter<string>, labels: Record<string, string>): Promise<number> {
  const { values } = await c.get();
  return values
    .filter((v) => Object.entries(labels).every(([k, l]) => v.labels[k] === l))
    .reduce((n, v) => n + v.value, 0);
}

/** A fake vLLM for `model` on a free port; `crash` closes it the way a dead host's connections end. */
async function fakeVllm(faults: VllmControlInput = {}): Promise<FakeVllm> {
  const vllm: FakeVllm = createFakeVllm({
    model,
    port: 0,
    gpuIndex: 0,
    tokensPerSecond: 200,
    onCrash: () => void vllm.close(),
  });
  await vllm.listen();
  await vllm.setFaults(faults);
  return vllm;
}

/** Reads a raw SSE answer to the end: its events, in order. */
async function sseEvents(res: Response): Promise<string[]> {
  const text = await res.text();
  return text
    .split('\n\n')
    .map((e) => e.trim())
    .filter(Boolean);
}

describe('resending requests across a failover', () => {
  let west: FakeVllm;
  const easts: FakeVllm[] = [];
  let h: Harness;
  let limited: Harness;

  beforeAll(async () => {
    west = await fakeVllm();
    [h, limited] = await Promise.all([
      startHarness({ config: { HARU_CHAT_HOLD_MS: 30_000, holdPingMs: 100 } }),
      startHarness({
        config: {
          HARU_CHAT_HOLD_MS: 30_000,
          HARU_CHAT_HEADER_TIMEOUT_MS: 500,
          HARU_RESEND_MAX_PER_REQUEST: 1,
          HARU_RESEND_MAX_BYTES: 12,
        },
      }),
    ]);
  });
  afterAll(async () => {
    await h?.close();
    await limited?.close();
    await west?.close();
    for (const e of easts) await e.close();
  });

  const held = async (on: Harness) => (await on.api.metrics.heldRequests.get()).values[0]?.value ?? 0;

  /**
   * A fleet whose active (east) dies after `crashAfterTokens` tokens of the next request, with a promotion
   * to west in flight; `failover()` commits it once a request is held.
   */
  async function dyingFleet(
    crashAfterTokens: number,
    opts: { on?: Harness; west?: FakeVllm; faults?: VllmControlInput } = {},
  ) {
    const on = opts.on ?? h;
    const east = await fakeVllm({ crashAfterTokens, ...opts.faults });
    easts.push(east);
    const westUrl = `http://127.0.0.1:${(opts.west ?? west).port}`;
    const fleet = await on.seed(
      twoDomainLayout({ eastUrl: `http://127.0.0.1:${east.port}`, westUrl, models: [model] }),
    );
    const westDomain = fleet.domains.find((d) => d.slug === 'west')!;
    const { operation } = await on.store.operations.create({
      fleetId: fleet.id,
      kind: 'promote',
      targetDomainId: westDomain.id,
      reason: 'east died',
      requestedBy: 'test',
    });
    await on.store.operations.start(operation.id);
    const before = await held(on);
    const failover = async () => {
      await waitUntil('the interrupted request to be held', async () => (await held(on)) > before);
      await on.store.fleets.commitRouting({
        fleetId: fleet.id,
        operationId: operation.id,
        expectedActiveDomainId: fleet.activeDomainId,
        targetDomainId: westDomain.id,
      });
    };
    const client = sdk(`${on.url}/v1`, { 'x-haru-fleet': fleet.slug });
    const post = (path: string, body: object, headers: Record<string, string> = {}) =>
      fetch(`${on.url}/v1/${path}`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-haru-fleet': fleet.slug, ...headers },
        body: JSON.stringify(body),
      });
    return { east, fleet, failover, client, post };
  }

  /** What an uninterrupted stream of the same request answers, straight from west. */
  async function uninterrupted(params: { max_tokens: number }) {
    const stream = await sdk(`http://127.0.0.1:${west.port}/v1`).chat.completions.create({
      model,
      messages: question,
      stream: true,
      stream_options: { include_usage: true },
      ...params,
    });
    let content = '';
    let usage: unknown = null;
    for await (const chunk of stream) {
      content += chunk.choices[0]?.delta.content ?? '';
      usage = chunk.usage ?? usage;
    }
    return { content, usage };
  }

  it('continues a chat stream cut mid-answer on the new active: one id, one role chunk, no repeated text, summed usage', async () => {
    const { failover, client } = await dyingFleet(4);
    const before = await counter(h.api.metrics.resends, { kind: 'stream', outcome: 'succeeded' });
    const stream = await client.chat.completions.create({
      model,
      messages: question,
      max_tokens: 10,
      stream: true,
      stream_options: { include_usage: true },
    });
    const moved = failover();
    const chunks = [];
    for await (const chunk of stream) chunks.push(chunk);
    await moved;

    const reference = await uninterrupted({ max_tokens: 10 });
    expect(chunks.map((c) => c.choices[0]?.delta.content ?? '').join('')).toBe(reference.content);
    expect(new Set(chunks.map((c) => c.id)).size).toBe(1);
    expect(chunks.filter((c) => c.choices[0]?.delta.role !== undefined)).toHaveLength(1);
    expect(chunks.filter((c) => c.choices[0]?.finish_reason)).toEqual([
      expect.objectContaining({ choices: [expect.objectContaining({ finish_reason: 'length' })] }),
    ]);
    expect(chunks.at(-1)?.usage).toEqual(reference.usage);
    expect(await counter(h.api.metrics.resends, { kind: 'stream', outcome: 'succeeded' })).toBe(before + 1);
  });

  it('continues a /v1/completions stream with the generated text appended to the prompt, ending with one [DONE]', async () => {
    const { failover, post } = await dyingFleet(3);
    const body = { model, prompt: 'Say: ', max_tokens: 8, stream: true };
    const answer = post('completions', body);
    await failover();
    const events = await sseEvents(await answer);
    const reference = await sseEvents(
      await fetch(`http://127.0.0.1:${west.port}/v1/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify(body),
      }),
    );
    const text = (evs: string[]) =>
      evs
        .filter((e) => e.startsWith('data: {'))
        .map((e) => (JSON.parse(e.slice(6)) as { choices: { text: string }[] }).choices[0]?.text ?? '')
        .join('');
    expect(text(events)).toBe(text(reference));
    expect(events.filter((e) => e === 'data: [DONE]')).toHaveLength(1);
    expect(events.at(-1)).toBe('data: [DONE]');
    expect(events.some((e) => e.includes('"error"'))).toBe(false);
  });

  it('holds a non-streaming request whose upstream died before answering and sends it to the new active', async () => {
    const { failover, client } = await dyingFleet(3);
    const before = await counter(h.api.metrics.resends, { kind: 'request', outcome: 'succeeded' });
    const pending = client.chat.completions.create({ model, messages: question, max_tokens: 6 });
    await failover();
    const answer = await pending;
    expect(answer.choices[0]?.message.content).toBe((await uninterrupted({ max_tokens: 6 })).content);
    expect(await counter(h.api.metrics.resends, { kind: 'request', outcome: 'succeeded' })).toBe(before + 1);
  });

  it('sends a non-streaming request again when its upstream broke after the first body bytes: the client sees one whole answer', async () => {
    // East sends the headers and 20 bytes of its answer, then dies: nothing of it reached the client yet.
    const { failover, client } = await dyingFleet(100, { faults: { crashAfterBodyBytes: 20 } });
    const before = await counter(h.api.metrics.resends, { kind: 'request', outcome: 'succeeded' });
    const pending = client.chat.completions.create({ model, messages: question, max_tokens: 6 });
    await failover();
    const answer = await pending;
    expect(answer.choices[0]?.message.content).toBe((await uninterrupted({ max_tokens: 6 })).content);
    expect(answer.usage?.completion_tokens).toBe(6);
    expect(await counter(h.api.metrics.resends, { kind: 'request', outcome: 'succeeded' })).toBe(before + 1);
  });

  it('answers 502 for a body broken mid-answer with X-Haru-Resend: off, and cuts one past HARU_RESEND_MAX_BYTES', async () => {
    const off = await dyingFleet(100, { faults: { crashAfterBodyBytes: 20 } });
    const res = await off.post('chat/completions', { model, messages: question }, { 'x-haru-resend': 'off' });
    expect(res.status).toBe(502);
    expect(((await res.json()) as { error: { message: string } }).error.message).toMatch(
      /broke mid-answer and the request cannot be sent again \(off\)/,
    );

    // Past the 12-byte bound the first 20 bytes already went out with the status: the break cuts the answer.
    const long = await dyingFleet(100, { on: limited, faults: { crashAfterBodyBytes: 20 } });
    const attempted = await counter(limited.api.metrics.resends, { kind: 'request', outcome: 'attempted' });
    const cut = await long.post('chat/completions', { model, messages: question });
    expect(cut.status).toBe(200);
    await expect(cut.text()).rejects.toThrow();
    expect(await counter(limited.api.metrics.resends, { kind: 'request', outcome: 'attempted' })).toBe(attempted);
  });

  itWithPython(
    'the OpenAI Python SDK (max_retries=0) gets the uninterrupted text of a stream and of a request whose active died mid-answer',
    async () => {
      const reference = (await uninterrupted({ max_tokens: 8 })).content;
      const streamed = await dyingFleet(3);
      const stream = pythonChat(`${h.url}/v1`, streamed.fleet.slug, { stream: true, maxTokens: 8 });
      await streamed.failover();
      expect(await stream).toEqual({ content: reference });

      const plain = await dyingFleet(100, { faults: { crashAfterBodyBytes: 20 } });
      const answer = pythonChat(`${h.url}/v1`, plain.fleet.slug, { stream: false, maxTokens: 8 });
      await plain.failover();
      expect(await answer).toEqual({ content: reference });
    },
  );

  it('with X-Haru-Resend: off (or the deprecated X-Haru-Migrate: off) fails the interrupted request: a stream ends with an error event and [DONE], a plain request 502', async () => {
    const { post } = await dyingFleet(2);
    const before = await counter(h.api.metrics.resendRefusals, { reason: 'off' });
    const events = await sseEvents(
      await post('chat/completions', { model, messages: question, stream: true }, { 'x-haru-resend': 'off' }),
    );
    expect(events.at(-1)).toBe('data: [DONE]');
    expect(JSON.parse(events.at(-2)!.slice(6))).toMatchObject({
      error: { code: 'upstream_unreachable', message: expect.stringMatching(/cannot continue.*\(off\)/) },
    });
    expect(events.filter((e) => e.includes('"content":"'))).toHaveLength(3); // role chunk + 2 tokens

    const plain = await dyingFleet(2);
    const res = await plain.post('chat/completions', { model, messages: question }, { 'x-haru-migrate': 'off' });
    expect(res.status).toBe(502);
    expect(((await res.json()) as { error: { code: string } }).error.code).toBe('upstream_unreachable');
    // The deprecated header's refusal is counted as 'off' too.
    expect(await counter(h.api.metrics.resendRefusals, { reason: 'off' })).toBe(before + 2);
  });

  it('still holds a request whose connection was refused with X-Haru-Resend: off: it never reached the upstream', async () => {
    const { east, failover, client } = await dyingFleet(100);
    await east.close();
    const pending = client.chat.completions.create(
      { model, messages: question, max_tokens: 2 },
      { headers: { 'x-haru-resend': 'off' } },
    );
    await failover();
    expect((await pending).choices[0]?.message.content).toBe('This is');
  });

  it('ends a stream that cannot continue elsewhere (n > 1) with an error event the OpenAI SDK raises as an API error', async () => {
    const { client } = await dyingFleet(2);
    const stream = await client.chat.completions.create({ model, messages: question, n: 2, stream: true });
    const err = await (async () => {
      for await (const _ of stream) void _;
    })().catch((e: unknown) => e);
    expect(err).toBeInstanceOf(OpenAI.APIError);
    expect(err).not.toBeInstanceOf(OpenAI.APIConnectionError);
    expect(String((err as Error).message)).toMatch(/cannot continue on another domain \(n\)/);
    expect(await counter(h.api.metrics.resendRefusals, { kind: 'stream', reason: 'n' })).toBeGreaterThan(0);
  });

  it('holds a request whose upstream sent no headers within HARU_CHAT_HEADER_TIMEOUT_MS and sends it to the new active', async () => {
    const { east, failover, client } = await dyingFleet(100, { on: limited });
    await east.setFaults({ hang: true }); // a host that died without a reset: the request is never answered
    const before = await counter(limited.api.metrics.resends, { kind: 'request', outcome: 'attempted' });
    const pending = client.chat.completions.create({ model, messages: question, max_tokens: 2 });
    await failover();
    expect((await pending).choices[0]?.message.content).toBe('This is');
    expect(await counter(limited.api.metrics.resends, { kind: 'request', outcome: 'attempted' })).toBe(before + 1);

    // With resending off the request may have reached the upstream: 504 at once, not sent twice.
    const off = await dyingFleet(100, { on: limited });
    await off.east.setFaults({ hang: true });
    const res = await off.post('chat/completions', { model, messages: question }, { 'x-haru-resend': 'off' });
    expect(res.status).toBe(504);
    expect(((await res.json()) as { error: { code: string } }).error.code).toBe('upstream_timeout');
  });

  it('refuses to resend past HARU_RESEND_MAX_BYTES of relayed text, and past HARU_RESEND_MAX_PER_REQUEST', async () => {
    // 'This is a simulated' is 19 bytes, past the 12-byte bound.
    const long = await dyingFleet(4, { on: limited });
    const events = await sseEvents(await long.post('chat/completions', { model, messages: question, stream: true }));
    expect(events.at(-2)).toMatch(/cannot continue on another domain \(memory\)/);
    expect(events.at(-1)).toBe('data: [DONE]');

    // 'This' fits; the new active dies too, one token later: a second resend is over the limit of one.
    const dyingWest = await fakeVllm({ crashAfterTokens: 1 });
    easts.push(dyingWest);
    const twice = await dyingFleet(1, { on: limited, west: dyingWest });
    const answer = twice.post('chat/completions', { model, messages: question, stream: true });
    await twice.failover();
    const evs = await sseEvents(await answer);
    expect(evs.filter((e) => e.includes('"content":"'))).toHaveLength(3); // role chunk, 'This', ' is'
    expect(evs.at(-2)).toMatch(/cannot continue on another domain \(limit\)/);
    expect(evs.at(-1)).toBe('data: [DONE]');
    expect(await counter(limited.api.metrics.resendRefusals, { reason: 'limit' })).toBe(1);
  });
});
