import type { IncomingHttpHeaders, ServerResponse } from 'node:http';
import type { ErrorBody, HaruError } from '../../schemas/errors';
import { sendError } from '../errors';
import { noteAccess } from '../metrics';
import { ClientGone } from './client-gone';
import { clientResponseHeaders } from './headers';
import { SseFramer, spliceEvent, type Transcript } from './resend/sse-splice';
import { announceHeldRouting, endSseWithError, heldStreamTrailerHeader, startSse, writeSseComment } from './sse';
import { type UpstreamResponse, upstreamError } from './upstream-body';

/** How a delivery ended: all bytes written, the client left, or the upstream broke mid-body. */
export type DeliveryResult = 'ok' | 'client_closed' | 'upstream_broken';

/** A delivery's end, or `rejected`: the upstream answered a continuation with an error (kept in `t.rejection`). */
export type RelayResult = DeliveryResult | 'rejected';

const isEventStream = (headers: IncomingHttpHeaders) =>
  String(headers['content-type'] ?? '').startsWith('text/event-stream');

/**
 * The client's side of one proxied request, and the only writer of its response: hold and first-token pings,
 * the upstream's answer (delivered as it comes, read whole, or relayed event by event for a continuation),
 * and the error that ends it. What went out decides what may still be written: nothing yet (any status),
 * a stream Haru started itself with a ping (routing as trailers, errors as a final SSE event), or the
 * upstream's headers. `gone` fires when the client leaves before the answer ended.
 */
export class ClientResponse {
  readonly gone = new ClientGone();

  constructor(private readonly res: ServerResponse) {
    // 'close' before the response finished means the client went away: stop the upstream too.
    res.on('close', () => {
      if (!res.writableFinished) this.gone.abort();
    });
  }

  /** Headers went out (the upstream's, or a stream Haru started with a ping): the status is fixed. */
  get isStarted(): boolean {
    return this.res.headersSent;
  }

  /** The client left (the connection is closed). */
  get isGone(): boolean {
    return this.res.destroyed;
  }

  /** Nothing more can be written: the client left or the answer ended. */
  get isOver(): boolean {
    return this.res.destroyed || this.res.writableEnded;
  }

  /** Names the fleet and domain in the request's access-log line. */
  noteRouting(fleet: string, domain?: string): void {
    noteAccess(this.res, fleet, domain);
  }

  /**
   * A ping to a stream held for a route move: the first starts the stream with Haru's SSE headers and
   * announces the routing as trailers (the serving domain and revision are known only later).
   */
  pingHeld(fleetSlug: string): void {
    startSse(this.res, { 'x-haru-fleet': fleetSlug, ...heldStreamTrailerHeader });
    writeSseComment(this.res, 'haru: holding request while the fleet fails over');
  }

  /** A ping to a stream whose upstream sent headers but no token yet; the first starts it with `routing`. */
  pingFirstToken(routing: Readonly<Record<string, string>>): void {
    startSse(this.res, routing);
    writeSseComment(this.res, 'haru: waiting for the first token');
  }

  /**
   * Writes an upstream response: status and headers (plus `extraHeaders`) unless headers already went out,
   * then the body chunk by chunk as it arrives, waiting for 'drain' (backpressure). If headers already went
   * out as a held SSE stream, the routing goes in a comment and the announced trailers, and an upstream error
   * becomes a final `data: {"error": …}` event. A broken upstream mid-body cuts the client connection (the
   * status is gone).
   */
  async deliver(upstream: UpstreamResponse, extraHeaders: Record<string, string>): Promise<DeliveryResult> {
    const res = this.res;
    if (!res.headersSent) {
      res.writeHead(upstream.statusCode, clientResponseHeaders(upstream.headers, extraHeaders));
    } else {
      announceHeldRouting(res, extraHeaders);
      if (upstream.statusCode >= 400) {
        endSseWithError(res, { error: await upstreamError(upstream) });
        return 'ok';
      }
    }
    const end = await this.pump(upstream, async (chunk) => res.write(chunk) || this.drained());
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
   * piece when generation ends, so this waits for nothing that would not come at once. Past `maxBytes` what
   * was read goes out and the rest streams through as `deliver` does (a break then cuts the connection).
   */
  async deliverWhole(
    upstream: UpstreamResponse,
    extraHeaders: Record<string, string>,
    maxBytes: number,
  ): Promise<DeliveryResult> {
    const res = this.res;
    if (res.headersSent) return this.deliver(upstream, extraHeaders);
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
    return this.deliver({ ...upstream, first: Buffer.concat(parts) }, extraHeaders);
  }

  /**
   * Relays a streamed completion event by event through `t` (resend/sse-splice.ts), so that what reached the
   * client is known if the upstream breaks: only whole events are written, and a continuation's events are
   * rewritten onto the first part. A non-stream answer to the first part is delivered as it is; one to a
   * continuation is kept in `t.rejection` (`rejected`). Returns `upstream_broken` when the upstream failed or
   * ended before `data: [DONE]`; the client connection then stays open for the continuation.
   */
  async relayStream(
    upstream: UpstreamResponse,
    extraHeaders: Record<string, string>,
    t: Transcript,
  ): Promise<RelayResult> {
    const res = this.res;
    if (upstream.statusCode !== 200 || !isEventStream(upstream.headers)) {
      if (!res.headersSent) return this.deliver(upstream, extraHeaders);
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
      return out === '' || res.write(out) || this.drained();
    };
    const end = await this.pump(upstream, relay);
    if (end === 'client_closed') return end;
    if (end === 'upstream_broken' || !t.done) return 'upstream_broken';
    res.end();
    return 'ok';
  }

  /** Ends a stream whose generation finished but whose `data: [DONE]` was lost with its upstream. */
  endStream(): void {
    this.res.end('data: [DONE]\n\n');
  }

  /** Ends a stream with `data: {"error": …}`, and `data: [DONE]` after it when `done`. */
  endStreamWithError(body: ErrorBody | { error: unknown }, done: boolean): void {
    endSseWithError(this.res, body, done);
  }

  /**
   * Answers `error` the way what already went out allows: the error envelope while nothing did, a final
   * SSE error event on a started stream, and otherwise a cut connection (the status is gone).
   */
  fail(error: HaruError): void {
    const res = this.res;
    if (!res.headersSent) sendError(res, error);
    else if (res.getHeader('content-type')?.toString().startsWith('text/event-stream')) {
      endSseWithError(res, error.toBody());
    } else res.destroy();
  }

  /** Resolves true on 'drain', false if the client connection closes first. */
  private drained(): Promise<boolean> {
    const res = this.res;
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

  /**
   * Pumps an upstream body through `write` (false: the client went away, after waiting for 'drain') until it
   * ends; says how it ended. An upstream whose client went away is aborted.
   */
  private async pump(
    upstream: UpstreamResponse,
    write: (chunk: Buffer) => Promise<boolean>,
  ): Promise<'ended' | 'client_closed' | 'upstream_broken'> {
    const res = this.res;
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
}
