/**
 * What a region death did, read from the store and the clients after the fact: for each fleet whose active was
 * killed, kill -> the monitor's promote decision, -> routing committed, -> the first answer its clients got
 * from the new active, and the client errors; over every fleet, the domains marked failed that were not killed
 * (the target is none). Times are this machine's clock throughout (the store's rows are written by the worker
 * and Postgres on it).
 */
import type { Store } from '../../db/store';
import type { ClientOutcome } from './steady-clients';

/** A fleet of the benchmark or test: its slug, its domains' ids, and whether its active was killed. */
export interface RegionFleet {
  slug: string;
  fleetId: string;
  eastId: string;
  westId: string;
  isKilled: boolean;
}

export interface KilledFleetFigures {
  slug: string;
  /** kill -> the monitor's promotion request (its operation row); null without one. */
  detectionMs: number | null;
  /** kill -> its `routing.committed` event. */
  commitMs: number | null;
  /** kill -> the end of the first answer from west its client got. */
  firstAnswerMs: number | null;
  /** Promotions of the fleet (the target is exactly one, by the monitor). */
  promotions: number;
  /** Requests sent after the kill that failed. */
  clientErrors: number;
  /** Requests in flight at the kill that failed. */
  inFlightErrors: number;
}

export interface RegionDeathFigures {
  killed: KilledFleetFigures[];
  /** Over the fleets whose active lived: their requests that failed after the kill, and their operations. */
  survivors: { clientErrors: number; operations: number };
  /**
   * `domain.state` events that marked a domain failed, other than the killed actives after their kill (the
   * target is 0).
   */
  healthyMarkedFailed: { fleet: string; domain: string; message: string }[];
  /** The first few distinct client errors after the kill. */
  errorSamples: string[];
}

/** The figures of a region death that killed the actives of the `isKilled` fleets at `killAt`. */
export async function regionDeathFigures(
  store: Store,
  fleets: readonly RegionFleet[],
  outcomes: readonly ClientOutcome[],
  killAt: number,
): Promise<RegionDeathFigures> {
  const killedIds = new Set(fleets.filter((f) => f.isKilled).map((f) => f.eastId));
  const afterKill = outcomes.filter((o) => o.startedAt >= killAt && o.error !== null);
  const inFlight = outcomes.filter((o) => o.startedAt < killAt && o.endedAt >= killAt && o.error !== null);
  const killed: KilledFleetFigures[] = [];
  const healthyMarkedFailed: RegionDeathFigures['healthyMarkedFailed'] = [];
  let survivorOperations = 0;
  for (const f of fleets) {
    const [operations, events] = await Promise.all([
      store.operations.list(f.fleetId, { limit: 1_000 }),
      store.events.list(f.fleetId, { limit: 10_000 }),
    ]);
    // A killed active marked failed before its kill was healthy then.
    const wasHealthy = (domainId: string, at: string) => !killedIds.has(domainId) || Date.parse(at) < killAt;
    for (const e of events)
      if (e.type === 'domain.state' && e.data.to === 'failed' && e.domainId && wasHealthy(e.domainId, e.createdAt))
        healthyMarkedFailed.push({
          fleet: f.slug,
          domain: e.domainId === f.eastId ? 'east' : 'west',
          message: e.message,
        });
    if (!f.isKilled) {
      survivorOperations += operations.length;
      continue;
    }
    const promotions = operations.filter((o) => o.kind === 'promote');
    const decision = promotions.find((o) => o.requestedBy === 'monitor');
    const commit = events.find((e) => e.type === 'routing.committed' && e.operationId === decision?.id);
    const firstAnswer = outcomes
      .filter((o) => o.fleet === f.slug && o.error === null && o.domain === 'west')
      .reduce<number | null>((min, o) => (min === null || o.endedAt < min ? o.endedAt : min), null);
    const since = (at: string | number | undefined | null) =>
      at === undefined || at === null ? null : (typeof at === 'number' ? at : Date.parse(at)) - killAt;
    killed.push({
      slug: f.slug,
      detectionMs: since(decision?.createdAt),
      commitMs: since(commit?.createdAt),
      firstAnswerMs: since(firstAnswer),
      promotions: promotions.length,
      clientErrors: afterKill.filter((o) => o.fleet === f.slug).length,
      inFlightErrors: inFlight.filter((o) => o.fleet === f.slug).length,
    });
  }
  const survivorSlugs = new Set(fleets.filter((f) => !f.isKilled).map((f) => f.slug));
  return {
    killed,
    survivors: {
      clientErrors: afterKill.filter((o) => survivorSlugs.has(o.fleet)).length,
      operations: survivorOperations,
    },
    healthyMarkedFailed,
    errorSamples: [...new Set([...afterKill, ...inFlight].map((o) => `${o.fleet}: ${o.error}`))].slice(0, 5),
  };
}
