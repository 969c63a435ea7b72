import type { IncomingMessage } from 'node:http';
import { expectedFailoverSeconds } from '../../core/route-eligibility';
import type { FleetSnapshot } from '../../schemas/entities';
import { HaruError } from '../../schemas/errors';
import type { ClientResponse } from './client-response';
import type { ForwardOutcome } from './forwarder';
import { upstreamRequestHeaders } from './headers';
import { enterHold, type Hold, type HoldOutcome, waitForRouteMove } from './hold-queue';
import type { InFlight } from './in-flight';
import type { InferenceBody } from './inference-body';
import type { ProxyDeps } from './proxy-deps';
import { type Attempt, neverSent } from './resend/resend';
import {
  holdReason,
  type InferenceEndpoint,
  noFailoverReason,
  routeModel,
  type RouteTarget,
  upstreamUrl,
} from './route-table';
import type { Routing } from './routing-cache';
import { routedHeadersFor } from './routing-headers';
import type { UpstreamResponse } from './upstream-body';
import { withUpstreamAuth } from './upstream-auth';

/** The fleet a proxy request is for: `X-Haru-Fleet`, else HARU_DEFAULT_FLEET, else 400. */
export function requestFleet(req: IncomingMessage, defaultFleet: string | undefined): string {
  const header = req.headers['x-haru-fleet']?.toString().trim();
  const fleet = header || defaultFleet;
  if (!fleet) throw new HaruError('invalid_request', 'no fleet: send X-Haru-Fleet or set HARU_DEFAULT_FLEET');
  return fleet;
}

type Routed = Extract<RouteTarget, { kind: 'ok' }>;

/** Why an attempt got no answer, and what that allows next (the `decide` state reads it). */
interface Miss {
  error: HaruError;
  /** The snapshot the attempt was routed by: a fresh read whose revision differs means the route moved. */
  snapshot: FleetSnapshot;
  /** The upstream refused, reset or sent no headers in time: the active may be failing (`holdReason`). */
  isRefused: boolean;
  /** The request may have reached the upstream: it is sent again only where a resend is allowed. */
  mayHaveArrived: boolean;
  /** A stale route to a domain that reports asleep: held for the store even without a `holdReason`. */
  isStaleAsleep: boolean;
}

/** A state of `proxyOnce` with what it needs, or an end (`relayed`, `closed`, `failed`). */
type Step =
  | { to: 'route' }
  | { to: 'forward'; routing: Routing; target: Routed }
  | {
      to: 'relay';
      response: UpstreamResponse;
      target: Routed;
      routed: Readonly<Record<string, string>>;
      inFlight: InFlight;
    }
  | { to: 'decide'; miss: Miss }
  | { to: 'hold'; miss: Miss; fresh: Routing; leftMs: number }
  | { to: 'relayed'; outcome: string }
  | { to: 'closed' }
  | { to: 'failed'; error: HaruError; holdOutcome: HoldOutcome };

/**
 * How often a held request re-reads its fleet's routing while it waits for a move: route moves are pushed at
 * once, so this only bounds a missed push and paces retries of a refused upstream.
 */
export const HOLD_RECHECK_MS = 500;

const ROUTE: Step = { to: 'route' };
const CLOSED: Step = { to: 'closed' };
const failed = (error: HaruError, holdOutcome: HoldOutcome = 'failed'): Step => ({ to: 'failed', error, holdOutcome });
const miss = (error: HaruError, snapshot: FleetSnapshot): Miss => ({
  error,
  snapshot,
  isRefused: false,
  mayHaveArrived: false,
  isStaleAsleep: false,
});

/**
 * One proxied request through routing, holds and one upstream answer (docs/architecture.md §5.4), as a
 * state machine:
 *
 *   route   routing from the cache picks the target           -> forward | decide (no target, stale and asleep)
 *   forward the request goes to the target's upstream         -> relay | decide (refused, timeout, cut) | closed
 *                                                               | failed (headers came, then no body byte)
 *   relay   the answer goes to the client (`attempt.relay`)   -> relayed
 *   decide  on a fresh read, what the miss allows             -> route (the route moved) | hold
 *                                                               | failed (no move can come, no resend, budget spent)
 *   hold    a queue place (and pings) until a move or a tick  -> route | closed | failed (the queue is full)
 *
 * Resolves with the outcome label for metrics (`relayed`: the relay's, `closed`: the client left); `failed`
 * throws the HaruError the client gets.
 */
