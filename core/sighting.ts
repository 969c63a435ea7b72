import type { DomainState } from '../schemas/enums';
import type { FleetStatus } from '../schemas/api';
import type { FleetSnapshot } from '../schemas/entities';
import type { Sighting } from '../schemas/status';

/**
 * When the watcher last heard a domain, as an age. `lastSeenAt` is the worker's receive time of the last poll
 * answer that counted as a sighting (an answer, or a proof of life relayed by the proxy); it is stored on the
 * domain's row, carried in every view and never re-dated. Every age an operator reads (the monitor's `health`
 * query, `haru fleet health`, `haru fleet status`, `/ui`, the worker's metrics) is this one, so they agree.
 * Null when never heard; a time in the future (clock skew) reads as zero. Pure.
 */
export function heardAgeMs(lastSeenAt: string | null, now: Date): number | null {
  return lastSeenAt === null ? null : Math.max(0, now.getTime() - Date.parse(lastSeenAt));
}

/** A domain as far as its sighting goes (a stored row, a snapshot's domain and a view all fit). */
export interface Sighted {
  state: DomainState;
  lastSeenAt: string | null;
}

/**
 * How a domain's sighting reads at `now`: its age, whether it is stale (never heard, or heard longer ago than
 * `staleAfterMs`, the fleet's `heartbeatStaleMs`), and whether what its host last said (its slots' and models'
 * states, its training) can be shown as the host's state now. It cannot once the domain is stale or failed: a
 * dead host's last report says `serving` and `awake` for as long as nobody clears it. Pure.
 */
export function sightingOf(domain: Sighted, staleAfterMs: number, now: Date): Sighting {
  const ageMs = heardAgeMs(domain.lastSeenAt, now);
  const isStale = ageMs === null || ageMs > staleAfterMs;
  return { lastSeenAt: domain.lastSeenAt, ageMs, isStale, isReportCurrent: !isStale && domain.state !== 'failed' };
}

/** The snapshot as the API answers it: each domain with its sighting at `now` (`sightingOf`). Pure. */
export const sightedFleet = (fleet: FleetSnapshot, now: Date): FleetStatus => ({
  ...fleet,
  domains: fleet.domains.map((d) => ({ ...d, sighting: sightingOf(d, fleet.policy.heartbeatStaleMs, now) })),
});
