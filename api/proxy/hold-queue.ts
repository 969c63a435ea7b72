import type { AbortLike } from './client-gone';
import type { ClientResponse } from './client-response';
import type { ProxyDeps } from './proxy-deps';
import type { Routing, RoutingCache } from './routing-cache';

/** A bounded count of requests waiting for a route move, shared fairly between the fleets holding. */
export interface HoldQueue {
  /**
   * Takes a place for a request of `fleetId`; null when `max` requests are already held, or when the fleet holds
   * its share already while other fleets hold too (`isWithinShare`): the caller answers 429.
   */
  tryEnter(fleetId: string): (() => void) | null;
  /** Places `fleetId` holds now. */
  heldBy(fleetId: string): number;
  readonly held: number;
  readonly max: number;
}

/**
 * Whether a fleet holding `ownHeld` places may take one more: the queue has room, and the fleet holds fewer
 * than an equal share of `max` among the fleets holding (itself included). One fleet alone may fill the queue;
 * when a second fleet's failover starts while the first's holds fill it, the first takes no more places until
 * it is down to its share, so every failing fleet's clients are held, not only the first's. Pure.
 */
export function isWithinShare(max: number, held: number, ownHeld: number, fleetsHolding: number): boolean {
  if (held >= max) return false;
  const sharing = fleetsHolding + (ownHeld === 0 ? 1 : 0);
  return ownHeld < Math.ceil(max / sharing);
}

/** Creates the hold queue; `onChange` reports the held count (a metrics gauge). */
export function createHoldQueue(max: number, onChange?: (held: number) => void): HoldQueue {
  let held = 0;
  const byFleet = new Map<string, number>();
  return {
    max,
    get held() {
      return held;
    },
    heldBy: (fleetId) => byFleet.get(fleetId) ?? 0,
    tryEnter(fleetId) {
      const own = byFleet.get(fleetId) ?? 0;
      if (!isWithinShare(max, held, own, byFleet.size)) return null;
      held++;
      byFleet.set(fleetId, own + 1);
      onChange?.(held);
      let left = false;
      return () => {
        if (left) return;
        left = true;
        held--;
        const rest = (byFleet.get(fleetId) ?? 1) - 1;
        if (rest > 0) byFleet.set(fleetId, rest);
        else byFleet.delete(fleetId);
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
 * null when the queue is full, or the fleet holds its share of it (counted as `rejected`).
 */
export function enterHold(deps: ProxyDeps, client: ClientResponse, isStream: boolean, routing: Routing): Hold | null {
  const leaveQueue = deps.holdQueue.tryEnter(routing.snapshot.id);
  if (!leaveQueue) {
    deps.metrics.holdOutcomes.inc({ outcome: 'rejected' });
    return null;
  }
  // Headers go out only at the first ping, so a short hold still passes the upstream's own status through.
  const fleetSlug = routing.snapshot.slug;
  const pings = isStream ? setInterval(() => client.pingHeld(fleetSlug), deps.config.holdPingMs) : undefined;
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