export async function proxyOnce(
  deps: ProxyDeps,
  endpoint: InferenceEndpoint,
  req: IncomingMessage,
  client: ClientResponse,
  raw: Buffer,
  body: InferenceBody,
  attempt: Attempt,
): Promise<string> {
  const request = new ProxiedRequest(deps, endpoint, req, client, raw, body, attempt);
  let holdOutcome: HoldOutcome = 'failed';
  let step = ROUTE;
  try {
    for (;;) {
      switch (step.to) {
        case 'route':
          step = await request.route();
          break;
        case 'forward':
          step = await request.forward(step.routing, step.target);
          break;
        case 'relay':
          holdOutcome = 'moved';
          step = await request.relay(step.response, step.target, step.routed, step.inFlight);
          break;
        case 'decide':
          step = await request.decide(step.miss);
          break;
        case 'hold':
          step = await request.hold(step.miss, step.fresh, step.leftMs);
          break;
        case 'relayed':
          return step.outcome;
        case 'closed':
          holdOutcome = 'closed';
          return 'closed';
        case 'failed':
          holdOutcome = step.holdOutcome;
          throw step.error;
      }
    }
  } finally {
    request.leaveHold(holdOutcome);
  }
}

/** The states of `proxyOnce` and what they share: the request, its hold budget and its hold (once entered). */
class ProxiedRequest {
  private readonly fleetRef: string;
  private readonly headers: Record<string, string>;
  private readonly holdMs: number;
  private readonly deadline: number;
  private held: Hold | null = null;

  constructor(
    private readonly deps: ProxyDeps,
    private readonly endpoint: InferenceEndpoint,
    req: IncomingMessage,
    private readonly client: ClientResponse,
    private readonly raw: Buffer,
    private readonly body: InferenceBody,
    private readonly attempt: Attempt,
  ) {
    this.fleetRef = requestFleet(req, deps.config.HARU_DEFAULT_FLEET);
    this.headers = upstreamRequestHeaders(req.headers);
    // A held stream is pinged; a non-streaming request sends nothing, so its hold stays under LB idle timeouts.
    this.holdMs = body.stream
      ? deps.config.HARU_CHAT_HOLD_MS
      : Math.min(deps.config.HARU_CHAT_HOLD_MS, deps.config.HARU_CHAT_HOLD_QUIET_MS);
    this.deadline = deps.now().getTime() + this.holdMs;
  }

  async route(): Promise<Step> {
    const { deps, body } = this;
    const routing = await deps.cache.get(this.fleetRef);
    const snapshot = routing.snapshot;
    if (routing.stale) deps.metrics.staleRouting.inc({ fleet: snapshot.slug });
    const target = routeModel(snapshot, body.model);
    this.client.noteRouting(snapshot.slug, target.kind === 'ok' ? target.domain.slug : undefined);
    if (target.kind !== 'ok') return { to: 'decide', miss: miss(target.error, snapshot) };
    // A stale route may point at a domain a promotion since put to sleep: confirm it before sending.
    if (routing.stale && (await deps.sleepCheck.isAsleep(target.servingUrl))) {
      const error = new HaruError(
        'domain_unavailable',
        `routing for fleet ${snapshot.slug} is stale (state store unreachable) and domain ${target.domain.slug} reports model "${body.model}" asleep`,
      );
      return { to: 'decide', miss: { ...miss(error, snapshot), isStaleAsleep: true } };
    }
    return { to: 'forward', routing, target };
  }

