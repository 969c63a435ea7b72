import type { ServerResponse } from 'node:http';
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import type { Logger } from '../lib/logger';

/** The API's Prometheus metrics, on a registry of their own so several apps can live in one process. */
export interface ApiMetrics {
  registry: Registry;
  /** Every HTTP request by route pattern, method and status. */
  httpRequests: Counter<'route' | 'method' | 'status'>;
  httpDuration: Histogram<'route' | 'method'>;
  /** Time from sending the request upstream to its response headers. */
  proxyTtfb: Histogram<'endpoint'>;
  /** Whole proxied request, holds included, by outcome (`ok`, an error code, or `client_closed`). */
  proxyDuration: Histogram<'endpoint' | 'outcome'>;
  /** Requests waiting for a route move right now. */
  heldRequests: Gauge;
  /** Ends of holds: `moved` (served after a route move), `timeout`, `rejected` (queue full), `closed`. */
  holdOutcomes: Counter<'outcome'>;
  /**
   * Requests sent again after their upstream died in flight (`kind`: `stream` or `request`), by `outcome`:
   * `attempted` (each re-send), `succeeded` (the request then completed), `failed` (a re-send did not).
   */
  resends: Counter<'kind' | 'outcome'>;
  /** Interrupted requests that could not be sent again, by `kind` and `reason` (api/proxy/resend/sse-splice.ts). */
  resendRefusals: Counter<'kind' | 'reason'>;
  /** The route revision last seen per fleet. */
  routeRevision: Gauge<'fleet'>;
  /** Routing answers served from a stale snapshot because the store was unreachable. */
  staleRouting: Counter<'fleet'>;
}

const LATENCY_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120];

/** Creates the metrics; `withDefaults` adds the process metrics (main.ts only, to keep tests light). */
export function createApiMetrics(opts: { withDefaults?: boolean } = {}): ApiMetrics {
  const registry = new Registry();
  if (opts.withDefaults) collectDefaultMetrics({ register: registry });
  const registers = [registry];
  return {
    registry,
    httpRequests: new Counter({
      name: 'haru_api_requests_total',
      help: 'HTTP requests by route, method and status',
      labelNames: ['route', 'method', 'status'],
      registers,
    }),
    httpDuration: new Histogram({
      name: 'haru_api_request_duration_seconds',
      help: 'HTTP request duration by route and method',
      labelNames: ['route', 'method'],
      buckets: LATENCY_BUCKETS,
      registers,
    }),
    proxyTtfb: new Histogram({
      name: 'haru_proxy_upstream_ttfb_seconds',
      help: 'Time to the upstream response headers',
      labelNames: ['endpoint'],
      buckets: LATENCY_BUCKETS,
      registers,
    }),
    proxyDuration: new Histogram({
      name: 'haru_proxy_request_duration_seconds',
      help: 'Proxied request duration including holds, by outcome',
      labelNames: ['endpoint', 'outcome'],
      buckets: LATENCY_BUCKETS,
      registers,
    }),
    heldRequests: new Gauge({ name: 'haru_proxy_held_requests', help: 'Requests held for a route move', registers }),
    holdOutcomes: new Counter({
      name: 'haru_proxy_hold_outcomes_total',
      help: 'How holds ended',
      labelNames: ['outcome'],
      registers,
    }),
    resends: new Counter({
      name: 'haru_proxy_resends_total',
      help: 'Requests sent again after their upstream died in flight, by kind and outcome',
      labelNames: ['kind', 'outcome'],
      registers,
    }),
    resendRefusals: new Counter({
      name: 'haru_proxy_resend_refusals_total',
      help: 'Interrupted requests that could not be sent again, by kind and reason',
      labelNames: ['kind', 'reason'],
      registers,
    }),
    routeRevision: new Gauge({
      name: 'haru_route_revision',
      help: 'Route revision last seen per fleet',
      labelNames: ['fleet'],
      registers,
    }),
    staleRouting: new Counter({
      name: 'haru_proxy_stale_routing_total',
      help: 'Requests routed from a stale snapshot while the store was unreachable',
      labelNames: ['fleet'],
      registers,
    }),
  };
}

interface AccessNote {
  fleet: string;
  domain: string | undefined;
}
const accessNotes = new WeakMap<ServerResponse, AccessNote>();

/** Names the fleet and domain that served `res` in its access log line (the proxy knows them once it routed). */
export function noteAccess(res: ServerResponse, fleet: string, domain?: string): void {
  accessNotes.set(res, { fleet, domain });
}

/** Where the access log goes, and the fleet and domain a request named in its path (when it did). */
export interface AccessLog {
  logger: Logger;
  params?: () => { fleet?: string; domain?: string };
  /** The name of the API key the request authenticated with (api/auth/principal.ts), asked at the end. */
  key?: () => string | null;
}

/**
 * Counts one request and its duration when its response closes: `route` is asked then (the matched
 * pattern, never the raw URL: fleet names would explode the labels), and a response that closed before
 * it finished counts as `client_closed`. With `access`, also writes one `request` line: method, route,
 * status, duration, the fleet and domain (as `noteAccess` named them, else the path's) and the API key's name.
 */
export function observeRequest(
  metrics: ApiMetrics,
  method: string,
  res: ServerResponse,
  route: () => string,
  access?: AccessLog,
): void {
  const started = process.hrtime.bigint();
  res.on('close', () => {
    const status = res.writableFinished || res.headersSent ? String(res.statusCode) : 'client_closed';
    const seconds = Number(process.hrtime.bigint() - started) / 1e9;
    const pattern = route();
    metrics.httpRequests.inc({ route: pattern, method, status });
    metrics.httpDuration.observe({ route: pattern, method }, seconds);
    if (!access) return;
    const note = accessNotes.get(res);
    // The path's fleet and domain are only asked for what the proxy's note does not name.
    const params = note?.domain !== undefined ? undefined : access.params?.();
    access.logger.info('request', {
      method,
      route: pattern,
      status,
      durationMs: Math.round(seconds * 1e4) / 10,
      fleet: note?.fleet ?? params?.fleet ?? null,
      domain: note?.domain ?? params?.domain ?? null,
      key: access.key?.() ?? null,
    });
  });
}
