import type { Logger } from '../../lib/logger';
import type { ApiConfig } from '../config';
import type { ApiMetrics } from '../metrics';
import type { BodyBudget } from './body-budget';
import type { Forwarder } from './forwarder';
import type { HoldQueue } from './hold-queue';
import type { InFlightRegistry } from './in-flight';
import type { MonitorSignals } from './monitor-signals';
import type { RoutingCache } from './routing-cache';
import type { SleepCheck } from './sleep-check';

/** Everything the proxy path needs; built once in createApp. */
export interface ProxyDeps {
  cache: RoutingCache;
  forwarder: Forwarder;
  holdQueue: HoldQueue;
  /** The bytes of request bodies held at once (api/proxy/body-budget.ts). */
  bodyBudget: BodyBudget;
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
    | 'holdPingMs'
    | 'HARU_RESEND_MAX_PER_REQUEST'
    | 'HARU_RESEND_MAX_BYTES'
  >;
  now: () => Date;
}