  async forward(routing: Routing, target: Routed): Promise<Step> {
    const { deps, body, client } = this;
    const snapshot = routing.snapshot;
    const routed = routedHeadersFor(routing, target.domain.slug);
    const upstreamHeaders = withUpstreamAuth(this.headers, target, body.model);
    // Only a stream is pinged while its first token is awaited: a non-streaming request makes no pinger.
    const pinger = body.stream ? pingUntilFirstByte(deps.config.holdPingMs, client, routed) : undefined;
    // Registered until its answer ends (`relay` leaves it): a route move away from the domain cuts it.
    const inFlight = deps.inFlight.enter(snapshot.id, target.domain.id, snapshot.routeRevision);
    let outcome: ForwardOutcome;
    try {
      try {
        outcome = await deps.forwarder.send({
          url: upstreamUrl(target.servingUrl, this.endpoint),
          method: 'POST',
          headers: upstreamHeaders,
          body: this.raw,
          signal: client.gone,
          cut: inFlight,
          headersTimeoutMs: deps.config.HARU_CHAT_HEADER_TIMEOUT_MS,
          firstByteTimeoutMs: deps.config.HARU_CHAT_FIRST_BYTE_TIMEOUT_MS,
          onHeaders: pinger?.onHeaders,
        });
      } finally {
        pinger?.stop();
      }
    } catch (err) {
      inFlight.leave();
      throw err;
    }
    if (outcome.kind === 'response') return { to: 'relay', response: outcome, target, routed, inFlight };
    inFlight.leave();
    if (outcome.kind === 'aborted') return CLOSED;
    // Headers came and then the body stalled: the request reached the model server, so it is not sent again.
    if (outcome.kind === 'timeout' && outcome.phase !== 'headers') {
      const ms = deps.config.HARU_CHAT_FIRST_BYTE_TIMEOUT_MS;
      return failed(
        new HaruError('upstream_timeout', `domain ${target.domain.slug} sent headers but no body within ${ms} ms`),
      );
    }
    return { to: 'decide', miss: this.missOf(outcome, snapshot, target) };
  }

  async relay(
    response: UpstreamResponse,
    target: Routed,
    routed: Readonly<Record<string, string>>,
    inFlight: InFlight,
  ): Promise<Step> {
    const { deps, endpoint } = this;
    try {
      this.held?.stopPings();
      // After this turn: the answer (a JSON body that came whole, or a stream's first chunk) is written first.
      setImmediate(noteResponse, deps, endpoint, response.ttfbSeconds, response.statusCode, target.domain.id);
      return { to: 'relayed', outcome: await this.attempt.relay(this.client, response, routed) };
    } finally {
      inFlight.leave();
    }
  }

  async decide(m: Miss): Promise<Step> {
    const { deps, body } = this;
    if (this.client.gone.aborted) return CLOSED;
    // Decide on a fresh read: the cached snapshot may predate the promotion we would wait for.
    const fresh = await deps.cache.refresh(this.fleetRef);
    const moved = fresh.snapshot.routeRevision !== m.snapshot.routeRevision;
    // Retry once a failover could have happened, not after the whole hold budget.
    const retryAfterSeconds = expectedFailoverSeconds(fresh.snapshot.policy);
    // A stale route to a sleeping domain waits for the store (a moved route) rather than failing at once.
    if (!moved && !m.isStaleAsleep && !holdReason(fresh.snapshot, body.model, m.isRefused)) {
      if (m.error.status !== 503 && !m.isRefused) return failed(m.error);
      // Nothing will move the route on its own: answer now, saying why.
      const why = noFailoverReason(fresh.snapshot, body.model);
      return failed(new HaruError(m.error.code, `${m.error.message}; ${why}`, { retryAfterSeconds }));
    }
    if (m.mayHaveArrived && !this.attempt.mayResend()) return failed(m.error);
    if (moved) return ROUTE;
    const leftMs = this.deadline - deps.now().getTime();
    if (leftMs <= 0) {
      const message = `${m.error.message} (held ${this.holdMs} ms, no route move)`;
      return failed(new HaruError(m.error.code, message, { retryAfterSeconds }), 'timeout');
    }
    return { to: 'hold', miss: m, fresh, leftMs };
  }

