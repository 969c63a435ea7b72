import { isDomainServing } from '../../core/route-eligibility';
import type { Logger } from '../../lib/logger';
import type { FleetSnapshot } from '../../schemas/entities';
import { ClientGone } from './client-gone';
import type { RoutingCache } from './routing-cache';

/**
 * One exchange in flight to a domain, from sending the request to the end of its answer. It is the
 * forwarder's `cut` signal: `abort` cuts the exchange, which the resend path then treats like a broken
 * upstream (sent again, or continued from what was relayed).
 */
export class InFlight extends ClientGone {
  /** A cut is due (at once or after the drain); a second sweep of the same move leaves it alone. */
  isCutDue = false;

  constructor(
    readonly domainId: string,
    /** The route revision the request was routed at. */
    readonly revision: number,
    private readonly set: Set<InFlight>,
  ) {
    super();
  }

  /** Unregisters it; idempotent. */
  leave(): void {
    this.set.delete(this);
  }
}

/** The exchanges in flight to each fleet's domains, cut when routing moves away from their domain. */
export interface InFlightRegistry {
  /** Registers an exchange to `domainId` routed at `revision`; the caller passes it as `cut` and calls `leave`. */
  enter(fleetId: string, domainId: string, revision: number): InFlight;
  /** Exchanges in flight, every fleet. */
  readonly size: number;
  /** Stops listening for route moves and drops pending cuts. */
  close(): void;
}

export interface InFlightOptions {
  cache: Pick<RoutingCache, 'get' | 'onMove'>;
  logger: Logger;
}

/**
 * Cuts what a route move leaves behind (docs/architecture.md §5.4): when a fleet's route moves away from a
 * domain, the exchanges in flight to it that were routed before the move are cut, at once when the domain is
 * no longer serving (a failover marked it failed: a frozen host would hold them forever), otherwise once the
 * policy's `drainTimeoutMs` has passed (a planned move: the old active drains them, and its demotion puts its
 * models to sleep after that anyway). Costs a request one object and a Set entry; a move costs a routing read
 * only for a fleet with requests in flight.
 */
export function createInFlightRegistry(opts: InFlightOptions): InFlightRegistry {
  const fleets = new Map<string, Set<InFlight>>();
  const timers = new Set<NodeJS.Timeout>();

  const current = async (fleetId: string): Promise<FleetSnapshot | null> => {
    try {
      const routing = await opts.cache.get(fleetId);
      return routing.stale ? null : routing.snapshot;
    } catch {
      return null; // the store cannot say where the route went: the next move sweeps again
    }
  };

  const cut = (fleetId: string, domainId: string, due: InFlight[], snapshot: FleetSnapshot, afterMs: number) => {
    const set = fleets.get(fleetId);
    let requests = 0;
    for (const f of due) {
      if (!set?.has(f) || f.aborted) continue;
      f.abort();
      requests += 1;
    }
    if (requests === 0) return;
    const fields = { fleetId, domainId, toDomainId: snapshot.activeDomainId, revision: snapshot.routeRevision };
    opts.logger.info('requests cut from a domain the route left', { ...fields, requests, afterMs });
  };

  const cutAfterDrain = (fleetId: string, domainId: string, due: InFlight[], drainMs: number) => {
    const timer = setTimeout(() => {
      timers.delete(timer);
      void current(fleetId).then((snapshot) => {
        // The route came back meanwhile: its requests are where they should be.
        if (snapshot && snapshot.activeDomainId !== domainId) cut(fleetId, domainId, due, snapshot, drainMs);
      });
    }, drainMs);
    timer.unref();
    timers.add(timer);
  };

  async function sweep(fleetId: string, revision: number): Promise<void> {
    let snapshot = await current(fleetId);
    // A read that began before the push may answer the revision before it: the next one reads afresh.
    if (snapshot && snapshot.routeRevision < revision) snapshot = await current(fleetId);
    const set = fleets.get(fleetId);
    if (!snapshot || !set || snapshot.routeRevision < revision) return;
    const left = new Map<string, InFlight[]>();
    for (const f of set) {
      if (f.domainId === snapshot.activeDomainId || f.revision >= snapshot.routeRevision || f.isCutDue) continue;
      f.isCutDue = true;
      const due = left.get(f.domainId);
      if (due) due.push(f);
      else left.set(f.domainId, [f]);
    }
    for (const [domainId, due] of left) {
      const domain = snapshot.domains.find((d) => d.id === domainId);
      if (domain && isDomainServing(domain)) cutAfterDrain(fleetId, domainId, due, snapshot.policy.drainTimeoutMs);
      else cut(fleetId, domainId, due, snapshot, 0);
    }
  }

  const unsubscribe = opts.cache.onMove((fleetId, revision) => {
    if (fleets.get(fleetId)?.size) void sweep(fleetId, revision);
  });

  return {
    get size() {
      let size = 0;
      for (const set of fleets.values()) size += set.size;
      return size;
    },
    enter(fleetId, domainId, revision) {
      let set = fleets.get(fleetId);
      if (!set) fleets.set(fleetId, (set = new Set()));
      const f = new InFlight(domainId, revision, set);
      set.add(f);
      return f;
    },
    close() {
      unsubscribe();
      for (const timer of timers) clearTimeout(timer);
      timers.clear();
    },
  };
}
