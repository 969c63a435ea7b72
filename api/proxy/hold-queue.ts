import type { AbortLike } from './client-gone';
import type { ClientResponse } from './client-response';
import type { ProxyDeps } from './proxy-deps';
import type { Routing, RoutingCache } from './routing-cache';

/** A bounded count of requests waiting for a route move. */
export interface HoldQueue {
  /** Takes a place; null when `max` requests are already held (the caller answers 429). */
  tryEnter(): (() => void) | null;
  readonly held: number;
  readonly max: number;
}

/** Creates the hold queue; `onChange` reports the held count (a metrics gauge). */
export function createHoldQueue(max: number, onChange?: (held: number) => void): HoldQueue {
  let held = 0;
  return {
    max,
    get held() {
      return held;
    },
    tryEnter() {
      if (held >= max) return null;
      held++;
      onChange?.(held);
      let left = false;
      return () => {
        if (left) return;
        left = true;
        held--;
        onChange?.(held);
      };
    },
  };
}

/**
 * Waits until `fleetId`'s route moves past `sinceRevision`, `ms` elapse, or `signal` aborts, whichever
 * comes first. Never rejects.
 */
export function waitForRouteMove(
  cache: Pick<RoutingCache, 'onMove'>,
  fleetId: string,
  sinceRevision: number,
  ms: number,
  signal: AbortLike,
): Promise<'moved' | 'elapsed' | 'aborted'> {
  if (signal.aborted) return Promise.resolve('aborted');
  return new Promise((resolve) => {
    const done = (why: 'moved' | 'elapsed' | 'aborted') => {
      clearTimeout(timer);
      unsubscribe();
      signal.removeEventListener('abort', onAbort);
      resolve(why);
    };
    const onAbort = () => done('aborted');
    const timer = setTimeout(() => done('elapsed'), Math.max(0, ms));
    const unsubscribe = cache.onMove((id, revision) => {
      if (id === fleetId && revision > sinceRevision) done('moved');
    });
    signal.addEventListener('abort', onAbort, { once: true });
  });
}

/** How a hold ended, for `haru_proxy_hold_outcomes_total`. */
export type HoldOutcome = 'moved' | 'timeout' | 'closed' | 'failed';

/** A request waiting for a route move: holds a queue place and, for streams, pings the client. */
export interface Hold {
  leave(outcome: HoldOutcome): void;
  stopPings(): void;
}

/**
 * Takes a place in the hold queue for a request that waits for a route move, pinging a stream meanwhile;
 * null when the queue is full (counted as `rejected`).
 */
export function enterHold(deps: ProxyDeps, client: ClientResponse, isStream: boolean, routing: Routing): Hold | null {
  const leaveQueue = deps.holdQueue.tryEnter();
  if (!leaveQueue) {
    deps.metrics.holdOutcomes.inc({ outcome: 'rejected' });
    return null;
  }
  // Headers go out only at the first ping, so a short hold still passes the upstream's own status through.
  const fleetSlug = routing.snapshot.slug;
  const pings = isStream
    ? setInterval(() => client.pingHeld(fleetSlug), deps.config.holdPingMs)
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
