import type { IncomingHttpHeaders, ServerResponse } from 'node:http';
import { causeCode } from '../../../lib/error-cause';
import type { Logger } from '../../../lib/logger';
import { HaruError } from '../../../schemas/errors';
import type { ApiConfig } from '../../config';
import { toHaruError } from '../../errors';
import type { ApiMetrics } from '../../metrics';
import { deliverWhole, type UpstreamResponse } from '../deliver';
import type { InferenceBody } from '../inference-body';
import { endSseWithError } from '../sse';
import { type ContinuableEndpoint, continuationBody, requestRefusal } from './continuation';
import { type Relay, type RelayResult, relaySpliced } from './relay';
import { beginContinuation, type MigrationRefusal, newTranscript, type Transcript } from './sse-splice';

/** How one proxy attempt delivers and whether a request the upstream may have received is sent again. */
export interface Attempt {
  relay: Relay;
  /**
   * Asked when an upstream that was sent the request failed before answering (reset, timeout): true to
   * hold and send it again once the route moves, false to answer the error now.
   */
  mayResend(): boolean;
}

/** Sends `raw` once through the proxy path (routing, holds, delivery); resolves with the outcome label. */
export type SendAttempt = (raw: Buffer, attempt: Attempt) => Promise<string>;

export interface MigrationDeps {
  metrics: Pick<ApiMetrics, 'migrations' | 'migrationRefusals'>;
  logger: Logger;
  config: Pick<
    ApiConfig,
    'HARU_MIGRATE_MAX_PER_REQUEST' | 'HARU_MIGRATE_MAX_STREAM_BYTES' | 'HARU_MIGRATE_MAX_BODY_BYTES'
  >;
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

/** `X-Haru-Migrate: off`: the client asks that its request never be sent twice. */
export const migrationOff = (headers: IncomingHttpHeaders): boolean =>
  headers['x-haru-migrate']?.toString().trim().toLowerCase() === 'off';

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
class Migrations {
  private made = 0;
  private settled = false;

  constructor(
    private readonly deps: MigrationDeps,
    private readonly endpoint: string,
    private readonly kind: 'stream' | 'request',
    private readonly off: boolean,
  ) {}

  refuse(reason: MigrationRefusal): MigrationRefusal {
    this.deps.metrics.migrationRefusals.inc({ kind: this.kind, reason });
    this.deps.logger.warn('request migration refused', { endpoint: this.endpoint, kind: this.kind, reason });
    return reason;
  }

  /** Takes one re-send; null when granted, else why not (counted as a refusal). */
  take(relayedTokens: number): MigrationRefusal | null {
    if (this.off) return this.refuse('off');
    if (this.made >= this.deps.config.HARU_MIGRATE_MAX_PER_REQUEST) return this.refuse('limit');
    this.made += 1;
    this.deps.metrics.migrations.inc({ kind: this.kind, outcome: 'attempted' });
    const fields = { endpoint: this.endpoint, kind: this.kind, migration: this.made, relayedTokens };
    this.deps.logger.info('request migrating', fields);
    return null;
  }

