import type { IncomingMessage, ServerResponse } from 'node:http';
import { noteAccess } from '../metrics';
import type { RequestHandler } from 'express';
import { HaruError } from '../../schemas/errors';
import type { ApiConfig } from '../config';
import { sendError, toHaruError } from '../errors';
import type { Logger } from '../../lib/logger';
import type { ApiMetrics } from '../metrics';
import { deliver } from './deliver';
import type { Forwarder } from './forwarder';
import { upstreamRequestHeaders } from './headers';
import type { HealthSignal } from './health-signal';
import { type HoldQueue, waitForRouteMove } from './hold-queue';
import { type InferenceBody, readInferenceBody } from './inference-body';
import { holdReason, type InferenceEndpoint, routeModel, upstreamUrl } from './route-table';
import type { Routing, RoutingCache } from './routing-cache';
import { endSseWithError, startSse, writeSseComment } from './sse';

/** Everything the proxy path needs; built once in createApp. */
export interface ProxyDeps {
  cache: RoutingCache;
  forwarder: Forwarder;
  holdQueue: HoldQueue;
  healthSignal: HealthSignal;
  metrics: ApiMetrics;
  logger: Logger;
  config: Pick<
    ApiConfig,
    | 'HARU_DEFAULT_FLEET'
    | 'HARU_CHAT_HEADER_TIMEOUT_MS'
    | 'HARU_CHAT_HOLD_MS'
    | 'HARU_CHAT_HOLD_PING_MS'
    | 'HARU_CHAT_HOLD_RECHECK_MS'
  >;
  now: () => Date;
}

/** The fleet a proxy request is for: `X-Haru-Fleet`, else HARU_DEFAULT_FLEET, else 400. */
export function requestFleet(req: IncomingMessage, defaultFleet: string | undefined): string {
  const header = req.headers['x-haru-fleet']?.toString().trim();
  const fleet = header || defaultFleet;
  if (!fleet) throw new HaruError('invalid_request', 'no fleet: send X-Haru-Fleet or set HARU_DEFAULT_FLEET');
  return fleet;
}

/** Headers Haru adds to every proxied answer: which domain served, at which revision, and staleness. */
export function routingHeaders(routing: Routing, domainSlug?: string): Record<string, string> {
  return {
    'x-haru-fleet': routing.snapshot.slug,
    'x-haru-route-revision': String(routing.snapshot.routeRevision),
    ...(domainSlug ? { 'x-haru-domain': domainSlug } : {}),
    ...(routing.stale ? { 'x-haru-routing': 'stale' } : {}),
  };
}

/** A request waiting for a route move: holds a queue place and, for streams, pings the client. */
interface Hold {
  leave(outcome: 'moved' | 'timeout' | 'closed' | 'failed'): void;
  stopPings(): void;
}

function enterHold(deps: ProxyDeps, res: ServerResponse, body: InferenceBody): Hold | null {
  const leaveQueue = deps.holdQueue.tryEnter();
  if (!leaveQueue) {
    deps.metrics.holdOutcomes.inc({ outcome: 'rejected' });
    return null;
  }
  // Headers go out only at the first ping, so a short hold still passes the upstream's own status through.
  const pings = body.stream
    ? setInterval(() => {
        startSse(res);
        writeSseComment(res, 'haru: holding request while the fleet fails over');
      }, deps.config.HARU_CHAT_HOLD_PING_MS)
    : undefined;
  let left = false;
  const stopPings = () => clearInterval(pings);
  return {
    stopPings,
    leave(outcome) {
      if (left) return;
      left = true;
      stopPings();
      leaveQueue();
      deps.metrics.holdOutcomes.inc({ outcome });
    },
  };
}

/**
 * One proxied request: route from the cache, forward, and on "no active / model not on the active /
 * connection refused before any byte" hold while a route move can come (holdReason), retrying when the
 * route moves or at each recheck tick. Resolves with the outcome label for metrics; throws HaruError.
 */
