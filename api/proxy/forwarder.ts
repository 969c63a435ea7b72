import type { IncomingHttpHeaders } from 'node:http';
import { Agent, request } from 'undici';

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
  /** No response headers within the bound; the upstream request was aborted. */
  | { kind: 'timeout' }
  /** Connection refused or reset before any response byte: nothing reached the client, so it can be retried. */
  | { kind: 'refused'; error: Error }
  /** The client went away first. */
  | { kind: 'aborted' };

export interface ForwardRequest {
  url: string;
  method: 'POST' | 'GET';
  headers: Record<string, string>;
  body: Buffer | null;
  /** Aborts the upstream request (client disconnect). */
  signal: AbortSignal;
  /** Bound on the time to the response headers; once they came, nothing is ever cut. */
  headersTimeoutMs: number;
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
export function isConnectionFailure(err: unknown): boolean {
  for (let e = err as { code?: unknown; cause?: unknown } | undefined, i = 0; e && i < 5; i++) {
    if (typeof e.code === 'string' && CONNECTION_CODES.has(e.code)) return true;
    e = e.cause as typeof e;
  }
  return false;
}

const TIMEOUT = Symbol('headers-timeout');

/**
 * The undici forwarder. Its Agent never times out on its own: the only bound is the caller's time to
 * response headers. After the headers it still waits for the first body chunk (without a timer) before
 * the caller writes anything to the client, so a connection reset before any body byte can be retried
 * elsewhere; from then on a quiet stream is never cut (a long prefill before the first token is normal).
 */
export function createForwarder(opts: { connectTimeoutMs?: number } = {}): Forwarder {
  const agent = new Agent({
    headersTimeout: 0,
    bodyTimeout: 0,
    connect: { timeout: opts.connectTimeoutMs ?? 5_000 },
  });

  async function send(req: ForwardRequest): Promise<ForwardOutcome> {
    if (req.signal.aborted) return { kind: 'aborted' };
    const ctrl = new AbortController();
    const onClientAbort = () => ctrl.abort(req.signal.reason);
    req.signal.addEventListener('abort', onClientAbort, { once: true });
    const timer = setTimeout(() => ctrl.abort(TIMEOUT), req.headersTimeoutMs);
    const started = process.hrtime.bigint();
    const cleanup = () => {
      clearTimeout(timer);
      req.signal.removeEventListener('abort', onClientAbort);
    };
    try {
      const res = await request(req.url, {
        method: req.method,
        headers: req.headers,
        body: req.body ?? undefined,
        signal: ctrl.signal,
        dispatcher: agent,
      });
      clearTimeout(timer);
      const ttfbSeconds = Number(process.hrtime.bigint() - started) / 1e9;
      const rest = res.body[Symbol.asyncIterator]() as AsyncIterator<Buffer>;
      const first = await rest.next();
      // From here on only the client's abort stops the upstream; the listener stays until `abort` or the end.
      return {
        kind: 'response',
        statusCode: res.statusCode,
        headers: res.headers as IncomingHttpHeaders,
        first: first.done ? null : Buffer.from(first.value),
        rest,
        ttfbSeconds,
        abort: () => {
          cleanup();
          ctrl.abort();
        },
      };
    } catch (err) {
      cleanup();
      if (req.signal.aborted) return { kind: 'aborted' };
      if (ctrl.signal.aborted && ctrl.signal.reason === TIMEOUT) return { kind: 'timeout' };
      if (isConnectionFailure(err)) return { kind: 'refused', error: err as Error };
      throw err;
    }
  }

  return {
    send,
    close: () => agent.close(),
  };
}
