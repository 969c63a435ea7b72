import http from 'node:http';
import OpenAI from 'openai';
import type { FleetSnapshot } from '../../schemas/entities';
import { call, type Harness, startHarness, twoDomainLayout } from './support/harness';
import { type FakeUpstream, startFakeUpstream } from './support/upstream';
import { waitUntil } from './support/wait';

const model = 'test-model';

/** A URL on which nothing listens (connection refused), like a dead host's vLLM port. */
async function deadUrl(): Promise<string> {
  const u = await startFakeUpstream('dead');
  await u.close();
  return u.url;
}

describe('requests held during a failover', () => {
  let west: FakeUpstream;
  let h: Harness;

  beforeAll(async () => {
    west = await startFakeUpstream('west');
    h = await startHarness({
      config: { HARU_CHAT_HOLD_MS: 60_000, holdPingMs: 50, HARU_CHAT_HOLD_MAX: 3 },
    });
  });
  afterAll(async () => {
    await h?.close();
    await west?.close();
  });

  const client = (fleet: FleetSnapshot) =>
    new OpenAI({ baseURL: `${h.url}/v1`, apiKey: 'x', maxRetries: 0, defaultHeaders: { 'x-haru-fleet': fleet.slug } });
  const held = async () => (await h.api.metrics.heldRequests.get()).values[0]?.value ?? 0;

  /** A fleet whose active (east) refuses connections, with a promotion to west started but not committed. */
  async function failingFleet(opts: { autoFailover?: boolean; promote?: boolean; on?: Harness } = {}) {
    const on = opts.on ?? h;
    const fleet = await on.seed(
      twoDomainLayout({ eastUrl: await deadUrl(), westUrl: west.url, autoFailover: opts.autoFailover }),
    );
    const westDomain = fleet.domains.find((d) => d.slug === 'west')!;
    let operationId: string | null = null;
    if (opts.promote !== false) {
      const { operation } = await on.store.operations.create({
        fleetId: fleet.id,
        kind: 'promote',
        targetDomainId: westDomain.id,
        reason: 'test failover',
        requestedBy: 'test',
      });
      await on.store.operations.start(operation.id);
      operationId = operation.id;
    }
    const commit = async () => {
      await on.store.fleets.commitRouting({
        fleetId: fleet.id,
        operationId: operationId!,
        expectedActiveDomainId: fleet.activeDomainId,
        targetDomainId: westDomain.id,
      });
    };
    return { fleet, commit, operationId };
  }

  it('holds a request while a promotion is in flight and serves it from the new active once the route moves', async () => {
    const { fleet, commit } = await failingFleet();
    const before = await held();
    const pending = client(fleet).chat.completions.create({ model, messages: [{ role: 'user', content: 'hi' }] });
    await waitUntil('the request to be held', async () => (await held()) > before);
    await commit();
    const answer = await pending;
    expect(answer.choices[0]?.message.content).toBe('west:ok');
    await waitUntil('the hold to be released', async () => (await held()) === before);
  });

  it('pings a held streaming request with SSE comments, then streams the new active answer', async () => {
    const { fleet, commit } = await failingFleet();
    const res = await fetch(`${h.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-haru-fleet': fleet.slug },
      body: JSON.stringify({ model, messages: [], stream: true }),
    });
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/text\/event-stream/);
    const reader = res.body!.getReader();
    const decoder = new TextDecoder();
    let text = '';
    while (!text.includes(': haru')) text += decoder.decode((await reader.read()).value, { stream: true });
    await commit();
    for (let r = await reader.read(); !r.done; r = await reader.read())
      text += decoder.decode(r.value, { stream: true });
    expect(text).toMatch(/^: haru: holding request/);
    expect(text).toContain('"content":"west:"');
    expect(text.trimEnd().endsWith('data: [DONE]')).toBe(true);
  });

  it('gives a held stream the fleet in its headers, and the serving domain and revision as trailers and a comment', async () => {
    const { fleet, commit } = await failingFleet();
    const before = await held();
    // The hold's first ping sends the headers; the route moves only after it, so the trailers are Haru's.
    let gotHeaders!: () => void;
    const headersSent = new Promise<void>((resolve) => (gotHeaders = resolve));
    const answer = new Promise<{ headers: http.IncomingHttpHeaders; trailers: NodeJS.Dict<string>; text: string }>(
      (resolve, reject) => {
        const req = http.request(`${h.url}/v1/chat/completions`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', 'x-haru-fleet': fleet.slug },
        });
        req.on('response', (res) => {
          gotHeaders();
          let text = '';
          res.setEncoding('utf8');
          res.on('data', (chunk: string) => (text += chunk));
          res.on('end', () => resolve({ headers: res.headers, trailers: res.trailers, text }));
        });
        req.on('error', reject);
        req.end(JSON.stringify({ model, messages: [], stream: true }));
      },
    );
    await waitUntil('the stream to be held', async () => (await held()) > before);
    await headersSent;
    const revision = await commit().then(async () => (await h.fleet(fleet.slug)).routeRevision);
    const { headers, trailers, text } = await answer;
    expect(headers['x-haru-fleet']).toBe(fleet.slug);
    expect(headers.trailer).toBe('x-haru-domain, x-haru-route-revision');
    expect(trailers).toEqual({ 'x-haru-domain': 'west', 'x-haru-route-revision': String(revision) });
    expect(text).toContain(`: haru: served by domain west at route revision ${revision}`);
    expect(text.trimEnd().endsWith('data: [DONE]')).toBe(true);
  });

  it('delivers a held stream to the OpenAI SDK, which ignores the pings', async () => {
    const { fleet, commit } = await failingFleet();
    const before = await held();
    const stream = client(fleet).chat.completions.create({ model, messages: [], stream: true });
    await waitUntil('the stream to be held', async () => (await held()) > before);
    await commit();
    const parts: string[] = [];
    for await (const chunk of await stream) parts.push(chunk.choices[0]?.delta.content ?? '');
    expect(parts.join('')).toBe('west:ok');
  });

  it('holds a request for a model the active lacks while a promotion toward a domain serving it is in flight', async () => {
    const layout = twoDomainLayout({ eastUrl: west.url, westUrl: west.url, models: ['base'] });
    const westSlot = layout.domains[1]!.slots[0] as { models: { name: string; servingUrl: string }[] };
    westSlot.models.push({ name: 'only-west', servingUrl: west.url });
    const fleet = await h.seed(layout);
    const ask = () =>
      call(`${h.url}/v1/chat/completions`, {
        body: { model: 'only-west', messages: [] },
        headers: { 'x-haru-fleet': fleet.slug },
      });
    expect((await ask()).status).toBe(404);
    const westDomain = fleet.domains.find((d) => d.slug === 'west')!;
    const { operation } = await h.store.operations.create({
      fleetId: fleet.id,
      kind: 'promote',
      targetDomainId: westDomain.id,
      reason: 'test',
      requestedBy: 'test',
    });
    await h.store.operations.start(operation.id);
    const before = await held();
    const pending = ask();
    await waitUntil('the request to be held', async () => (await held()) > before);
    await h.store.fleets.commitRouting({
      fleetId: fleet.id,
      operationId: operation.id,
      expectedActiveDomainId: fleet.activeDomainId,
      targetDomainId: westDomain.id,
    });
    const res = await pending;
    expect(res.status).toBe(200);
    expect(res.body.choices[0].message.content).toBe('west:ok');
  });

  it('ends a hold that sees no route move within HARU_CHAT_HOLD_MS with the error, as an SSE error event for a started stream', async () => {
    const short = await startHarness({ config: { HARU_CHAT_HOLD_MS: 1_500, holdPingMs: 50 } });
    try {
      const { fleet } = await failingFleet({ on: short });
      const ask = (stream: boolean) =>
        fetch(`${short.url}/v1/chat/completions`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', 'x-haru-fleet': fleet.slug },
          body: JSON.stringify({ model, messages: [], stream }),
        });
      const plain = await ask(false);
      expect(plain.status).toBe(502);
      const body = (await plain.json()) as { error: { code: string; message: string } };
      expect(body.error.code).toBe('upstream_unreachable');
      expect(body.error.message).toMatch(/held 1500 ms/);

      const streamed = await ask(true);
      expect(streamed.status).toBe(200);
      const text = await streamed.text();
      expect(text).toContain(': haru: holding request');
      const last = text.trim().split('\n\n').at(-1)!;
      expect(JSON.parse(last.replace(/^data: /, ''))).toMatchObject({ error: { code: 'upstream_unreachable' } });

      const sdk = new OpenAI({
        baseURL: `${short.url}/v1`,
        apiKey: 'x',
        maxRetries: 0,
        defaultHeaders: { 'x-haru-fleet': fleet.slug },
      });
      const err = await sdk.chat.completions
        .create({ model, messages: [], stream: true })
        .then(async (s) => {
          for await (const _ of s) void _;
        })
        .catch((e: unknown) => e);
      expect(err).toBeInstanceOf(OpenAI.APIError);
    } finally {
      await short.close();
    }
  });

  it('holds a non-streaming request at most HARU_CHAT_HOLD_QUIET_MS (it sends nothing), a stream for HARU_CHAT_HOLD_MS', async () => {
    const quiet = await startHarness({
      config: { HARU_CHAT_HOLD_MS: 60_000, HARU_CHAT_HOLD_QUIET_MS: 1_000, holdPingMs: 50 },
    });
    try {
      const { fleet, commit } = await failingFleet({ on: quiet });
      const ask = (stream: boolean) =>
        fetch(`${quiet.url}/v1/chat/completions`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', 'x-haru-fleet': fleet.slug },
          body: JSON.stringify({ model, messages: [], stream }),
        });
      const streamed = await ask(true);
      const plain = await ask(false);
      expect(plain.status).toBe(502);
      expect(((await plain.json()) as { error: { message: string } }).error.message).toMatch(/held 1000 ms/);
      // The stream, started before the plain request and still held, is served once the route moves.
      await commit();
      const text = await streamed.text();
      expect(text).toContain('"content":"west:"');
    } finally {
      await quiet.close();
    }
  });

  it('answers 429 overloaded with Retry-After when HARU_CHAT_HOLD_MAX requests are already held', async () => {
    const { fleet, commit } = await failingFleet();
    const before = await held();
    const room = h.config.HARU_CHAT_HOLD_MAX - before;
    const holding = Array.from({ length: room }, () =>
      call(`${h.url}/v1/chat/completions`, { body: { model, messages: [] }, headers: { 'x-haru-fleet': fleet.slug } }),
    );
    await waitUntil('the queue to be full', async () => (await held()) === h.config.HARU_CHAT_HOLD_MAX);
    const rejected = await call(`${h.url}/v1/chat/completions`, {
      body: { model, messages: [] },
      headers: { 'x-haru-fleet': fleet.slug },
    });
    expect(rejected.status).toBe(429);
    expect(rejected.body.error.code).toBe('overloaded');
    expect(Number(rejected.headers.get('retry-after'))).toBeGreaterThan(0);
    await commit();
    for (const r of await Promise.all(holding)) expect(r.status).toBe(200);
  });

  it('fails fast when no move can come: no promotion in flight and auto-failover off', async () => {
    const { fleet } = await failingFleet({ promote: false, autoFailover: false });
    const res = await call(`${h.url}/v1/chat/completions`, {
      body: { model, messages: [] },
      headers: { 'x-haru-fleet': fleet.slug },
    });
    expect(res.status).toBe(502);
    expect(res.body.error.message).not.toMatch(/held/);
  });

  it('holds under auto-failover when the active refuses, and signals checkNow to the fleet monitor', async () => {
    const { fleet } = await failingFleet({ promote: false, autoFailover: true });
    const before = await held();
    const pending = call(`${h.url}/v1/chat/completions`, {
      body: { model, messages: [] },
      headers: { 'x-haru-fleet': fleet.slug },
    });
    await waitUntil('the request to be held', async () => (await held()) > before);
    // The upstream failure signal: the monitor workflow received checkNow (signal-with-start, no worker here).
    const handle = h.temporal.client.workflow.getHandle(`haru/${fleet.id}/monitor`);
    await waitUntil('a checkNow signal in the monitor history', async () => {
      const history = await handle.fetchHistory();
      return history.events?.some((e) => e.workflowExecutionSignaledEventAttributes?.signalName === 'checkNow');
    });
    await handle.terminate('test done');
    // Stand in for the monitor's promotion.
    const westDomain = fleet.domains.find((d) => d.slug === 'west')!;
    const { operation } = await h.store.operations.create({
      fleetId: fleet.id,
      kind: 'promote',
      targetDomainId: westDomain.id,
      reason: 'auto',
      requestedBy: 'monitor',
    });
    await h.store.operations.start(operation.id);
    await h.store.fleets.commitRouting({
      fleetId: fleet.id,
      operationId: operation.id,
      expectedActiveDomainId: fleet.activeDomainId,
      targetDomainId: westDomain.id,
    });
    const res = await pending;
    expect(res.status).toBe(200);
    expect(res.body.choices[0].message.content).toBe('west:ok');
  });
});