  async hold(m: Miss, fresh: Routing, leftMs: number): Promise<Step> {
    const { deps } = this;
    if (!this.held) {
      this.held = enterHold(deps, this.client, this.body.stream, fresh);
      if (!this.held) {
        const retryAfterSeconds = expectedFailoverSeconds(fresh.snapshot.policy);
        const { held, max } = deps.holdQueue;
        const message =
          held >= max
            ? `${max} requests are already held for failover`
            : `fleet ${fresh.snapshot.slug} holds ${deps.holdQueue.heldBy(fresh.snapshot.id)} of the ${held} requests held for failover, its share while other fleets fail over too`;
        return failed(new HaruError('overloaded', message, { retryAfterSeconds }));
      }
    }
    const recheckMs = Math.min(HOLD_RECHECK_MS, leftMs);
    const woke = await waitForRouteMove(
      deps.cache,
      m.snapshot.id,
      m.snapshot.routeRevision,
      recheckMs,
      this.client.gone,
    );
    return woke === 'aborted' ? CLOSED : ROUTE;
  }

  leaveHold(outcome: HoldOutcome): void {
    this.held?.leave(outcome);
  }

  /** What a failed forward allows: a cut may have reached the upstream; a refusal or timeout is reported. */
  private missOf(
    outcome: Exclude<ForwardOutcome, { kind: 'response' | 'aborted' }>,
    snapshot: FleetSnapshot,
    target: Routed,
  ): Miss {
    const { slug } = target.domain;
    const model = this.body.model;
    if (outcome.kind === 'cut') {
      // The route left the domain: the request reached it, so only a resend may send it again.
      const error = new HaruError(
        'upstream_unreachable',
        `domain ${slug} was cut off for model "${model}": the route moved away from it`,
      );
      return { ...miss(error, snapshot), mayHaveArrived: true };
    }
    const error =
      outcome.kind === 'timeout'
        ? new HaruError(
            'upstream_timeout',
            `domain ${slug} sent no response headers within ${this.deps.config.HARU_CHAT_HEADER_TIMEOUT_MS} ms`,
          )
        : new HaruError('upstream_unreachable', `domain ${slug} refused the connection for model "${model}"`);
    // The monitor re-checks at once and hears of the missed answer: a domain the proxy cannot reach is degraded
    // even where its supervisor answers (core/domain-observation.ts).
    const cause = outcome.kind === 'timeout' ? 'no response headers in time' : describeRefusal(outcome.error);
    this.deps.monitorSignals.upstreamFailed(snapshot.id, target.domain.id, `model ${model}: ${cause}`);
    // A timeout or a reset after sending may have reached the upstream (a dead host that sends no reset times
    // out): held and sent again only where a resend is allowed.
    const mayHaveArrived = outcome.kind !== 'refused' || !neverSent(outcome.error);
    return { ...miss(error, snapshot), isRefused: true, mayHaveArrived };
  }
}

/**
 * Pings a streaming client while an upstream that sent its headers has not sent a body byte (a long prefill,
 * or a stalled server): the first ping starts the stream with Haru's own SSE headers. `stop` ends the pings.
 */
function pingUntilFirstByte(pingMs: number, client: ClientResponse, routing: Readonly<Record<string, string>>) {
  let pings: NodeJS.Timeout | undefined;
  return {
    onHeaders: (statusCode: number) => {
      if (statusCode >= 400) return;
      pings = setInterval(() => client.pingFirstToken(routing), pingMs);
    },
    stop: () => clearInterval(pings),
  };
}

/**
 * What an upstream answer tells besides itself: its time to headers (`haru_proxy_upstream_ttfb_seconds`) and,
 * for a 2xx, the domain's served answer (a NOTIFY at most every 250 ms per domain). Neither is what the
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

/** What a refused forward met, in a few words: the error's code where it has one (ECONNREFUSED, a connect timeout). */
function describeRefusal(error: unknown): string {
  const cause = (error as { cause?: { code?: string; message?: string } } | null)?.cause;
  const code = (error as { code?: string } | null)?.code ?? cause?.code;
  const message = error instanceof Error ? error.message : String(error);
  return code ? `${code} (${message})` : message;
}
