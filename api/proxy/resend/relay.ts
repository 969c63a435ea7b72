import type { IncomingHttpHeaders, ServerResponse } from 'node:http';
import { deliver, type DeliveryResult, drained, pumpBody, upstreamError, type UpstreamResponse } from '../deliver';
import { clientResponseHeaders } from '../headers';
import { announceHeldRouting } from '../sse';
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
  // A held stream (or a continuation) names the domain now serving it, as `deliver` does.
  else announceHeldRouting(res, extraHeaders);
  const framer = new SseFramer();
  const relay = async (chunk: Buffer): Promise<boolean> => {
    let out = '';
    for (const event of framer.push(chunk)) {
      const spliced = spliceEvent(t, event);
      if (spliced !== null) out += `${spliced}\n\n`;
    }
    return out === '' || res.write(out) || drained(res);
  };
  const end = await pumpBody(res, upstream, relay);
  if (end === 'client_closed') return end;
  if (end === 'upstream_broken' || !t.done) return 'upstream_broken';
  res.end();
  return 'ok';
}
