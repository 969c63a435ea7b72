import type { IncomingMessage, ServerResponse } from 'node:http';
import { closedPort, listenLocal, type LocalServer, startSilentHost } from '../../test/support/local-server';
import { largeBodyUpstream, withDeadline, writesStall } from '../../test/support/stall';
import { ClientGone } from './client-gone';
import { createForwarder, type ForwardOutcome, type ForwardRequest, isConnectionFailure } from './forwarder';

type Response = Extract<ForwardOutcome, { kind: 'response' }>;

const forwarder = createForwarder({ connectTimeoutMs: 2_000 });
const servers: LocalServer[] = [];
afterAll(async () => {
  await Promise.all(servers.map((s) => s.close()));
  await forwarder.close();
});

async function upstream(handler: (req: IncomingMessage, res: ServerResponse) => void): Promise<string> {
  const server = await listenLocal(handler);
  servers.push(server);
  return server.url;
}

const request = (url: string, overrides: Partial<ForwardRequest> = {}): ForwardRequest => ({
  url: `${url}/v1/chat/completions`,
  method: 'POST',
  headers: { 'content-type': 'application/json' },
  body: Buffer.from('{"model":"m"}'),
  signal: new AbortController().signal,
  headersTimeoutMs: 5_000,
  ...overrides,
});

async function readRest(outcome: Response): Promise<Buffer> {
  const parts = outcome.first ? [outcome.first] : [];
  for (;;) {
    const next = await outcome.rest.next();
    if (next.done) return Buffer.concat(parts);
    parts.push(next.value);
  }
}

function expectResponse(outcome: ForwardOutcome): Response {
  if (outcome.kind !== 'response') throw new Error(`expected a response, got ${outcome.kind}`);
  return outcome;
}

