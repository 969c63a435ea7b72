import type { IncomingHttpHeaders } from 'node:http';
import { causeCode } from '../../../lib/error-cause';
import type { Logger } from '../../../lib/logger';
import { HaruError } from '../../../schemas/errors';
import type { ApiConfig } from '../../config';
import { toHaruError } from '../../errors';
import type { ApiMetrics } from '../../metrics';
import type { ClientResponse, RelayResult } from '../client-response';
import type { InferenceBody } from '../inference-body';
import type { UpstreamResponse } from '../upstream-body';
import { type ContinuableEndpoint, continuationBody, requestRefusal } from './continuation';
import { beginContinuation, type ResendRefusal, newTranscript, type Transcript } from './sse-splice';

/** How one proxy attempt delivers and whether a request the upstream may have received is sent again. */
export interface Attempt {
  /** Writes the upstream's answer to the client: `deliverWhole`, or `relayStream` for a continuable stream. */
  relay(client: ClientResponse, upstream: UpstreamResponse, extraHeaders: Record<string, string>): Promise<RelayResult>;
  /**
   * Asked when an upstream that was sent the request failed before answering (reset, timeout): true to
   * hold and send it again once the route moves, false to answer the error now.
   */
  mayResend(): boolean;
}

/** Sends `raw` once through the proxy path (routing, holds, delivery); resolves with the outcome label. */
export type SendAttempt = (raw: Buffer, attempt: Attempt) => Promise<string>;

export interface ResendDeps {
  metrics: Pick<ApiMetrics, 'resends' | 'resendRefusals'>;
  logger: Logger;
  config: Pick<ApiConfig, 'HARU_RESEND_MAX_PER_REQUEST' | 'HARU_RESEND_MAX_BYTES'>;
}

// A request that never reached the upstream may always be sent elsewhere: only these are sure of it.
const NEVER_SENT = new Set([
  'ECONNREFUSED',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'ENOTFOUND',
  'EAI_AGAIN',
  'UND_ERR_CONNECT_TIMEOUT',
]);

/** True when the connection failed before the request could reach the upstream (looking through `cause`). */
export const neverSent = (err: unknown): boolean => causeCode(err, (code) => NEVER_SENT.has(code)) !== undefined;

const isOff = (value: string | string[] | undefined): boolean => value?.toString().trim().toLowerCase() === 'off';

/**
 * `X-Haru-Resend: off`: the client asks that its request never be sent twice. `X-Haru-Migrate: off`, the
 * header's name before 1.0, is still accepted (deprecated).
 */
export const resendOff = (headers: IncomingHttpHeaders): boolean =>
  isOff(headers['x-haru-resend']) || isOff(headers['x-haru-migrate']);

const continuable = (endpoint: string): endpoint is ContinuableEndpoint =>
  endpoint === 'chat/completions' || endpoint === 'completions';

function parseObject(raw: Buffer): Record<string, unknown> | null {
  try {
    const json: unknown = JSON.parse(raw.toString('utf8'));
    return json && typeof json === 'object' && !Array.isArray(json) ? (json as Record<string, unknown>) : null;
  } catch {
    return null;
  }
}

/** One request's re-sends: their bound, metrics and log events. */
class Resends {
  private made = 0;
  private settled = false;

  constructor(
    private readonly deps: ResendDeps,
    private readonly endpoint: string,
    private readonly kind: 'stream' | 'request',
    private readonly off: boolean,
  ) {}

  refuse(reason: ResendRefusal): ResendRefusal {
    this.deps.metrics.resendRefusals.inc({ kind: this.kind, reason });
    this.deps.logger.warn('request resend refused', { endpoint: this.endpoint, kind: this.kind, reason });
    return reason;
  }

  /** Takes one re-send; null when granted, else why not (counted as a refusal). */
  take(relayedTokens: number): ResendRefusal | null {
    if (this.off) return this.refuse('off');
    if (this.made >= this.deps.config.HARU_RESEND_MAX_PER_REQUEST) return this.refuse('limit');
    this.made += 1;
    this.deps.metrics.resends.inc({ kind: this.kind, outcome: 'attempted' });
    const fields = { endpoint: this.endpoint, kind: this.kind, resend: this.made, relayedTokens };
    this.deps.logger.info('request resending', fields);
    return null;
  }

  /** Counts, once and only for a request re-sent at least once, whether it completed in the end. */
  settle(outcome: string): string {
    if (this.made > 0 && !this.settled) {
      this.deps.metrics.resends.inc({ kind: this.kind, outcome: outcome === 'ok' ? 'succeeded' : 'failed' });
    }
    this.settled = true;
    return outcome;
  }
}

