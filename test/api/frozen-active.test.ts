/**
 * Requests in flight to an active whose model server is frozen (its fake vLLM process SIGSTOPped: the kernel
 * still accepts connections, nothing answers, no reset ever comes) when the route moves away from it: they are
 * cut and continued on the new active (docs/architecture.md §5.4) instead of waiting for a header timeout or,
 * for a stream that already relayed tokens, forever. The move is made the way a failover makes it: the active
 * marked failed, then a promotion's commit (its `haru_route` push reaches the API).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import OpenAI from 'openai';
import type { Counter } from 'prom-client';
import type { FleetSnapshot } from '../../schemas/entities';
import { answers, pollUntil, type SimChild, signalPid, spawnLogged, tsEntry } from '../../sim/processes';
import { freePort } from '../support/ports';
import { type Harness, moveRoute, startHarness, twoDomainLayout } from './support/harness';
import { waitUntil } from './support/wait';

jest.setTimeout(90_000);

const model = 'qwen-sim';
const question = [{ role: 'user' as const, content: 'tell me something' }];
const TOKENS_PER_SECOND = 20;

interface VllmProcess {
  child: SimChild;
  port: number;
  url: string;
}

/** One fake vLLM as its own process (sim/vllm/main.ts), so that SIGSTOP freezes it as it would a real one. */
async function startVllm(logDir: string, name: string): Promise<VllmProcess> {
  const port = await freePort();
  const [node, entry] = tsEntry('sim/vllm/main.ts');
  const args = [...entry, '--model', model, '--port', String(port)];
  const child = spawnLogged(
    `vllm ${name}`,
    [node, [...args, '--tokens-per-second', String(TOKENS_PER_SECOND)]],
    process.env,
    path.join(logDir, `${name}.log`),
  );
  const url = `http://127.0.0.1:${port}`;
  if (!(await pollUntil(() => answers(`${url}/health`), 60_000, 100))) throw new Error(`${name} did not start`);
  return { child, port, url };
}

/** Requests the fake vLLM is generating for (`vllm:num_requests_running`, as vLLM exports it). */
async function running(vllm: VllmProcess): Promise<number> {
  const text = await (await fetch(`${vllm.url}/metrics`)).text();
  return Number(/^vllm:num_requests_running\{[^}]*\} (\S+)$/m.exec(text)?.[1] ?? 0);
}

async function counter(c: Counter<string>, labels: Record<string, string>): Promise<number> {
  const { values } = await c.get();
  return values
    .filter((v) => Object.entries(labels).every(([k, l]) => v.labels[k] === l))
    .reduce((n, v) => n + v.value, 0);
}

const sdk = (baseURL: string, headers: Record<string, string> = {}) =>
  new OpenAI({ baseURL, apiKey: 'x', maxRetries: 0, defaultHeaders: headers });

