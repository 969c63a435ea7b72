import type { IncomingHttpHeaders, ServerResponse } from 'node:http';
import { causeCode } from '../../../lib/error-cause';
import type { Logger } from '../../../lib/logger';
import { HaruError } from '../../../schemas/errors';
import type { ApiConfig } from '../../config';
import { toHaruError } from '../../errors';
import type { ApiMetrics } from '../../metrics';
import { deliver } from '../deliver';
import type { InferenceBody } from '../inference-body';
import { endSseWithError } from '../sse';
import { type ContinuableEndpoint, continuationBody, requestRefusal } from './continuation';
import { type Relay, relaySpliced } from './relay';
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
  config: Pick<ApiConfig, 'HARU_MIGRATE_MAX_PER_REQUEST' | 'HARU_MIGRATE_MAX_STREAM_BYTES'>;
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
  const kind = body.stream ? 'stream' : 'request';
  const off = migrationOff(headers) || deps.config.HARU_MIGRATE_MAX_PER_REQUEST === 0;
  let migrations = 0;
  const count = (outcome: 'attempted' | 'succeeded' | 'failed') => deps.metrics.migrations.inc({ kind, outcome });
  const refuse = (reason: MigrationRefusal) => {
    deps.metrics.migrationRefusals.inc({ kind, reason });
    deps.logger.warn('request migration refused', { endpoint, kind, reason });
  };
  const mayResend = () => {
    if (off || migrations >= deps.config.HARU_MIGRATE_MAX_PER_REQUEST) {
      refuse(off ? 'off' : 'limit');
      return false;
    }
    migrations += 1;
    count('attempted');
    deps.logger.info('request migrating', { endpoint, kind, migration: migrations, relayedTokens: 0 });
    return true;
  };
  // Counted once per request that was re-sent at least once: did it complete in the end?
  let counted = false;
  const finish = (outcome: string) => {
    if (migrations > 0 && !counted) count(outcome === 'ok' ? 'succeeded' : 'failed');
    counted = true;
    return outcome;
  };
  const sendOnce: SendAttempt = (bytes, attempt) =>
    send(bytes, attempt).catch((err: unknown) => {
      finish('error');
      throw err;
    });
  if (!body.stream || !continuable(endpoint)) return finish(await sendOnce(raw, { relay: deliver, mayResend }));
  const t = newTranscript(deps.config.HARU_MIGRATE_MAX_STREAM_BYTES);
  const attempt: Attempt = { relay: (r, up, extra) => relaySpliced(r, up, extra, t), mayResend };
  let outcome = await sendOnce(raw, attempt);
  while (outcome === 'upstream_broken' || outcome === 'rejected') {
    if (res.destroyed || res.writableEnded) return finish(outcome);
    if (outcome === 'rejected') {
      endSseWithError(res, { error: t.rejection }, true);
      return finish(outcome);
    }
    if (t.finished) {
      // Everything was generated; only the end of the stream was lost.
      res.end('data: [DONE]\n\n');
      return finish('ok');
    }
    const next = nextBody(endpoint, raw, t, off, migrations, deps.config.HARU_MIGRATE_MAX_PER_REQUEST);
    if (typeof next === 'string') {
      refuse(next);
      const message = `the upstream stream broke and cannot continue on another domain (${next})`;
      endSseWithError(res, new HaruError('upstream_unreachable', message).toBody(), true);
      return finish(outcome);
    }
    migrations += 1;
    count('attempted');
    deps.logger.info('request migrating', { endpoint, kind, migration: migrations, relayedTokens: t.tokens });
    beginContinuation(t);
    try {
      outcome = await sendOnce(next, attempt);
    } catch (err) {
      const error = toHaruError(err);
      endSseWithError(res, error.toBody(), true);
      return finish(error.code);
    }
  }
  return finish(outcome);
}

/** The continuation's body, or why there is none. */
function nextBody(
  endpoint: ContinuableEndpoint,
  raw: Buffer,
  t: Transcript,
  off: boolean,
  migrations: number,
  max: number,
): Buffer | MigrationRefusal {
  if (off) return 'off';
  if (t.refusal) return t.refusal;
  if (migrations >= max) return 'limit';
  const json = parseObject(raw);
  if (!json) return 'body';
  const refusal = requestRefusal(endpoint, json);
  if (refusal) return refusal;
  return Buffer.from(JSON.stringify(continuationBody(endpoint, json, t)));
}
