import net from 'node:net';
import { gzipSync } from 'node:zlib';
import OpenAI from 'openai';
import { answerAs, chatChunk, type FakeUpstream, startFakeUpstream } from './support/upstream';
import { call, type Harness, startHarness, twoDomainLayout } from './support/harness';
import { gate } from './support/wait';
import { eventually } from '../support/eventually';

/** The proxy's forwarding mechanics against a recording upstream: bytes, streams, aborts, limits, errors. */
describe('OpenAI-compatible proxy', () => {
  let east: FakeUpstream;
  let west: FakeUpstream;
  let h: Harness;
  let openai: OpenAI;
  const model = 'test-model';

  beforeAll(async () => {
    east = await startFakeUpstream('east');
    west = await startFakeUpstream('west');
    h = await startHarness({
      layouts: [twoDomainLayout({ eastUrl: east.url, westUrl: west.url, models: [model, 'other-model'] })],
      config: {
        // Short enough for the timeout tests, long enough that a cold first request on a loaded machine is
        // answered in time (300 ms was not, once, in a full run).
        HARU_CHAT_HEADER_TIMEOUT_MS: 1_000,
        HARU_CHAT_FIRST_BYTE_TIMEOUT_MS: 1_000,
        holdPingMs: 100,
        HARU_CHAT_MAX_BODY_BYTES: 4_096,
      },
    });
    const fleet = await h.fleet();
    openai = new OpenAI({
      baseURL: `${h.url}/v1`,
      apiKey: 'client-secret-for-haru',
      maxRetries: 0,
      defaultHeaders: { 'x-haru-fleet': fleet.slug },
    });
  });
  afterAll(async () => {
    await h?.close();
    await east?.close();
    await west?.close();
  });
  beforeEach(() => {
    east.seen.length = 0;
  });

  const fleetHeader = async () => ({ 'x-haru-fleet': (await h.fleet()).slug });

  it('answers a non-streaming chat completion through the OpenAI SDK from the active domain', async () => {
    const answer = await openai.chat.completions.create({ model, messages: [{ role: 'user', content: 'hi' }] });
    expect(answer.choices[0]?.message.content).toBe('east:ok');
    expect(east.seen).toHaveLength(1);
    expect(east.seen[0]?.path).toBe('/v1/chat/completions');
  });

  it('forwards the request body byte for byte, vendor fields and odd whitespace included', async () => {
    const raw = `{ "model" :"${model}",\n\t"messages":[{"role":"user","content":"h\\u00e9llo  "}],  "vllm_xargs": {"top_k" : 3}, "guided_json" :null ,"n":1.0 }\n\n`;
    const res = await call(`${h.url}/v1/chat/completions`, { body: raw, headers: await fleetHeader() });
    expect(res.status).toBe(200);
    expect(east.seen[0]?.body.equals(Buffer.from(raw, 'utf8'))).toBe(true);
  });

  it('returns the upstream response bytes, status and headers unchanged, plus the routing headers', async () => {
    const body = '{"id" : "x",  "vendor_extension": {"kv_cache_usage": 0.25}}  ';
    east.handle((_req, _body, res) => {
      res.writeHead(201, { 'content-type': 'application/json', 'x-vendor-trace': 'abc' });
      res.end(body);
    });
    try {
      const res = await fetch(`${h.url}/v1/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', ...(await fleetHeader()) },
        body: JSON.stringify({ model, prompt: 'x' }),
      });
      expect(res.status).toBe(201);
      expect(res.headers.get('x-vendor-trace')).toBe('abc');
      expect(res.headers.get('x-haru-domain')).toBe('east');
      expect(res.headers.get('x-haru-route-revision')).toBe(String((await h.fleet()).routeRevision));
      expect(await res.text()).toBe(body);
      expect(east.seen[0]?.path).toBe('/v1/completions');
    } finally {
      east.handle(answerAs('east'));
    }
  });

  it('drops hop-by-hop headers, cookies and X-Haru-* from the upstream answer; only Haru names the routing', async () => {
    east.handle((_req, _body, res) => {
      res.writeHead(200, {
        'content-type': 'application/json',
        'set-cookie': ['session=upstream; Path=/'],
        'x-haru-domain': 'spoofed',
        'x-haru-route-revision': '999',
        'x-haru-routing': 'stale',
        connection: 'x-upstream-hop',
        'x-upstream-hop': 'drop me',
        'keep-alive': 'timeout=1',
        'x-vendor-trace': 'kept',
      });
      res.end('{}');
    });
    try {
      const res = await fetch(`${h.url}/v1/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', ...(await fleetHeader()) },
        body: JSON.stringify({ model, prompt: 'x' }),
      });
      expect(res.status).toBe(200);
      expect(res.headers.getSetCookie()).toEqual([]);
      expect(res.headers.get('x-haru-domain')).toBe('east');
      expect(res.headers.get('x-haru-route-revision')).toBe(String((await h.fleet()).routeRevision));
      expect(res.headers.get('x-haru-routing')).toBeNull();
      expect(res.headers.get('x-upstream-hop')).toBeNull();
      expect(res.headers.get('keep-alive')).not.toBe('timeout=1');
      expect(res.headers.get('x-vendor-trace')).toBe('kept');
      await res.text();
    } finally {
      east.handle(answerAs('east'));
    }
  });

  it('never forwards the client Authorization header, cookies or X-Haru-* headers upstream', async () => {
    await call(`${h.url}/v1/embeddings`, {
      body: { model, input: 'x' },
      headers: { ...(await fleetHeader()), authorization: 'Bearer client-secret', cookie: 'a=b', 'x-custom': 'kept' },
    });
    const seen = east.seen[0]!;
    expect(seen.path).toBe('/v1/embeddings');
    expect(seen.headers.authorization).toBeUndefined();
    expect(seen.headers.cookie).toBeUndefined();
    expect(seen.headers['x-haru-fleet']).toBeUndefined();
    expect(seen.headers['x-custom']).toBe('kept');
  });

  it('builds only inference paths: a servingUrl ending in /v1 is not doubled, and admin paths are not routed', async () => {
    // Query strings never reach the upstream path.
    const res = await call(`${h.url}/v1/chat/completions?path=/sleep&level=1`, {
      body: { model, messages: [] },
      headers: await fleetHeader(),
    });
    expect(res.status).toBe(200);
    expect(east.seen.map((s) => s.path)).toEqual(['/v1/chat/completions']);
    for (const path of ['/sleep', '/wake_up', '/v1/sleep', '/v1/../sleep', '/is_sleeping', '/collective_rpc']) {
      const admin = await call(`${h.url}${path}`, { body: {}, headers: await fleetHeader() });
      expect(admin.status).toBe(404);
    }
    expect(east.seen).toHaveLength(1);
    // west's servingUrl is `<base>/v1`: the endpoint is appended once.
    west.seen.length = 0;
    const v1 = await h.seed(twoDomainLayout({ eastUrl: `${west.url}/v1`, westUrl: east.url }));
    const viaV1 = await call(`${h.url}/v1/embeddings`, {
      body: { model, input: 'x' },
      headers: { 'x-haru-fleet': v1.slug },
    });
    expect(viaV1.status).toBe(200);
    expect(west.seen.map((s) => s.path)).toEqual(['/v1/embeddings']);
  });

  it("answers 429 past the process's body budget without sending the body anywhere, and frees it as answers end", async () => {
    // HARU_CHAT_MAX_BODY_BYTES 4096 here: the budget holds 8 bodies of the largest size.
    const body = (n: number) =>
      JSON.stringify({ model, messages: [{ role: 'user', content: `${n}`.padEnd(3_900, 'x') }] });
    const release = gate();
    east.handle(async (req, upstreamBody, res) => {
      await release.promise;
      await answerAs('east')(req, upstreamBody, res);
    });
    const headers = await fleetHeader();
    try {
      const held = Array.from({ length: 8 }, (_, i) =>
        call(`${h.url}/v1/chat/completions`, { body: body(i), headers }),
      );
      await east.waitFor((seen) => seen.length === 8);
      const refused = await call(`${h.url}/v1/chat/completions`, { body: body(8), headers });
      expect(refused.status).toBe(429);
      expect(refused.headers.get('retry-after')).toBe('1');
      expect((refused.body as { error: { code: string; message: string } }).error).toMatchObject({
        code: 'overloaded',
        message: expect.stringMatching(/bytes of request bodies; \d+ more would pass its 32768-byte budget/),
      });
      expect(east.seen).toHaveLength(8); // never forwarded
      release.open();
      expect((await Promise.all(held)).map((r) => r.status)).toEqual(Array(8).fill(200));
      const after = await call(`${h.url}/v1/chat/completions`, { body: body(9), headers });
      expect(after.status).toBe(200);
    } finally {
      release.open();
      east.handle(answerAs('east'));
    }
  });

  it('counts bodies still arriving against the budget: slow senders hold it, a chunked body past it is refused, a closed one frees it', async () => {
    // The budget holds 32,768 bytes (8 × HARU_CHAT_MAX_BODY_BYTES 4096). Eight clients each declare 4,096 bytes
    // and send 4,090 of them: the API holds 32,720 bytes for them while the rest trickles in.
    const headers = await fleetHeader();
    const { hostname, port } = new URL(h.url);
    const slowSender = () =>
      new Promise<net.Socket>((resolve, reject) => {
        const socket = net.connect(Number(port), hostname, () => {
          socket.write(
            `POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n` +
              `x-haru-fleet: ${headers['x-haru-fleet']}\r\ncontent-length: 4096\r\n\r\n${'x'.repeat(4_090)}`,
          );
          resolve(socket);
        });
        socket.once('error', reject);
      });
    const senders = await Promise.all(Array.from({ length: 8 }, slowSender));
    try {
      const small = JSON.stringify({ model, messages: [{ role: 'user', content: 'hi' }] });
      const refused = await eventually('a body refused while eight are arriving', async () => {
        const r = await call(`${h.url}/v1/chat/completions`, { body: small, headers });
        return r.status === 429 ? r : null;
      });
      expect(refused.headers.get('retry-after')).toBe('1');
      expect((refused.body as { error: { code: string } }).error.code).toBe('overloaded');
      const forwarded = east.seen.length;
      // A chunked body (no declared length) is refused as its bytes pass the budget, before it ends.
      const chunked = await fetch(`${h.url}/v1/chat/completions`, {
        method: 'POST',
        headers: { ...headers, 'content-type': 'application/json' },
        body: new ReadableStream({
          start(c) {
            c.enqueue(new TextEncoder().encode(small));
            c.close();
          },
        }),
        duplex: 'half',
      } as RequestInit);
      expect(chunked.status).toBe(429);
      expect(east.seen.length).toBe(forwarded); // not forwarded
    } finally {
      for (const socket of senders) socket.destroy();
    }
    // The senders went away: their bytes are given back, and a request passes again.
    await eventually(
      'the budget freed by the closed senders',
      async () =>
        (await call(`${h.url}/v1/chat/completions`, { body: { model, messages: [] }, headers })).status === 200,
    );
  });

  it('streams SSE chunks to the client before the upstream has finished', async () => {
    const release = gate();
    east.handle(async (_req, _body, res) => {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.write(chatChunk(model, 'first'));
      await release.promise;
      res.write(chatChunk(model, 'second'));
      res.end('data: [DONE]\n\n');
    });
    try {
      const stream = await openai.chat.completions.create({ model, messages: [], stream: true });
      const iterator = stream[Symbol.asyncIterator]();
      const first = await iterator.next();
      expect(first.value?.choices[0]?.delta.content).toBe('first');
      // The upstream is still holding its response open: the first chunk came through unbuffered.
      expect(east.seen[0]?.finished).toBe(false);
      release.open();
      const rest: string[] = [];
      for (let r = await iterator.next(); !r.done; r = await iterator.next())
        rest.push(r.value.choices[0]?.delta.content ?? '');
      expect(rest).toEqual(['second']);
    } finally {
      release.open();
      east.handle(answerAs('east'));
    }
  });

  it('aborts the upstream request when the client disconnects mid-stream', async () => {
    const never = gate();
    east.handle(async (_req, _body, res) => {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.write(chatChunk(model, 'first'));
      await never.promise;
    });
    try {
      const controller = new AbortController();
      const stream = await openai.chat.completions.create(
        { model, messages: [], stream: true },
        { signal: controller.signal },
      );
      const iterator = stream[Symbol.asyncIterator]();
      await iterator.next();
      controller.abort();
      await east.waitFor((seen) => seen[0]?.aborted === true);
      expect(east.seen[0]?.aborted).toBe(true);
    } finally {
      never.open();
      east.handle(answerAs('east'));
    }
  });

  it('answers 504 upstream_timeout when no response headers come within HARU_CHAT_HEADER_TIMEOUT_MS, and aborts upstream', async () => {
    const never = gate();
    east.handle(async () => {
      await never.promise;
    });
    try {
      const err = await openai.chat.completions.create({ model, messages: [] }).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(OpenAI.APIError);
      expect((err as InstanceType<typeof OpenAI.APIError>).status).toBe(504);
      expect((err as { error?: { code?: string } }).error?.code).toBe('upstream_timeout');
      await east.waitFor((seen) => seen[0]?.aborted === true);
    } finally {
      never.open();
      east.handle(answerAs('east'));
    }
  });

  it('never cuts a stream that started and then stays quiet longer than the header timeout', async () => {
    const quietMs = h.config.HARU_CHAT_HEADER_TIMEOUT_MS * 4;
    east.handle(async (_req, _body, res) => {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.write(chatChunk(model, 'before'));
      // The quiet period is the point of this test: longer than the headers bound.
      await new Promise((r) => setTimeout(r, quietMs));
      res.write(chatChunk(model, 'after'));
      res.end('data: [DONE]\n\n');
    });
    try {
      const stream = await openai.chat.completions.create({ model, messages: [], stream: true });
      const parts: string[] = [];
      for await (const chunk of stream) parts.push(chunk.choices[0]?.delta.content ?? '');
      expect(parts).toEqual(['before', 'after']);
      expect(east.seen[0]?.finished).toBe(true);
    } finally {
      east.handle(answerAs('east'));
    }
  });

  it('pings a stream whose upstream sent headers and stalls, then ends it with an upstream_timeout event', async () => {
    let upstreamClosed!: () => void;
    const closed = new Promise<void>((resolve) => (upstreamClosed = resolve));
    east.handle((req, _body, res) => {
      req.socket.on('close', upstreamClosed);
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.flushHeaders();
    });
    try {
      const res = await fetch(`${h.url}/v1/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', ...(await fleetHeader()) },
        body: JSON.stringify({ model, messages: [], stream: true }),
      });
      expect(res.status).toBe(200);
      expect(res.headers.get('x-haru-domain')).toBe('east');
      const text = await res.text();
      expect(text).toMatch(/^: haru: waiting for the first token/);
      const last = text.trim().split('\n\n').at(-1)!;
      expect(JSON.parse(last.replace(/^data: /, ''))).toEqual({
        error: { code: 'upstream_timeout', message: 'domain east sent headers but no body within 1000 ms' },
      });
      await closed;
      // Without pings (not a stream) the same stall is a plain 504.
      const plain = await call(`${h.url}/v1/completions`, {
        body: { model, prompt: 'x' },
        headers: await fleetHeader(),
      });
      expect(plain.status).toBe(504);
      expect(plain.body.error.code).toBe('upstream_timeout');
    } finally {
      east.handle(answerAs('east'));
    }
  });

  it('answers 413 payload_too_large for a body over HARU_CHAT_MAX_BODY_BYTES, sized or chunked', async () => {
    const big = JSON.stringify({ model, prompt: 'x'.repeat(5_000) });
    const sized = await call(`${h.url}/v1/completions`, { body: big, headers: await fleetHeader() });
    expect(sized.status).toBe(413);
    expect(sized.body.error.code).toBe('payload_too_large');
    const chunked = await fetch(`${h.url}/v1/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...(await fleetHeader()) },
      body: new ReadableStream({
        start(c) {
          for (let i = 0; i < 10; i++) c.enqueue(new TextEncoder().encode('x'.repeat(1_000)));
          c.close();
        },
      }),
      duplex: 'half',
    } as RequestInit);
    expect(chunked.status).toBe(413);
    expect(((await chunked.json()) as { error: { code: string } }).error.code).toBe('payload_too_large');
    expect(east.seen).toHaveLength(0);
  });

  it('answers 400 invalid_request for bad JSON, a non-object, a missing model, an encoded body, and no fleet', async () => {
    const headers = await fleetHeader();
    for (const body of ['{"model": "x",', '[1,2]', '{"messages": []}', '{"model": 42}', '']) {
      const res = await call(`${h.url}/v1/chat/completions`, {
        method: 'POST',
        body,
        headers: { 'content-type': 'application/json', ...headers },
      });
      expect(res.status).toBe(400);
      expect(res.body.error.code).toBe('invalid_request');
    }
    const gzipped = await fetch(`${h.url}/v1/chat/completions`, {
      method: 'POST',
      body: gzipSync(JSON.stringify({ model, messages: [] })),
      headers: { 'content-type': 'application/json', 'content-encoding': 'gzip', ...headers },
    });
    expect(gzipped.status).toBe(400);
    const noFleet = await call(`${h.url}/v1/chat/completions`, { body: { model, messages: [] } });
    expect(noFleet.status).toBe(400);
    expect(noFleet.body.error.message).toMatch(/X-Haru-Fleet/);
    expect(east.seen).toHaveLength(0);
  });

  it('answers 404 model_not_found listing the routable models, and 404 fleet_not_found for an unknown fleet', async () => {
    const err = await openai.chat.completions.create({ model: 'Test-Model', messages: [] }).catch((e: unknown) => e);
    expect((err as InstanceType<typeof OpenAI.APIError>).status).toBe(404);
    const message = (err as { error?: { message?: string; code?: string } }).error;
    expect(message?.code).toBe('model_not_found');
    expect(message?.message).toContain('test-model');
    expect(message?.message).toContain('other-model');
    const unknown = await call(`${h.url}/v1/chat/completions`, {
      body: { model, messages: [] },
      headers: { 'x-haru-fleet': 'no-such-fleet' },
    });
    expect(unknown.status).toBe(404);
    expect(unknown.body.error.code).toBe('fleet_not_found');
  });

  it('lists the models routable on the active domain in the OpenAI format', async () => {
    const models = await openai.models.list();
    expect(models.data.map((m) => m.id)).toEqual([model, 'other-model']);
  });

  it('answers 502 upstream_unreachable when the active refuses connections and no route move can come', async () => {
    const refused = await startFakeUpstream('gone');
    const fleet = await h.seed(twoDomainLayout({ eastUrl: refused.url, westUrl: west.url }));
    await refused.close();
    const res = await call(`${h.url}/v1/chat/completions`, {
      body: { model, messages: [] },
      headers: { 'x-haru-fleet': fleet.slug },
    });
    expect(res.status).toBe(502);
    expect(res.body.error.code).toBe('upstream_unreachable');
  });

  it('answers 503 no_active_domain when the fleet has no active domain', async () => {
    const fleet = await h.seed(twoDomainLayout({ eastUrl: east.url, westUrl: west.url }));
    const { sql } = await import('drizzle-orm');
    await h.db.database.db.execute(sql`update fleets set active_domain_id = null where id = ${fleet.id}::uuid`);
    const res = await call(`${h.url}/v1/chat/completions`, {
      body: { model, messages: [] },
      headers: { 'x-haru-fleet': fleet.slug },
    });
    expect(res.status).toBe(503);
    expect(res.body.error.code).toBe('no_active_domain');
    const models = await call(`${h.url}/v1/models`, { headers: { 'x-haru-fleet': fleet.slug } });
    expect(models.status).toBe(503);
  });
});
