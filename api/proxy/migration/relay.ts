import type { IncomingHttpHeaders, ServerResponse } from 'node:http';
import { deliver, type DeliveryResult, drained, readSome, type UpstreamResponse } from '../deliver';
import { clientResponseHeaders } from '../headers';
import { SseFramer, spliceEvent, type Transcript } from './sse-splice';

/** How a response is written to the client; `deliver` unless the stream may have to continue elsewhere. */
export type Relay = (
  res: ServerResponse,
  upstream: UpstreamResponse,
  extraHeaders: Record<string, string>,
) => Promise<RelayResult>;

/** A delivery's end, or `rejected`: the upstream answered a continuation with an error (kept in `t.rejection`). */
export type RelayResult = DeliveryResult | 'rejected';

const isEventStream = (headers: IncomingHttpHeaders) =>
  String(headers['content-type'] ?? '').startsWith('text/event-stream');

/** The `error` object of an upstream error body (vLLM's `{"error": {…}}`), or one built from its text. */
async function upstreamError(upstream: UpstreamResponse): Promise<unknown> {
  const raw = await readSome(upstream).catch(() => Buffer.alloc(0));
  try {
    const parsed = JSON.parse(raw.toString('utf8')) as { error?: unknown };
    return parsed?.error ?? parsed;
  } catch {
    return { message: raw.toString('utf8'), code: upstream.statusCode };
  }
}

/**
 * Relays a streamed completion event by event through `t` (sse-splice.ts), so that what reached the client
 * is known if the upstream breaks: only whole events are written, and a continuation's events are rewritten
 * onto the first part. A non-stream answer to the first part is delivered as it is. Returns
 * `upstream_broken` when the upstream failed or ended before `data: [DONE]`; the client connection stays open.
 */
export async function relaySpliced(
  res: ServerResponse,
  upstream: UpstreamResponse,
  extraHeaders: Record<string, string>,
  t: Transcript,
): Promise<RelayResult> {
  if (upstream.statusCode !== 200 || !isEventStream(upstream.headers)) {
    if (!res.headersSent) return deliver(res, upstream, extraHeaders);
    t.rejection = await upstreamError(upstream);
    return 'rejected';
  }
  if (!res.headersSent) res.writeHead(upstream.statusCode, clientResponseHeaders(upstream.headers, extraHeaders));
  const framer = new SseFramer();
  const relay = async (chunk: Buffer): Promise<boolean> => {
    let out = '';
    for (const event of framer.push(chunk)) {
      const spliced = spliceEvent(t, event);
      if (spliced !== null) out += `${spliced}\n\n`;
    }
    return out === '' || res.write(out) || drained(res);
  };
  try {
    if (upstream.first && !(await relay(upstream.first))) {
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
      if (next.done) break;
      if (!(await relay(next.value))) {
        upstream.abort();
        return 'client_closed';
      }
    }
    if (!t.done) return 'upstream_broken';
    res.end();
    return 'ok';
  } finally {
    if (res.destroyed && !res.writableFinished) upstream.abort();
  }
}
