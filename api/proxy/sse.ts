import type { ServerResponse } from 'node:http';
import type { ErrorBody } from '../../schemas/errors';

/** Headers for an event stream the API starts itself (held requests, event follow). */
export const SSE_HEADERS = {
  'content-type': 'text/event-stream; charset=utf-8',
  'cache-control': 'no-cache, no-transform',
  connection: 'keep-alive',
  'x-accel-buffering': 'no',
} as const;

/** Starts an event stream if nothing was written yet (headers set one by one so `getHeader` sees them). */
export function startSse(res: ServerResponse, extra: Record<string, string> = {}): void {
  if (res.headersSent) return;
  for (const [name, value] of Object.entries({ ...SSE_HEADERS, ...extra })) res.setHeader(name, value);
  res.writeHead(200);
}

/** An SSE comment line: ignored by clients, keeps proxies and load balancers from timing out. */
export function writeSseComment(res: ServerResponse, text: string): void {
  res.write(`: ${text.replace(/\n/g, ' ')}\n\n`);
}

/**
 * Routing headers a stream Haru started itself (a held request) sends as trailers: which domain served and at
 * which revision are known only once the route moved, after the first ping's headers went out.
 */
export const HELD_STREAM_TRAILERS = ['x-haru-domain', 'x-haru-route-revision'] as const;

/** The `Trailer` header announcing HELD_STREAM_TRAILERS, for `startSse`. */
export const heldStreamTrailerHeader = { trailer: HELD_STREAM_TRAILERS.join(', ') } as const;

/**
 * For a stream whose headers Haru already sent: names the routing in an SSE comment (clients that cannot
 * read trailers see it) and queues the announced trailers from `routing` for the end of the answer.
 */
export function announceHeldRouting(res: ServerResponse, routing: Record<string, string>): void {
  if (!res.getHeader('trailer')) return;
  const trailers: Record<string, string> = {};
  for (const name of HELD_STREAM_TRAILERS) if (routing[name] !== undefined) trailers[name] = routing[name];
  writeSseComment(
    res,
    `haru: served by domain ${routing['x-haru-domain'] ?? '?'} at route revision ${routing['x-haru-route-revision'] ?? '?'}`,
  );
  res.addTrailers(trailers);
}

/**
 * Ends a stream with `data: {"error": …}`, the way OpenAI streams report an error mid-stream, and with
 * `data: [DONE]` after it when `done` (a stream Haru cannot continue still ends the way a stream ends).
 */
export function endSseWithError(res: ServerResponse, body: ErrorBody | { error: unknown }, done = false): void {
  if (!res.writableEnded) res.end(`data: ${JSON.stringify(body)}\n\n${done ? 'data: [DONE]\n\n' : ''}`);
}
