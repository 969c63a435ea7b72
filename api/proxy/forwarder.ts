import type { IncomingHttpHeaders } from 'node:http';
import { Agent, type Dispatcher, util } from 'undici';
import { causeCode } from '../../lib/error-cause';
import type { AbortLike } from './client-gone';

/** How one upstream attempt ended before anything was written to the client. */
export type ForwardOutcome =
  | {
      kind: 'response';
      statusCode: number;
      headers: IncomingHttpHeaders;
      /** The first body chunk (null for an empty body); the rest comes from `rest`. */
      first: Buffer | null;
      rest: AsyncIterator<Buffer>;
      /** Seconds from sending to the response headers. */
      ttfbSeconds: number;
      /** Stops the upstream response (client went away). */
      abort(): void;
    }
  /**
   * No response headers within `headersTimeoutMs` (`headers`), or headers but no body byte within
   * `firstByteTimeoutMs` (`first_byte`); the upstream request was aborted.
   */
  | { kind: 'timeout'; phase: 'headers' | 'first_byte' }
  /** Connection refused or reset before any response byte: nothing reached the client, so it can be retried. */
  | { kind: 'refused'; error: Error }
  /** `cut` fired before the first body byte (routing moved away from the upstream's domain); aborted upstream. */
  | { kind: 'cut' }
  /** The client went away first. */
  | { kind: 'aborted' };

export interface ForwardRequest {
  url: string;
  method: 'POST' | 'GET';
  headers: Record<string, string>;
  body: Buffer | null;
  /** Aborts the upstream request (client disconnect): an `AbortSignal`, or the proxy's `ClientGone`. */
  signal: AbortLike;
  /**
   * Cuts the exchange in whatever phase it is (api/proxy/in-flight.ts: routing moved away from the upstream's
   * domain): before the first body byte the outcome is `cut`; after it the rest of the body fails, as a broken
   * upstream's does.
   */
  cut?: AbortLike;
  /** Bound on the time to the response headers. */
  headersTimeoutMs: number;
  /** Bound on the time from the headers to the first body byte (unset: none); once a byte came, no bound cuts it. */
  firstByteTimeoutMs?: number;
  /** Called when the response headers came, before the first body byte (the caller may ping its client). */
  onHeaders?: (statusCode: number, headers: IncomingHttpHeaders) => void;
}

export interface Forwarder {
  send(req: ForwardRequest): Promise<ForwardOutcome>;
  close(): Promise<void>;
}

// Errors that mean "the upstream did not take the request": safe to hold and retry elsewhere.
const CONNECTION_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'EPIPE',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'ENOTFOUND',
  'EAI_AGAIN',
  'ETIMEDOUT',
  'UND_ERR_SOCKET',
  'UND_ERR_CONNECT_TIMEOUT',
  'UND_ERR_CLOSED',
]);

/** True for connection-level failures (refused, reset, unreachable), looking through `cause`. */
export const isConnectionFailure = (err: unknown): boolean =>
  causeCode(err, (code) => CONNECTION_CODES.has(code)) !== undefined;

/** Why an upstream attempt was aborted by the forwarder itself. */
class HeadersTimeout extends Error {}
class FirstByteTimeout extends Error {}
class RouteCut extends Error {}

/** An upstream address split once per URL (undici's `request(url)` re-parses it every time). */
const origins = new Map<string, { origin: string; path: string }>();
function splitUrl(url: string): { origin: string; path: string } {
  let hit = origins.get(url);
  if (!hit) {
    const u = new URL(url);
    hit = { origin: u.origin, path: `${u.pathname}${u.search}` };
    if (origins.size >= 1024) origins.clear();
    origins.set(url, hit);
  }
  return hit;
}

const armFirstByteTimer = (exchange: Exchange) => exchange.armFirstByte();

/** Chunks queued before the upstream is paused (the client is slower than the upstream). */
const QUEUE_HIGH_WATER = 16;

/**
 * One upstream exchange on undici's dispatch interface: no response stream object, no async resource,
 * no AbortController of its own. Resolves `outcome` at the first body byte (or the end of an empty
 * body); the rest of the body is a pull iterator that pauses the upstream when chunks pile up.
 */
class Exchange implements Dispatcher.DispatchHandler {
  outcome: Promise<ForwardOutcome>;
  private settle!: (o: ForwardOutcome) => void;
  private fail!: (err: unknown) => void;
  private settled = false;
  private abortUpstream: ((reason: Error) => void) | null = null;
  private reason: Error | null = null;
  private resumeUpstream: (() => void) | null = null;
  private paused = false;
  private statusCode = 0;
  private headers: IncomingHttpHeaders = {};
  private readonly started = process.hrtime.bigint();
  private ttfbSeconds = 0;
  private readonly queue: Buffer[] = [];
  private ended = false;
  private error: unknown = null;
  private waiter: { resolve: (r: IteratorResult<Buffer>) => void; reject: (err: unknown) => void } | null = null;
  private readonly timer: NodeJS.Timeout;
  private firstByteTimer: NodeJS.Timeout | undefined;
  private readonly onClientAbort = () => this.abort(new Error('client closed the request'));
  private readonly onCut = () => this.abort(new RouteCut('routing moved away from the upstream'));

  constructor(
    private readonly signal: AbortLike,
    headersTimeoutMs: number,
    private readonly opts: Pick<ForwardRequest, 'firstByteTimeoutMs' | 'onHeaders' | 'cut'> = {},
  ) {
    this.outcome = new Promise<ForwardOutcome>((resolve, reject) => {
      this.settle = resolve;
      this.fail = reject;
    });
    signal.addEventListener('abort', this.onClientAbort, { once: true });
    opts.cut?.addEventListener('abort', this.onCut, { once: true });
    this.timer = setTimeout(() => this.abort(new HeadersTimeout()), headersTimeoutMs);
  }

