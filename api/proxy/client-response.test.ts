import http, { type IncomingMessage, type ServerResponse } from 'node:http';
import { listenLocal, type LocalServer } from '../../test/support/local-server';
import { largeBodyUpstream, withDeadline, writesStall } from '../../test/support/stall';
import { ClientResponse, type DeliveryResult } from './client-response';
import { createForwarder } from './forwarder';
import { startSse } from './sse';

const forwarder = createForwarder();
const servers: LocalServer[] = [];
afterAll(async () => {
  await Promise.all(servers.map((s) => s.close()));
  await forwarder.close();
});

async function serve(handler: http.RequestListener): Promise<string> {
  const server = await listenLocal(handler);
  servers.push(server);
  return server.url;
}

/**
 * A proxy of one upstream made of the real forwarder and `ClientResponse.deliver` (what handleInference does
 * once a route is picked). `beforeDeliver` runs first (a held request's SSE headers). Results in order.
 */
async function proxyTo(upstreamUrl: string, beforeDeliver?: (res: ServerResponse) => void) {
  const results: Promise<DeliveryResult>[] = [];
  let settle!: () => void;
  const delivered = new Promise<void>((resolve) => (settle = resolve));
  const url = await serve((req, res) => {
    const client = new ClientResponse(res);
    beforeDeliver?.(res);
    const result = forwarder
      .send({
        url: `${upstreamUrl}${req.url}`,
        method: 'GET',
        headers: {},
        body: null,
        signal: client.gone,
        headersTimeoutMs: 5_000,
      })
      .then((outcome) => {
        if (outcome.kind !== 'response') throw new Error(`upstream outcome ${outcome.kind}`);
        return client.deliver(outcome, { 'x-haru-domain': 'east' });
      });
    results.push(result);
    void result.finally(settle);
  });
  return { url, results, delivered };
}

/** GET `url`; the response is handed over paused so a test decides when (and whether) it is read. */
function get(url: string): Promise<IncomingMessage> {
  return new Promise((resolve, reject) => {
    const req = http.get(url, (res) => {
      res.pause();
      resolve(res);
    });
    req.on('error', reject);
  });
}

/** Reads the rest of `res`; rejects when the connection is cut before the end. */
function readAll(res: IncomingMessage): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const parts: Buffer[] = [];
    res.on('data', (c: Buffer) => parts.push(c));
    res.on('end', () => resolve(Buffer.concat(parts)));
    res.on('aborted', () => reject(new Error('response aborted')));
    res.on('error', reject);
    res.resume();
  });
}

describe('ClientResponse.deliver', () => {
  it("passes the upstream's status, headers and body through, with Haru's headers added", async () => {
    const upstream = await serve((_req, res) => {
      res.writeHead(200, { 'content-type': 'text/event-stream', 'x-upstream': 'vllm' });
      res.write('data: one\n\n');
      res.end('data: two\n\n');
    });
    const proxy = await proxyTo(upstream);
    const res = await get(`${proxy.url}/v1/chat/completions`);
    expect(res.statusCode).toBe(200);
    expect(res.headers).toMatchObject({
      'content-type': 'text/event-stream',
      'x-upstream': 'vllm',
      'x-haru-domain': 'east',
    });
    expect((await readAll(res)).toString()).toBe('data: one\n\ndata: two\n\n');
    expect(await proxy.results[0]).toBe('ok');
  });

  it('streams a large body to a client that reads slowly, resuming the upstream after each pause', async () => {
    const { handler, progress, totalBytes } = largeBodyUpstream('y'); // more than the sockets and the queue hold
    const upstream = await serve(handler);
    const proxy = await proxyTo(upstream);
    const res = await get(`${proxy.url}/v1/chat/completions`);
    // The client has read nothing: backpressure reaches the upstream, which stops being read.
    await writesStall(() => progress.written);
    expect(progress.ended).toBe(false);
    const body = await withDeadline(readAll(res), 20_000, 'the whole body');
    expect(body.length).toBe(totalBytes);
    expect(await proxy.results[0]).toBe('ok');
  });

  it('turns an upstream error on a held stream (headers already sent) into a final SSE error event', async () => {
    const upstream = await serve((_req, res) => {
      res.writeHead(400, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ error: { message: 'bad model', code: 400 } }));
    });
    const proxy = await proxyTo(upstream, (res) => startSse(res));
    const res = await get(`${proxy.url}/v1/chat/completions`);
    expect(res.statusCode).toBe(200);
    expect(res.headers['content-type']).toMatch(/^text\/event-stream/);
    expect((await readAll(res)).toString()).toBe(
      `data: ${JSON.stringify({ error: { message: 'bad model', code: 400 } })}\n\n`,
    );
    expect(await proxy.results[0]).toBe('ok');
  });

  it('wraps a non-JSON upstream error on a held stream as message and status', async () => {
    const upstream = await serve((_req, res) => {
      res.writeHead(502);
      res.end('bad gateway');
    });
    const proxy = await proxyTo(upstream, (res) => startSse(res));
    const res = await get(`${proxy.url}/v1/chat/completions`);
    expect((await readAll(res)).toString()).toBe(
      `data: ${JSON.stringify({ error: { message: 'bad gateway', code: 502 } })}\n\n`,
    );
  });

  it('cuts the client connection when the upstream breaks mid-body', async () => {
    const upstream = await serve((_req, res) => {
      res.writeHead(200, { 'content-length': '1000' });
      res.write('partial', () => res.socket?.destroy());
    });
    const proxy = await proxyTo(upstream);
    const res = await get(`${proxy.url}/v1/chat/completions`);
    await expect(readAll(res)).rejects.toThrow();
    expect(await proxy.results[0]).toBe('upstream_broken');
  });

  it('stops the upstream when the client leaves mid-body', async () => {
    let upstreamClosed!: () => void;
    const closed = new Promise<void>((resolve) => (upstreamClosed = resolve));
    const upstream = await serve((req, res) => {
      req.socket.on('close', upstreamClosed);
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.write('data: first\n\n');
    });
    const proxy = await proxyTo(upstream);
    const res = await get(`${proxy.url}/v1/chat/completions`);
    res.destroy();
    await closed;
    await proxy.delivered;
    expect(await proxy.results[0]).toBe('client_closed');
  });
});
