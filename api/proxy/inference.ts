import type { IncomingMessage, ServerResponse } from 'node:http';
import { noteAccess } from '../metrics';
import type { RequestHandler } from 'express';
import { HaruError } from '../../schemas/errors';
import type { ApiConfig } from '../config';
import { logRequestError, sendError, toHaruError } from '../errors';
import type { Logger } from '../../lib/logger';
import type { ApiMetrics } from '../metrics';
import { type AbortLike, ClientGone } from './client-gone';
import type { Forwarder, ForwardOutcome } from './forwarder';
import { upstreamRequestHeaders } from './headers';
import type { MonitorSignals } from './monitor-signals';
import { type HoldQueue, waitForRouteMove } from './hold-queue';
import type { InFlightRegistry } from './in-flight';
import { type InferenceBody, readInferenceBody } from './inference-body';
import { expectedFailoverSeconds } from '../../core/route-eligibility';
import { type Attempt, neverSent, proxyWithResend } from './resend/resend';
import { type InferenceEndpoint, upstreamUrl } from '../../core/serving-url';
import { holdReason, noFailoverReason, routeModel } from './route-table';
import type { Routing, RoutingCache } from './routing-cache';
import type { SleepCheck } from './sleep-check';
import { endSseWithError, heldStreamTrailerHeader, startSse, writeSseComment } from './sse';
import { withUpstreamAuth } from './upstream-auth';

/** Everything the proxy path needs; built once in createApp. */
export interface ProxyDeps {
  cache: RoutingCache;
  forwarder: Forwarder;
  holdQueue: HoldQueue;
  /** Exchanges in flight per domain: a route move away from a domain cuts them (api/proxy/in-flight.ts). */
  inFlight: InFlightRegistry;
  /** Upstream failures and served answers, told to the fleet monitor (api/proxy/monitor-signals.ts). */
  monitorSignals: MonitorSignals;
  /** Asked before routing on a stale snapshot: a domain that reports asleep gets no request. */
  sleepCheck: SleepCheck;
  metrics: ApiMetrics;
  logger: Logger;
  config: Pick<
    ApiConfig,
    | 'HARU_DEFAULT_FLEET'
    | 'HARU_CHAT_HEADER_TIMEOUT_MS'
    | 'HARU_CHAT_FIRST_BYTE_TIMEOUT_MS'
    | 'HARU_CHAT_HOLD_MS'
    | 'HARU_CHAT_HOLD_QUIET_MS'
    | 'HARU_CHAT_HOLD_PING_MS'
    | 'HARU_CHAT_HOLD_RECHECK_MS'
    | 'HARU_RESEND_MAX_PER_REQUEST'
    | 'HARU_RESEND_MAX_STREAM_BYTES'
    | 'HARU_RESEND_MAX_BODY_BYTES'
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
  const headers: Record<string, string> = {
    'x-haru-fleet': routing.snapshot.slug,
    'x-haru-route-revision': String(routing.snapshot.routeRevision),
  };
  if (domainSlug) headers['x-haru-domain'] = domainSlug;
  if (routing.stale) headers['x-haru-routing'] = 'stale';
  return headers;
}

/**
 * `routingHeaders` for a routed request, built once per snapshot, domain and staleness (a snapshot is
 * replaced, never changed, when routing moves) and shared read-only by every request routed from it.
 */
const routedHeaders = new WeakMap<object, Map<string, Readonly<Record<string, string>>>>();
function routedHeadersFor(routing: Routing, domainSlug: string): Readonly<Record<string, string>> {
  let bySlug = routedHeaders.get(routing.snapshot);
  if (!bySlug) routedHeaders.set(routing.snapshot, (bySlug = new Map()));
  const key = `${routing.stale ? 1 : 0}${domainSlug}`;
  let headers = bySlug.get(key);
  if (!headers) bySlug.set(key, (headers = Object.freeze(routingHeaders(routing, domainSlug))));
  return headers;
}

/** A request waiting for a route move: holds a queue place and, for streams, pings the client. */
interface Hold {
  leave(outcome: 'moved' | 'timeout' | 'closed' | 'failed'): void;
  stopPings(): void;
}