  private abort(reason: Error): void {
    if (this.reason) return;
    this.reason = reason;
    if (this.abortUpstream) return this.abortUpstream(reason);
    // Not connected yet: undici calls onConnect only once its connect completes, and against a host that drops
    // packets that is the dispatcher's connect timeout, not this bound. Settle now; onConnect aborts the rest.
    this.onError(reason);
  }

  private cleanup(): void {
    clearTimeout(this.timer);
    clearTimeout(this.firstByteTimer);
    this.signal.removeEventListener('abort', this.onClientAbort);
    this.opts.cut?.removeEventListener('abort', this.onCut);
  }

  onConnect(abort: (err?: Error) => void): void {
    this.abortUpstream = abort;
    if (this.reason) abort(this.reason);
  }

  onHeaders(statusCode: number, rawHeaders: Buffer[], resume: () => void): boolean {
    if (statusCode < 200) return true;
    clearTimeout(this.timer);
    this.ttfbSeconds = Number(process.hrtime.bigint() - this.started) / 1e9;
    this.statusCode = statusCode;
    this.headers = util.parseHeaders(rawHeaders) as IncomingHttpHeaders;
    this.resumeUpstream = resume;
    // Armed after this read: a body that came in the same packet as the headers (vLLM's JSON answers) has
    // settled by then, and no timer is made only to be cleared.
    if (this.opts.firstByteTimeoutMs !== undefined) process.nextTick(armFirstByteTimer, this);
    this.opts.onHeaders?.(statusCode, this.headers);
    return true;
  }

  /** Starts the bound from the headers to the first body byte, unless that byte (or the end) already came. */
  armFirstByte(): void {
    if (this.settled || this.reason) return;
    this.firstByteTimer = setTimeout(() => this.abort(new FirstByteTimeout()), this.opts.firstByteTimeoutMs);
  }

  onData(chunk: Buffer): boolean {
    if (!this.settled) {
      clearTimeout(this.firstByteTimer);
      this.respond(chunk);
      return true;
    }
    if (this.waiter) {
      const w = this.waiter;
      this.waiter = null;
      w.resolve({ done: false, value: chunk });
      return true;
    }
    this.queue.push(chunk);
    if (this.queue.length < QUEUE_HIGH_WATER) return true;
    this.paused = true;
    return false;
  }

  onComplete(): void {
    this.cleanup();
    this.ended = true;
    if (!this.settled) return this.respond(null);
    if (this.waiter && this.queue.length === 0) {
      const w = this.waiter;
      this.waiter = null;
      w.resolve({ done: true, value: undefined });
    }
  }

  onError(err: Error): void {
    this.cleanup();
    if (!this.settled) {
      this.settled = true;
      if (this.signal.aborted) return this.settle({ kind: 'aborted' });
      if (this.reason instanceof HeadersTimeout) return this.settle({ kind: 'timeout', phase: 'headers' });
      if (this.reason instanceof FirstByteTimeout) return this.settle({ kind: 'timeout', phase: 'first_byte' });
      if (this.reason instanceof RouteCut) return this.settle({ kind: 'cut' });
      if (isConnectionFailure(err)) return this.settle({ kind: 'refused', error: err });
      return this.fail(err);
    }
    this.error = err;
    if (this.waiter) {
      const w = this.waiter;
      this.waiter = null;
      w.reject(err);
    }
  }

  private respond(first: Buffer | null): void {
    this.settled = true;
    // From here on only the client's abort (or the caller's `abort`) stops the upstream.
    this.settle({
      kind: 'response',
      statusCode: this.statusCode,
      headers: this.headers,
      first,
      rest: this,
      ttfbSeconds: this.ttfbSeconds,
      abort: () => {
        this.cleanup();
        if (!this.ended) this.abort(new Error('response abandoned'));
      },
    });
  }

  /** The rest of the body (`rest` of the outcome), chunk by chunk; resumes a paused upstream once drained. */
  next(): Promise<IteratorResult<Buffer>> {
    const chunk = this.queue.shift();
    if (chunk) {
      if (this.paused && this.queue.length === 0) {
        this.paused = false;
        this.resumeUpstream?.();
      }
      return Promise.resolve({ done: false, value: chunk });
    }
    if (this.error) return Promise.reject(this.error);
    if (this.ended) return Promise.resolve({ done: true, value: undefined });
    return new Promise((resolve, reject) => {
      this.waiter = { resolve, reject };
    });
  }
}

/**
 * The undici forwarder. Its Agent never times out on its own: the bounds are the caller's, on the time to
 * response headers and from them to the first body byte. It waits for that first body chunk before the
 * caller writes anything of the upstream's to the client, so a connection reset before any body byte can
 * be retried elsewhere; from then on a quiet stream is never cut.
 */
export function createForwarder(opts: { connectTimeoutMs?: number } = {}): Forwarder {
  const agent = new Agent({
    headersTimeout: 0,
    bodyTimeout: 0,
    connect: { timeout: opts.connectTimeoutMs ?? 5_000 },
  });

  function send(req: ForwardRequest): Promise<ForwardOutcome> {
    if (req.signal.aborted) return Promise.resolve({ kind: 'aborted' });
    if (req.cut?.aborted) return Promise.resolve({ kind: 'cut' });
    const exchange = new Exchange(req.signal, req.headersTimeoutMs, req);
    const { origin, path } = splitUrl(req.url);
    agent.dispatch({ origin, path, method: req.method, headers: req.headers, body: req.body ?? undefined }, exchange);
    return exchange.outcome;
  }

  return {
    send,
    close: () => agent.close(),
  };
}