describe('requests in flight to a frozen active', () => {
  let logDir: string;
  let east: VllmProcess;
  let west: VllmProcess;
  let h: Harness;
  let frozen = false;

  beforeAll(async () => {
    logDir = mkdtempSync(path.join(os.tmpdir(), 'haru-frozen-active-'));
    [east, west, h] = await Promise.all([startVllm(logDir, 'east'), startVllm(logDir, 'west'), startHarness({})]);
  });
  afterEach(() => thaw());
  afterAll(async () => {
    thaw();
    await h?.close();
    for (const v of [east, west]) {
      if (!v) continue;
      signalPid(v.child.process.pid!, 'SIGKILL');
      await v.child.exited;
    }
    rmSync(logDir, { recursive: true, force: true });
  });

  const freeze = () => {
    signalPid(east.child.process.pid!, 'SIGSTOP');
    frozen = true;
  };
  function thaw() {
    if (frozen && east) signalPid(east.child.process.pid!, 'SIGCONT');
    frozen = false;
  }

  /** A fleet with east active and west standby; `drainTimeoutMs` for a planned move's drain. */
  async function fleet(policy: { drainTimeoutMs?: number } = {}) {
    const layout = twoDomainLayout({ eastUrl: east.url, westUrl: west.url, models: [model] });
    layout.fleet.policy = { ...layout.fleet.policy, ...policy };
    const snapshot = await h.seed(layout);
    const client = sdk(`${h.url}/v1`, { 'x-haru-fleet': snapshot.slug });
    return { snapshot, client };
  }

  /** Moves the route to west as a failover does (east marked failed first) or as a planned promotion does. */
  async function moveToWest(snapshot: FleetSnapshot, opts: { failEast: boolean }): Promise<number> {
    if (opts.failEast) {
      const eastId = snapshot.domains.find((d) => d.slug === 'east')!.id;
      expect(await h.store.domains.transition(eastId, 'failed', { lastError: 'frozen' })).not.toBeNull();
    }
    await moveRoute(h.store, snapshot, 'west');
    return Date.now();
  }

  /** What an uninterrupted stream of the same request answers, straight from west. */
  async function uninterrupted(maxTokens: number) {
    const stream = await sdk(`${west.url}/v1`).chat.completions.create({
      model,
      messages: question,
      max_tokens: maxTokens,
      stream: true,
      stream_options: { include_usage: true },
    });
    let content = '';
    let usage: unknown = null;
    for await (const chunk of stream) {
      content += chunk.choices[0]?.delta.content ?? '';
      usage = chunk.usage ?? usage;
    }
    return { content, usage };
  }

  /**
   * Streams 12 tokens through the proxy; after the third content chunk `onThird` runs (freeze, move) and
   * returns when the move was committed. Resolves with the chunks and the time from the move to the end.
   */
  async function streamAcross(client: OpenAI, onThird: () => Promise<number>) {
    const stream = await client.chat.completions.create({
      model,
      messages: question,
      max_tokens: 12,
      stream: true,
      stream_options: { include_usage: true },
    });
    const chunks = [];
    let contentChunks = 0;
    let movedAt = 0;
    for await (const chunk of stream) {
      chunks.push(chunk);
      if (chunk.choices[0]?.delta.content) contentChunks += 1;
      if (contentChunks === 3 && !movedAt) movedAt = await onThird();
    }
    return { chunks, afterMoveMs: Date.now() - movedAt };
  }

  async function expectWhole(chunks: OpenAI.Chat.Completions.ChatCompletionChunk[]) {
    const reference = await uninterrupted(12);
    expect(chunks.map((c) => c.choices[0]?.delta.content ?? '').join('')).toBe(reference.content);
    expect(new Set(chunks.map((c) => c.id)).size).toBe(1);
    expect(chunks.filter((c) => c.choices[0]?.delta.role !== undefined)).toHaveLength(1);
    expect(chunks.filter((c) => c.choices[0]?.finish_reason)).toHaveLength(1);
    expect(chunks.at(-1)?.usage).toEqual(reference.usage);
  }

  it('finishes a stream that relayed tokens from the new active once the route leaves the frozen active', async () => {
    const { snapshot, client } = await fleet();
    const succeeded = await counter(h.api.metrics.resends, { kind: 'stream', outcome: 'succeeded' });
    const { chunks, afterMoveMs } = await streamAcross(client, () => {
      freeze();
      return moveToWest(snapshot, { failEast: true });
    });
    await expectWhole(chunks);
    // Cut at the move, not at any timeout (the header bound is 60 s, and a stream that relayed is never timed out).
    expect(afterMoveMs).toBeLessThan(10_000);
    expect(await counter(h.api.metrics.resends, { kind: 'stream', outcome: 'succeeded' })).toBe(succeeded + 1);
  });

  it('sends a non-streaming request waiting on the frozen active for its headers to the new active', async () => {
    const { snapshot, client } = await fleet();
    const succeeded = await counter(h.api.metrics.resends, { kind: 'request', outcome: 'succeeded' });
    // vLLM answers a non-streaming request once generation ends: frozen mid-generation, no header ever comes.
    const pending = client.chat.completions.create({ model, messages: question, max_tokens: 40 });
    await waitUntil('east to generate the answer', async () => (await running(east)) > 0);
    freeze();
    const movedAt = await moveToWest(snapshot, { failEast: true });
    const answer = await pending;
    expect(Date.now() - movedAt).toBeLessThan(10_000);
    expect(answer.choices[0]?.message.content).toBe((await uninterrupted(40)).content);
    expect(await counter(h.api.metrics.resends, { kind: 'request', outcome: 'succeeded' })).toBe(succeeded + 1);
  });

  it('answers 502 at the move, not after the header timeout, for a request cut with X-Haru-Resend: off', async () => {
    const { snapshot } = await fleet();
    const pending = fetch(`${h.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-haru-fleet': snapshot.slug, 'x-haru-resend': 'off' },
      body: JSON.stringify({ model, messages: question, max_tokens: 40 }),
    });
    await waitUntil('east to generate the answer', async () => (await running(east)) > 0);
    freeze();
    const movedAt = await moveToWest(snapshot, { failEast: true });
    const res = await pending;
    expect(Date.now() - movedAt).toBeLessThan(10_000);
    expect(res.status).toBe(502);
    expect(await res.json()).toEqual({
      error: { code: 'upstream_unreachable', message: expect.stringMatching(/cut off .*the route moved away from it/) },
    });
  });

  it('leaves a planned move to drain on the old active, and cuts what a frozen one holds once the drain is spent', async () => {
    const drainTimeoutMs = 2_000;
    const healthy = await fleet({ drainTimeoutMs });
    const attempted = await counter(h.api.metrics.resends, { kind: 'stream', outcome: 'attempted' });
    const drained = await streamAcross(healthy.client, () => moveToWest(healthy.snapshot, { failEast: false }));
    await expectWhole(drained.chunks);
    expect(await counter(h.api.metrics.resends, { kind: 'stream', outcome: 'attempted' })).toBe(attempted);

    const stuck = await fleet({ drainTimeoutMs });
    const { chunks, afterMoveMs } = await streamAcross(stuck.client, () => {
      freeze();
      return moveToWest(stuck.snapshot, { failEast: false });
    });
    await expectWhole(chunks);
    expect(afterMoveMs).toBeGreaterThanOrEqual(drainTimeoutMs);
    expect(afterMoveMs).toBeLessThan(drainTimeoutMs + 10_000);
    expect(await counter(h.api.metrics.resends, { kind: 'stream', outcome: 'attempted' })).toBe(attempted + 1);
  });
});