async function proxyOnce(
  deps: ProxyDeps,
  endpoint: InferenceEndpoint,
  req: IncomingMessage,
  res: ServerResponse,
  raw: Buffer,
  body: InferenceBody,
  signal: AbortSignal,
): Promise<string> {
  const fleetRef = requestFleet(req, deps.config.HARU_DEFAULT_FLEET);
  const headers = upstreamRequestHeaders(req.headers);
  const deadline = deps.now().getTime() + deps.config.HARU_CHAT_HOLD_MS;
  let hold: Hold | null = null;
  let holdOutcome: 'moved' | 'timeout' | 'closed' | 'failed' = 'failed';
  try {
    for (;;) {
      const routing = await deps.cache.get(fleetRef);
      const snapshot = routing.snapshot;
      if (routing.stale) deps.metrics.staleRouting.inc({ fleet: snapshot.slug });
      const target = routeModel(snapshot, body.model);
      let failure: HaruError;
      let refused = false;
      noteAccess(res, { fleet: snapshot.slug, ...(target.kind === 'ok' ? { domain: target.domain.slug } : {}) });
      if (target.kind === 'ok') {
        const outcome = await deps.forwarder.send({
          url: upstreamUrl(target.servingUrl, endpoint),
          method: 'POST',
          headers,
          body: raw,
          signal,
          headersTimeoutMs: deps.config.HARU_CHAT_HEADER_TIMEOUT_MS,
        });
        if (outcome.kind === 'aborted') return (holdOutcome = 'closed');
        if (outcome.kind === 'timeout') {
          throw new HaruError(
            'upstream_timeout',
            `domain ${target.domain.slug} sent no response headers within ${deps.config.HARU_CHAT_HEADER_TIMEOUT_MS} ms`,
          );
        }
        if (outcome.kind === 'response') {
          hold?.stopPings();
          holdOutcome = 'moved';
          deps.metrics.proxyTtfb.observe({ endpoint }, outcome.ttfbSeconds);
          const result = await deliver(res, outcome, routingHeaders(routing, target.domain.slug));
          return result === 'ok' ? 'ok' : result;
        }
        refused = true;
        deps.healthSignal.report(snapshot.id);
        failure = new HaruError(
          'upstream_unreachable',
          `domain ${target.domain.slug} refused the connection for model "${body.model}"`,
        );
      } else {
        failure = target.error;
      }
      if (signal.aborted) return (holdOutcome = 'closed');
      // Decide on a fresh read: the cached snapshot may predate the promotion we would wait for.
      const fresh = await deps.cache.refresh(fleetRef);
      if (fresh.snapshot.routeRevision !== snapshot.routeRevision) continue;
      const left = deadline - deps.now().getTime();
      if (!holdReason(fresh.snapshot, body.model, refused)) throw failure;
      if (left <= 0) {
        holdOutcome = 'timeout';
        throw new HaruError(
          failure.code,
          `${failure.message} (held ${deps.config.HARU_CHAT_HOLD_MS} ms, no route move)`,
        );
      }
      if (!hold) {
        hold = enterHold(deps, res, body);
        if (!hold) {
          throw new HaruError('overloaded', `${deps.holdQueue.max} requests are already held for failover`, {
            retryAfterSeconds: Math.max(1, Math.ceil(deps.config.HARU_CHAT_HOLD_MS / 1000)),
          });
        }
      }
      const woke = await waitForRouteMove(
        deps.cache,
        snapshot.id,
        snapshot.routeRevision,
        Math.min(deps.config.HARU_CHAT_HOLD_RECHECK_MS, left),
        signal,
      );
      if (woke === 'aborted') return (holdOutcome = 'closed');
    }
  } finally {
    hold?.leave(holdOutcome);
  }
}

/**
 * One inference request whose body was read (a raw Buffer, or undefined when there was none): proxies it and
 * answers errors in the envelope (or as a final SSE event once a stream started). Plain Node objects, so
 * both the lean entry (api/proxy/lean.ts) and the Express route use it.
 */
export async function handleInference(
  deps: ProxyDeps,
  endpoint: InferenceEndpoint,
  req: IncomingMessage,
  res: ServerResponse,
  rawBody: unknown,
): Promise<void> {
  const started = process.hrtime.bigint();
  const ctrl = new AbortController();
  // 'close' before the response finished means the client went away: stop the upstream too.
  res.on('close', () => {
    if (!res.writableFinished) ctrl.abort();
  });
  let outcome = 'ok';
  try {
    const body = readInferenceBody(rawBody);
    outcome = await proxyOnce(deps, endpoint, req, res, rawBody as Buffer, body, ctrl.signal);
  } catch (err) {
    const error = toHaruError(err);
    outcome = error.code;
    if (error.code === 'internal_error') {
      deps.logger.error('proxy request failed', {
        endpoint,
        error: err instanceof Error ? err.message : String(err),
      });
    }
    if (!res.headersSent) sendError(res, error);
    else if (res.getHeader('content-type')?.toString().startsWith('text/event-stream')) {
      endSseWithError(res, error.toBody());
    } else res.destroy();
  } finally {
    const seconds = Number(process.hrtime.bigint() - started) / 1e9;
    deps.metrics.proxyDuration.observe({ endpoint, outcome }, seconds);
  }
}

/** Express handler for one inference endpoint. The body arrives as a raw Buffer (express.raw). */
export function inferenceHandler(deps: ProxyDeps, endpoint: InferenceEndpoint): RequestHandler {
  return (req, res) => handleInference(deps, endpoint, req, res, req.body);
}