function enterHold(deps: ProxyDeps, res: ServerResponse, body: InferenceBody, routing: Routing): Hold | null {
  const leaveQueue = deps.holdQueue.tryEnter();
  if (!leaveQueue) {
    deps.metrics.holdOutcomes.inc({ outcome: 'rejected' });
    return null;
  }
  // Headers go out only at the first ping, so a short hold still passes the upstream's own status through.
  const pings = body.stream
    ? setInterval(() => {
        // The serving domain and revision are known only later: they come as trailers (HELD_STREAM_TRAILERS).
        startSse(res, { 'x-haru-fleet': routing.snapshot.slug, ...heldStreamTrailerHeader });
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
 * Pings a streaming client while an upstream that sent its headers has not sent a body byte (a long prefill,
 * or a stalled server): the first ping starts the stream with Haru's own SSE headers. `stop` ends the pings.
 */
function pingUntilFirstByte(deps: ProxyDeps, res: ServerResponse, routing: Readonly<Record<string, string>>) {
  let pings: NodeJS.Timeout | undefined;
  return {
    onHeaders: (statusCode: number) => {
      if (statusCode >= 400) return;
      pings = setInterval(() => {
        startSse(res, routing);
        writeSseComment(res, 'haru: waiting for the first token');
      }, deps.config.HARU_CHAT_HOLD_PING_MS);
    },
    stop: () => clearInterval(pings),
  };
}

/**
 * What an upstream answer tells besides itself: its time to headers (`haru_proxy_upstream_ttfb_seconds`) and,
 * for a 2xx, the domain's served answer (a store write at most every 250 ms per domain). Neither is what the
 * client waits for, so both run after the answer's first write.
 */
function noteResponse(
  deps: ProxyDeps,
  endpoint: InferenceEndpoint,
  ttfbSeconds: number,
  statusCode: number,
  domainId: string,
): void {
  deps.metrics.proxyTtfb.observe({ endpoint }, ttfbSeconds);
  if (statusCode >= 200 && statusCode < 300) deps.monitorSignals.servedAnswer(domainId);
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
  signal: AbortLike,
  attempt: Attempt,
): Promise<string> {
  const fleetRef = requestFleet(req, deps.config.HARU_DEFAULT_FLEET);
  const headers = upstreamRequestHeaders(req.headers);
  // A held stream is pinged; a non-streaming request sends nothing, so its hold stays under LB idle timeouts.
  const holdMs = body.stream
    ? deps.config.HARU_CHAT_HOLD_MS
    : Math.min(deps.config.HARU_CHAT_HOLD_MS, deps.config.HARU_CHAT_HOLD_QUIET_MS);
  const deadline = deps.now().getTime() + holdMs;
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
      let sent = false;
      noteAccess(res, snapshot.slug, target.kind === 'ok' ? target.domain.slug : undefined);
      // A stale route may point at a domain a promotion since put to sleep: confirm it before sending.
      const staleAsleep = target.kind === 'ok' && routing.stale && (await deps.sleepCheck.isAsleep(target.servingUrl));
      if (target.kind === 'ok' && staleAsleep) {
        failure = new HaruError(
          'domain_unavailable',
          `routing for fleet ${snapshot.slug} is stale (state store unreachable) and domain ${target.domain.slug} reports model "${body.model}" asleep`,
        );
      } else if (target.kind === 'ok') {
        const routed = routedHeadersFor(routing, target.domain.slug);
        const upstreamHeaders = withUpstreamAuth(headers, target, body.model);
        // Only a stream is pinged while its first token is awaited: a non-streaming request makes no pinger.
        const pinger = body.stream ? pingUntilFirstByte(deps, res, routed) : undefined;
        // Registered until its answer ends: a route move away from the domain cuts it (in-flight.ts).
        const inFlight = deps.inFlight.enter(snapshot.id, target.domain.id, snapshot.routeRevision);
        let outcome: ForwardOutcome;
        try {
          try {
            outcome = await deps.forwarder.send({
              url: upstreamUrl(target.servingUrl, endpoint),
              method: 'POST',
              headers: upstreamHeaders,
              body: raw,
              signal,
              cut: inFlight,
              headersTimeoutMs: deps.config.HARU_CHAT_HEADER_TIMEOUT_MS,
              firstByteTimeoutMs: deps.config.HARU_CHAT_FIRST_BYTE_TIMEOUT_MS,
              onHeaders: pinger?.onHeaders,
            });
          } finally {
            pinger?.stop();
          }
          if (outcome.kind === 'aborted') return (holdOutcome = 'closed');
          // Headers came and then the body stalled: the request reached the model server, so it is not sent again.
          if (outcome.kind === 'timeout' && outcome.phase !== 'headers') {
            throw new HaruError(
              'upstream_timeout',
              `domain ${target.domain.slug} sent headers but no body within ${deps.config.HARU_CHAT_FIRST_BYTE_TIMEOUT_MS} ms`,
            );
          }
          if (outcome.kind === 'response') {
            hold?.stopPings();
            holdOutcome = 'moved';
            // After this turn: the answer (a JSON body that came whole, or a stream's first chunk) is written first.
            setImmediate(noteResponse, deps, endpoint, outcome.ttfbSeconds, outcome.statusCode, target.domain.id);
            // Awaited here so that the exchange stays registered while its answer is relayed.
            return await attempt.relay(res, outcome, routed);
          }
        } finally {
          inFlight.leave();
        }
        if (outcome.kind === 'cut') {
          // The route left the domain: the request reached it, so only a resend may send it again.
          failure = new HaruError(
            'upstream_unreachable',
            `domain ${target.domain.slug} was cut off for model "${body.model}": the route moved away from it`,
          );
        } else {
          refused = true;
          deps.monitorSignals.upstreamFailed(snapshot.id);
          if (outcome.kind === 'timeout') {
            failure = new HaruError(
              'upstream_timeout',
              `domain ${target.domain.slug} sent no response headers within ${deps.config.HARU_CHAT_HEADER_TIMEOUT_MS} ms`,
            );
          } else {
            failure = new HaruError(
              'upstream_unreachable',
              `domain ${target.domain.slug} refused the connection for model "${body.model}"`,
            );
          }
        }
        // A timeout, a cut or a reset after sending may have reached the upstream (a dead host that sends no
        // reset times out): held and sent again only where a resend is allowed.
        sent = outcome.kind !== 'refused' || !neverSent(outcome.error);
      } else {
        failure = target.error;
      }
      if (signal.aborted) return (holdOutcome = 'closed');
      // Decide on a fresh read: the cached snapshot may predate the promotion we would wait for.
      const fresh = await deps.cache.refresh(fleetRef);
      const moved = fresh.snapshot.routeRevision !== snapshot.routeRevision;
      // Retry once a failover could have happened, not after the whole hold budget.
      const retryAfterSeconds = expectedFailoverSeconds(fresh.snapshot.policy);
      // A stale route to a sleeping domain waits for the store (a moved route) rather than failing at once.
      if (!moved && !staleAsleep && !holdReason(fresh.snapshot, body.model, refused)) {
        if (failure.status !== 503 && !refused) throw failure;
        // Nothing will move the route on its own: answer now, saying why.
        throw new HaruError(failure.code, `${failure.message}; ${noFailoverReason(fresh.snapshot, body.model)}`, {
          retryAfterSeconds,
        });
      }
      if (sent && !attempt.mayResend()) throw failure;
      if (moved) continue;
      const left = deadline - deps.now().getTime();
      if (left <= 0) {
        holdOutcome = 'timeout';
        throw new HaruError(failure.code, `${failure.message} (held ${holdMs} ms, no route move)`, {
          retryAfterSeconds,
        });
      }
      if (!hold) {
        hold = enterHold(deps, res, body, fresh);
        if (!hold) {
          throw new HaruError('overloaded', `${deps.holdQueue.max} requests are already held for failover`, {
            retryAfterSeconds,
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
  const gone = new ClientGone();
  // 'close' before the response finished means the client went away: stop the upstream too.
  res.on('close', () => {
    if (!res.writableFinished) gone.abort();
  });
  let outcome = 'ok';
  try {
    const body = readInferenceBody(rawBody);
    outcome = await proxyWithResend(deps, endpoint, req.headers, res, rawBody as Buffer, body, (raw, attempt) =>
      proxyOnce(deps, endpoint, req, res, raw, body, gone, attempt),
    );
  } catch (err) {
    const error = toHaruError(err);
    outcome = error.code;
    logRequestError(deps.logger, error, err, { endpoint });
    if (!res.headersSent) sendError(res, error);
    else if (res.getHeader('content-type')?.toString().startsWith('text/event-stream')) {
      endSseWithError(res, error.toBody());
    } else res.destroy();
  } finally {
    const seconds = Number(process.hrtime.bigint() - started) / 1e9;
    deps.metrics.proxyDuration.observe({ endpoint, outcome }, seconds);
  }
}

/** Express handler for one inference endpoint. The body arrives as a raw Buffer (inferenceBodyReader). */
export function inferenceHandler(deps: ProxyDeps, endpoint: InferenceEndpoint): RequestHandler {
  return (req, res) => handleInference(deps, endpoint, req, res, req.body);
}
