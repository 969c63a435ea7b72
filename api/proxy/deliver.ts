import type { ServerResponse } from 'node:http';
import type { ForwardOutcome } from './forwarder';
import { clientResponseHeaders } from './headers';
import { announceHeldRouting, endSseWithError } from './sse';

type Response = Extract<ForwardOutcome, { kind: 'response' }>;

/** How a delivery ended: all bytes written, the client left, or the upstream broke mid-body. */
export type DeliveryResult = 'ok' | 'client_closed' | 'upstream_broken';

const ERROR_BODY_LIMIT = 64 * 1024;

/** Resolves true on 'drain', false if the client connection closes first. */
function drained(res: ServerResponse): Promise<boolean> {
  if (res.destroyed) return Promise.resolve(false);
  return new Promise((resolve) => {
    const done = (ok: boolean) => () => {
      res.off('drain', onDrain);
      res.off('close', onClose);
      resolve(ok);
    };
    const onDrain = done(true);
    const onClose = done(false);
    res.once('drain', onDrain);
    res.once('close', onClose);
  });
}

async function readSome(upstream: Response): Promise<Buffer> {
  const parts: Buffer[] = upstream.first ? [upstream.first] : [];
  let size = parts[0]?.length ?? 0;
  while (size < ERROR_BODY_LIMIT) {
    const next = await upstream.rest.next();
    if (next.done) break;
    parts.push(next.value);
    size += next.value.length;
  }
  upstream.abort();
  return Buffer.concat(parts);
}

/**
 * Writes an upstream response to the client: status and headers (plus `extraHeaders`) unless headers already
 * went out, then the body chunk by chunk as it arrives, waiting for 'drain' (backpressure). If headers
 * already went out as a held SSE stream, the routing goes in a comment and the announced trailers; if the upstream answered an error, the error becomes a final
 * `data: {"error": …}` event. A broken upstream mid-body cuts the client connection (the status is gone).
 */
export async function deliver(
  res: ServerResponse,
  upstream: Response,
  extraHeaders: Record<string, string>,
): Promise<DeliveryResult> {
  if (!res.headersSent) {
    res.writeHead(upstream.statusCode, clientResponseHeaders(upstream.headers, extraHeaders));
  } else {
    announceHeldRouting(res, extraHeaders);
    if (upstream.statusCode >= 400) {
      const raw = await readSome(upstream).catch(() => Buffer.alloc(0));
      let parsed: unknown;
      try {
        parsed = JSON.parse(raw.toString('utf8'));
      } catch {
        parsed = { message: raw.toString('utf8'), code: upstream.statusCode };
      }
      const inner = (parsed as { error?: unknown })?.error ?? parsed;
      endSseWithError(res, { error: inner });
      return 'ok';
    }
  }
  try {
    if (upstream.first && !res.write(upstream.first) && !(await drained(res))) {
      upstream.abort();
      return 'client_closed';
    }
    for (;;) {
      let next: IteratorResult<Buffer>;
      try {
        next = await upstream.rest.next();
      } catch {
        if (res.destroyed) return 'client_closed';
        res.destroy();
        return 'upstream_broken';
      }
      if (next.done) break;
      if (!res.write(next.value) && !(await drained(res))) {
        upstream.abort();
        return 'client_closed';
      }
    }
    res.end();
    return 'ok';
  } finally {
    if (res.destroyed && !res.writableFinished) upstream.abort();
  }
}