  /** Counts, once and only for a request re-sent at least once, whether it completed in the end. */
  settle(outcome: string): string {
    if (this.made > 0 && !this.settled) {
      this.deps.metrics.migrations.inc({ kind: this.kind, outcome: outcome === 'ok' ? 'succeeded' : 'failed' });
    }
    this.settled = true;
    return outcome;
  }
}

/**
 * Proxies one inference request so that a failover does not fail it (docs/architecture.md §5.4): a request
 * whose upstream died before answering is held and sent again (`Attempt.mayResend`), and a stream cut
 * mid-answer continues on the new active with what was relayed (continuation.ts), spliced into one stream
 * (sse-splice.ts). At most HARU_MIGRATE_MAX_PER_REQUEST re-sends. A stream that cannot continue ends with
 * `data: {"error": …}` and `data: [DONE]`.
 */
export async function proxyWithMigration(
  deps: MigrationDeps,
  endpoint: string,
  headers: IncomingHttpHeaders,
  res: ServerResponse,
  raw: Buffer,
  body: InferenceBody,
  send: SendAttempt,
): Promise<string> {
  const off = migrationOff(headers) || deps.config.HARU_MIGRATE_MAX_PER_REQUEST === 0;
  const migrations = new Migrations(deps, endpoint, body.stream ? 'stream' : 'request', off);
  if (!body.stream || !continuable(endpoint)) return proxyWhole(deps, res, raw, send, migrations);
  const mayResend = () => migrations.take(0) === null;
  const sendOnce: SendAttempt = (bytes, attempt) =>
    send(bytes, attempt).catch((err: unknown) => {
      migrations.settle('error');
      throw err;
    });
  const t = newTranscript(deps.config.HARU_MIGRATE_MAX_STREAM_BYTES);
  const attempt: Attempt = { relay: (r, up, extra) => relaySpliced(r, up, extra, t), mayResend };
  let outcome = await sendOnce(raw, attempt);
  while (outcome === 'upstream_broken' || outcome === 'rejected') {
    if (res.destroyed || res.writableEnded) break;
    if (outcome === 'rejected') {
      endSseWithError(res, { error: t.rejection }, true);
      break;
    }
    if (t.finished) {
      // Everything was generated; only the end of the stream was lost.
      res.end('data: [DONE]\n\n');
      return migrations.settle('ok');
    }
    const next = nextBody(endpoint, raw, t);
    const refusal = typeof next === 'string' ? migrations.refuse(next) : migrations.take(t.tokens);
    if (refusal || typeof next === 'string') {
      const message = `the upstream stream broke and cannot continue on another domain (${refusal ?? next})`;
      endSseWithError(res, new HaruError('upstream_unreachable', message).toBody(), true);
      break;
    }
    beginContinuation(t);
    try {
      outcome = await sendOnce(next, attempt);
    } catch (err) {
      const error = toHaruError(err);
      endSseWithError(res, error.toBody(), true);
      return error.code;
    }
  }
  return migrations.settle(outcome);
}

/**
 * A request whose answer is read whole before it is sent (up to HARU_MIGRATE_MAX_BODY_BYTES): a break
 * mid-body is then sent again like one before headers. The migrations are the attempt itself (`mayResend`),
 * so the common case, one attempt that succeeds, makes no closure or promise beyond its own.
 */
async function proxyWhole(
  deps: MigrationDeps,
  res: ServerResponse,
  raw: Buffer,
  send: SendAttempt,
  migrations: Migrations,
): Promise<string> {
  const whole = new WholeAttempt(migrations, deps.config.HARU_MIGRATE_MAX_BODY_BYTES);
  try {
    let outcome = await send(raw, whole);
    while (outcome === 'upstream_broken' && !res.headersSent && !res.destroyed) {
      const refusal = migrations.take(0);
      if (refusal) {
        migrations.settle('upstream_unreachable');
        const message = `the upstream broke mid-answer and the request cannot be sent again (${refusal})`;
        throw new HaruError('upstream_unreachable', message);
      }
      outcome = await send(raw, whole);
    }
    return migrations.settle(outcome);
  } catch (err) {
    // Counted once: a refusal above already settled as upstream_unreachable.
    migrations.settle('error');
    throw err;
  }
}

/** The `Attempt` of a request read whole: `deliverWhole`, and a re-send when the migrations allow one. */
class WholeAttempt implements Attempt {
  constructor(
    private readonly migrations: Migrations,
    private readonly maxBytes: number,
  ) {}

  relay(res: ServerResponse, upstream: UpstreamResponse, extraHeaders: Record<string, string>): Promise<RelayResult> {
    return deliverWhole(res, upstream, extraHeaders, this.maxBytes);
  }

  mayResend(): boolean {
    return this.migrations.take(0) === null;
  }
}

/** The continuation's body, or why what was relayed or the request itself rules one out. */
function nextBody(endpoint: ContinuableEndpoint, raw: Buffer, t: Transcript): Buffer | MigrationRefusal {
  if (t.refusal) return t.refusal;
  const json = parseObject(raw);
  if (!json) return 'body';
  return requestRefusal(endpoint, json) ?? Buffer.from(JSON.stringify(continuationBody(endpoint, json, t)));
}