describe('createForwarder', () => {
  it('sends the method, path, headers and exact body bytes, and returns status, headers and the whole body', async () => {
    const seen: { method?: string; url?: string; type?: string; body?: string } = {};
    const url = await upstream((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        Object.assign(seen, {
          method: req.method,
          url: req.url,
          type: req.headers['content-type'],
          body: Buffer.concat(chunks).toString(),
        });
        res.writeHead(201, { 'x-upstream': 'east', 'content-type': 'text/plain' });
        res.write('hello ');
        res.end('world');
      });
    });
    const outcome = expectResponse(await forwarder.send(request(`${url}`, { body: Buffer.from('{"a":  1}') })));
    expect(outcome.statusCode).toBe(201);
    expect(outcome.headers['x-upstream']).toBe('east');
    expect(outcome.first).not.toBeNull();
    expect(outcome.ttfbSeconds).toBeGreaterThanOrEqual(0);
    expect((await readRest(outcome)).toString()).toBe('hello world');
    expect(seen).toEqual({ method: 'POST', url: '/v1/chat/completions', type: 'application/json', body: '{"a":  1}' });
  });

  it('settles an empty body with no first chunk and an ended rest', async () => {
    const url = await upstream((_req, res) => {
      res.writeHead(204);
      res.end();
    });
    const outcome = expectResponse(await forwarder.send(request(url)));
    expect([outcome.statusCode, outcome.first]).toEqual([204, null]);
    expect(await outcome.rest.next()).toEqual({ done: true, value: undefined });
  });

  it('times out when no response headers come within the bound, and aborts the upstream request', async () => {
    let upstreamClosed!: () => void;
    const closed = new Promise<void>((resolve) => (upstreamClosed = resolve));
    const url = await upstream((req) => req.socket.on('close', upstreamClosed));
    expect(await forwarder.send(request(url, { headersTimeoutMs: 100 }))).toEqual({
      kind: 'timeout',
      phase: 'headers',
    });
    await closed;
  });

  it('never cuts a quiet body once the headers came (the bound is on headers only)', async () => {
    let headersFlushed!: (sendBody: () => void) => void;
    const flushed = new Promise<() => void>((resolve) => (headersFlushed = resolve));
    const url = await upstream((_req, res) => {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.flushHeaders();
      headersFlushed(() => res.end('data: late\n\n'));
    });
    const headersTimeoutMs = 300;
    const pending = forwarder.send(request(url, { headersTimeoutMs }));
    const sendBody = await flushed;
    // The point of the test is wall time passing: hold the first body byte back well past the bound.
    await new Promise((resolve) => setTimeout(resolve, headersTimeoutMs * 2));
    sendBody();
    const outcome = expectResponse(await pending);
    expect((await readRest(outcome)).toString()).toBe('data: late\n\n');
  });

  it('times out when headers came but no body byte within firstByteTimeoutMs, after telling the caller of the headers', async () => {
    let upstreamClosed!: () => void;
    const closed = new Promise<void>((resolve) => (upstreamClosed = resolve));
    const url = await upstream((req, res) => {
      req.socket.on('close', upstreamClosed);
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.flushHeaders();
    });
    const seen: number[] = [];
    const outcome = await forwarder.send(
      request(url, { firstByteTimeoutMs: 200, onHeaders: (status) => seen.push(status) }),
    );
    expect(outcome).toEqual({ kind: 'timeout', phase: 'first_byte' });
    expect(seen).toEqual([200]);
    await closed;
  });

  it('times out at the headers bound while the connect to a host that drops packets is still pending', async () => {
    const silent = await startSilentHost();
    try {
      const started = performance.now();
      const outcome = await forwarder.send(request(silent.url, { headersTimeoutMs: 200 }));
      const tookMs = performance.now() - started;
      expect(outcome).toEqual({ kind: 'timeout', phase: 'headers' });
      // The bound under test: the request's own, not the dispatcher's connect timeout (2 s here).
      expect(tookMs).toBeLessThan(2_000);
    } finally {
      await silent.close();
    }
  });

  it('answers `aborted` at once when the client leaves while the connect is still pending', async () => {
    const silent = await startSilentHost();
    try {
      const ctrl = new AbortController();
      const pending = forwarder.send(request(silent.url, { signal: ctrl.signal }));
      setTimeout(() => ctrl.abort(), 50);
      const started = performance.now();
      expect(await pending).toEqual({ kind: 'aborted' });
      expect(performance.now() - started).toBeLessThan(2_000);
    } finally {
      await silent.close();
    }
  });

  it('reports a refused connection as retryable `refused`', async () => {
    const outcome = await forwarder.send(request(`http://127.0.0.1:${await closedPort()}`));
    expect(outcome.kind).toBe('refused');
    expect(isConnectionFailure((outcome as { error: Error }).error)).toBe(true);
  });

  it('reports a connection reset before any response byte as `refused`', async () => {
    const url = await upstream((req) => req.socket.destroy());
    expect((await forwarder.send(request(url))).kind).toBe('refused');
  });

  it('answers `aborted` for a request whose client already left, without contacting the upstream', async () => {
    let contacted = false;
    const url = await upstream(() => (contacted = true));
    const ctrl = new AbortController();
    ctrl.abort();
    expect(await forwarder.send(request(url, { signal: ctrl.signal }))).toEqual({ kind: 'aborted' });
    expect(contacted).toBe(false);
  });

  it('answers `aborted` and closes the upstream request when the client leaves while waiting for headers', async () => {
    let arrived!: () => void;
    const isArrived = new Promise<void>((resolve) => (arrived = resolve));
    let upstreamClosed!: () => void;
    const closed = new Promise<void>((resolve) => (upstreamClosed = resolve));
    const url = await upstream((req) => {
      req.socket.on('close', upstreamClosed);
      arrived();
    });
    const ctrl = new AbortController();
    const pending = forwarder.send(request(url, { signal: ctrl.signal }));
    await isArrived;
    ctrl.abort();
    expect(await pending).toEqual({ kind: 'aborted' });
    await closed;
  });

  it('answers `cut` and closes the upstream request when cut while waiting for headers', async () => {
    let arrived!: () => void;
    const isArrived = new Promise<void>((resolve) => (arrived = resolve));
    let upstreamClosed!: () => void;
    const closed = new Promise<void>((resolve) => (upstreamClosed = resolve));
    const url = await upstream((req) => {
      req.socket.on('close', upstreamClosed);
      arrived();
    });
    const cut = new ClientGone();
    const pending = forwarder.send(request(url, { cut }));
    await isArrived;
    cut.abort();
    expect(await pending).toEqual({ kind: 'cut' });
    await closed;
  });

  it('answers `cut` at once while the connect to a host that drops packets is still pending, and for a cut already made', async () => {
    const silent = await startSilentHost();
    try {
      const cut = new ClientGone();
      const pending = forwarder.send(request(silent.url, { cut }));
      setTimeout(() => cut.abort(), 50);
      const started = performance.now();
      expect(await pending).toEqual({ kind: 'cut' });
      expect(performance.now() - started).toBeLessThan(2_000);
      expect(await forwarder.send(request(silent.url, { cut }))).toEqual({ kind: 'cut' });
    } finally {
      await silent.close();
    }
  });

  it('rejects the rest of a streaming body when cut after the first byte, and closes the upstream request', async () => {
    let upstreamClosed!: () => void;
    const closed = new Promise<void>((resolve) => (upstreamClosed = resolve));
    const url = await upstream((req, res) => {
      req.socket.on('close', upstreamClosed);
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.write('data: 1\n\n');
    });
    const cut = new ClientGone();
    const outcome = expectResponse(await forwarder.send(request(url, { cut })));
    expect(outcome.first?.toString()).toBe('data: 1\n\n');
    const rest = outcome.rest.next();
    cut.abort();
    await expect(rest).rejects.toThrow(/routing moved/);
    await closed;
  });

  it('rejects the rest of the body when the upstream breaks mid-body', async () => {
    const url = await upstream((_req, res) => {
      res.writeHead(200, { 'content-length': '1000' });
      res.write('partial', () => res.socket?.destroy());
    });
    const outcome = expectResponse(await forwarder.send(request(url)));
    await expect(readRest(outcome)).rejects.toThrow();
  });

  it('stops the upstream response when the caller abandons it', async () => {
    let upstreamClosed!: () => void;
    const closed = new Promise<void>((resolve) => (upstreamClosed = resolve));
    const url = await upstream((req, res) => {
      req.socket.on('close', upstreamClosed);
      res.writeHead(200);
      res.write('first');
    });
    const outcome = expectResponse(await forwarder.send(request(url)));
    outcome.abort();
    await closed;
  });

  it('pauses a fast upstream while the reader lags and resumes it, so a large body arrives whole', async () => {
    const { handler, progress, totalBytes } = largeBodyUpstream('x'); // far past the queue's high-water mark
    const url = await upstream(handler);
    const outcome = expectResponse(await forwarder.send(request(url)));
    // Read nothing until the upstream stops making progress: the forwarder has paused it.
    await writesStall(() => progress.written);
    expect(progress.ended).toBe(false);
    const body = await withDeadline(readRest(outcome), 20_000, 'the rest of the body after a pause');
    expect(body.length).toBe(totalBytes);
  });
});

describe('isConnectionFailure', () => {
  it('looks through `cause` for a connection-level code', () => {
    const reset = Object.assign(new Error('other side closed'), { code: 'UND_ERR_SOCKET' });
    expect(isConnectionFailure(new Error('fetch failed', { cause: reset }))).toBe(true);
    expect(isConnectionFailure(Object.assign(new Error('bad'), { code: 'UND_ERR_INVALID_ARG' }))).toBe(false);
    expect(isConnectionFailure(new Error('plain'))).toBe(false);
  });
});