/**
 * Proxies one inference request so that a failover does not fail it (docs/architecture.md §5.4): a request
 * whose upstream died before answering is held and sent again (`Attempt.mayResend`), and a stream cut
 * mid-answer continues on the new active with what was relayed (continuation.ts), spliced into one stream
 * (sse-splice.ts). At most HARU_RESEND_MAX_PER_REQUEST re-sends. A stream that cannot continue ends with
 * `data: {"error": …}` and `data: [DONE]`.
 */
export async function proxyWithResend(
  deps: ResendDeps,
  endpoint: string,
  headers: IncomingHttpHeaders,
  client: ClientResponse,
  raw: Buffer,
  body: InferenceBody,
  send: SendAttempt,
): Promise<string> {
  const off = resendOff(headers) || deps.config.HARU_RESEND_MAX_PER_REQUEST === 0;
  const resends = new Resends(deps, endpoint, body.stream ? 'stream' : 'request', off);
  if (!body.stream || !continuable(endpoint)) return proxyWhole(deps, client, raw, send, resends);
  const mayResend = () => resends.take(0) === null;
  const sendOnce: SendAttempt = (bytes, attempt) =>
    send(bytes, attempt).catch((err: unknown) => {
      resends.settle('error');
      throw err;
    });
  const t = newTranscript(deps.config.HARU_RESEND_MAX_BYTES);
  const attempt: Attempt = { relay: (c, up, extra) => c.relayStream(up, extra, t), mayResend };
  let outcome = await sendOnce(raw, attempt);
  while (outcome === 'upstream_broken' || outcome === 'rejected') {
    if (client.isOver) break;
    if (outcome === 'rejected') {
      client.endStreamWithError({ error: t.rejection }, true);
      break;
    }
    if (t.finished) {
      // Everything was generated; only the end of the stream was lost.
      client.endStream();
      return resends.settle('ok');
    }
    const next = nextBody(endpoint, raw, t);
    const refusal = typeof next === 'string' ? resends.refuse(next) : resends.take(t.tokens);
    if (refusal || typeof next === 'string') {
      const message = `the upstream stream broke and cannot continue on another domain (${refusal ?? next})`;
      client.endStreamWithError(new HaruError('upstream_unreachable', message).toBody(), true);
      break;
    }
    beginContinuation(t);
    try {
      outcome = await sendOnce(next, attempt);
    } catch (err) {
      const error = toHaruError(err);
      client.endStreamWithError(error.toBody(), true);
      return error.code;
    }
  }
  return resends.settle(outcome);
}

/**
 * A request whose answer is read whole before it is sent (up to HARU_RESEND_MAX_BYTES): a break
 * mid-body is then sent again like one before headers. The resends are the attempt itself (`mayResend`),
 * so the common case, one attempt that succeeds, makes no closure or promise beyond its own.
 */
async function proxyWhole(
  deps: ResendDeps,
  client: ClientResponse,
  raw: Buffer,
  send: SendAttempt,
  resends: Resends,
): Promise<string> {
  const whole = new WholeAttempt(resends, deps.config.HARU_RESEND_MAX_BYTES);
  try {
    let outcome = await send(raw, whole);
    while (outcome === 'upstream_broken' && !client.isStarted && !client.isGone) {
      const refusal = resends.take(0);
      if (refusal) {
        resends.settle('upstream_unreachable');
        const message = `the upstream broke mid-answer and the request cannot be sent again (${refusal})`;
        throw new HaruError('upstream_unreachable', message);
      }
      outcome = await send(raw, whole);
    }
    return resends.settle(outcome);
  } catch (err) {
    // Counted once: a refusal above already settled as upstream_unreachable.
    resends.settle('error');
    throw err;
  }
}

/** The `Attempt` of a request read whole: `ClientResponse.deliverWhole`, and a re-send when the resends allow one. */
class WholeAttempt implements Attempt {
  constructor(
    private readonly resends: Resends,
    private readonly maxBytes: number,
  ) {}

  relay(
    client: ClientResponse,
    upstream: UpstreamResponse,
    extraHeaders: Record<string, string>,
  ): Promise<RelayResult> {
    return client.deliverWhole(upstream, extraHeaders, this.maxBytes);
  }

  mayResend(): boolean {
    return this.resends.take(0) === null;
  }
}

/** The continuation's body, or why what was relayed or the request itself rules one out. */
function nextBody(endpoint: ContinuableEndpoint, raw: Buffer, t: Transcript): Buffer | ResendRefusal {
  if (t.refusal) return t.refusal;
  const json = parseObject(raw);
  if (!json) return 'body';
  return requestRefusal(endpoint, json) ?? Buffer.from(JSON.stringify(continuationBody(endpoint, json, t)));
}
