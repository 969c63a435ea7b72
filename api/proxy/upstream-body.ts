import type { ServerResponse } from 'node:http';
import type { ForwardOutcome } from './forwarder';
import { clientResponseHeaders } from './headers';
import { announceHeldRouting, endSseWithError } from './sse';

type Response = Extract<ForwardOutcome, { kind: 'response' }>;
export type { Response as UpstreamResponse };

/** How a delivery ended: all bytes written, the client left, or the upstream broke mid-body. */
export type DeliveryResult = 'ok' | 'client_closed' | 'upstream_broken';

const ERROR_BODY_LIMIT = 64 * 1024;

/** Resolves true on 'drain', false if the client connection closes first. */
export function drained(res: ServerResponse): Promise<boolean> {
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

export async function readSome(upstream: Response): Promise<Buffer> {
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

/** The `error` object of an upstream error body (vLLM's `{"error": {…}}`), or one built from its text. */
export async function upstreamError(upstream: Response): Promise<unknown> {
  const raw = await readSome(upstream).catch(() => Buffer.alloc(0));
  try {
    const parsed = JSON.parse(raw.toString('utf8')) as { error?: unknown };
    return parsed?.error ?? parsed;
  } catch {
    return { message: raw.toString('utf8'), code: upstream.statusCode };
  }
}

/**
 * Writes an upstream response to the client: status and headers (plus `extraHeaders`) unless headers already
 * went out, then the body chunk by chunk as it arrives, waiting for 'drain' (backpressure). If headers
 * already went out as a held SSE stream, the routing goes in a comment and the announced trailers, and an
 * upstream error becomes a final `data: {"error": …}` event. A broken upstream mid-body cuts the client connection (the status is gone).
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
      endSseWithError(res, { error: await upstreamError(upstream) });
      return 'ok';
    }
  }
  const end = await pumpBody(res, upstream, async (chunk) => res.write(chunk) || drained(res));
  if (end === 'upstream_broken') {
    res.destroy();
    return 'upstream_broken';
  }
  if (end === 'client_closed') return end;
  res.end();
  return 'ok';
}

/**
 * `deliver` for an answer that may be sent again: its body is read to the end, up to `maxBytes`, before
 * anything of it reaches the client, so an upstream that breaks mid-body returns `upstream_broken` with
 * nothing written (the caller may send the request elsewhere). vLLM sends a non-streaming answer in one
 * piece when generation ends, so this waits for nothing that would not come at once. Past `maxBytes` what was
 * read goes out and the rest streams through as `deliver` does (a break then cuts the connection).
 */
export async function deliverWhole(
  res: ServerResponse,
  upstream: Response,
  extraHeaders: Record<string, string>,
  maxBytes: number,
): Promise<DeliveryResult> {
  if (res.headersSent) return deliver(res, upstream, extraHeaders);
  const parts: Buffer[] = upstream.first ? [upstream.first] : [];
  let size = parts[0]?.length ?? 0;
  while (size <= maxBytes) {
    let next: IteratorResult<Buffer>;
    try {
      next = await upstream.rest.next();
    } catch {
      return res.destroyed ? 'client_closed' : 'upstream_broken';
    }
    if (next.done) {
      res.writeHead(upstream.statusCode, clientResponseHeaders(upstream.headers, extraHeaders));
      res.end(parts.length === 1 ? parts[0] : Buffer.concat(parts));
      return 'ok';
    }
    parts.push(next.value);
    size += next.value.length;
  }
  return deliver(res, { ...upstream, first: Buffer.concat(parts) }, extraHeaders);
}

/**
 * Pumps an upstream body through `write` (false: the client went away, after waiting for 'drain') until it
 * ends; says how it ended. An upstream whose client went away is aborted. Shared by `deliver` and the
 * stream relay (resend/relay.ts), which writes whole SSE events instead of raw chunks.
 */
export async function pumpBody(
  res: ServerResponse,
  upstream: Response,
  write: (chunk: Buffer) => Promise<boolean>,
): Promise<'ended' | 'client_closed' | 'upstream_broken'> {
  try {
    if (upstream.first && !(await write(upstream.first))) {
      upstream.abort();
      return 'client_closed';
    }
    for (;;) {
      let next: IteratorResult<Buffer>;
      try {
        next = await upstream.rest.next();
      } catch {
        return res.destroyed ? 'client_closed' : 'upstream_broken';
      }
      if (next.done) return 'ended';
      if (!(await write(next.value))) {
        upstream.abort();
        return 'client_closed';
      }
    }
  } finally {
    if (res.destroyed && !res.writableFinished) upstream.abort();
  }
}
