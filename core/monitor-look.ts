import type { StoredDomainHealth } from '../schemas/api-responses';
import type { FleetPolicy } from '../schemas/policy';
import type { MonitorLook, PolledDomain } from '../schemas/status';
import { sightingOf } from './sighting';

/**
 * How often the fleet's watch shard signals its monitor when nothing is due (its `health` is refreshed at
 * least this often while it runs): the default of `WatchShardWorkflowInput.fleetCheckpointMs`.
 */
export const MONITOR_CHECKPOINT_MS = 60_000;

/**
 * The age past which the monitor's last look is stale: one checkpoint plus the heartbeat staleness a
 * round may take to notice. A running monitor never gets this old.
 */
export const monitorStaleAfterMs = (policy: Pick<FleetPolicy, 'heartbeatStaleMs'>): number =>
  MONITOR_CHECKPOINT_MS + policy.heartbeatStaleMs;

const ageOf = (at: string | null, now: Date): number | null =>
  at === null ? null : Math.max(0, now.getTime() - Date.parse(at));

/** The monitor's last look (`checkedAt`, null when it gave none) as of `now`. Pure. */
export function monitorLook(checkedAt: string | null, now: Date, staleAfterMs: number): MonitorLook {
  const ageMs = ageOf(checkedAt, now);
  return { checkedAt, ageMs, isStale: ageMs === null || ageMs > staleAfterMs, staleAfterMs };
}

/** The health fields of a stored domain (a larger row, such as a snapshot's domain). Pure. */
export const storedHealth = (d: StoredDomainHealth): StoredDomainHealth => ({
  id: d.id,
  slug: d.slug,
  state: d.state,
  isActive: d.isActive,
  lastSeenAt: d.lastSeenAt,
  consecutiveFailures: d.consecutiveFailures,
  lastError: d.lastError,
});

/**
 * A stored domain's sighting as of `now`: how long since the watcher last heard it (`heardAgeMs`, the age every
 * view shows) and whether that is past `staleAfterMs` (the fleet's `heartbeatStaleMs`). Pure.
 */
export const polledDomain = (d: StoredDomainHealth, staleAfterMs: number, now: Date): PolledDomain => {
  const sighting = sightingOf(d, staleAfterMs, now);
  return { ...storedHealth(d), lastSeenAgeMs: sighting.ageMs, isStale: sighting.isStale };
};

/** Milliseconds as `850ms`, `12.3s`, `4m05s` or `2h07m`: ages an operator reads at a glance. */
export function formatAge(ms: number | null): string {
  if (ms === null) return 'never';
  if (ms < 1_000) return `${Math.round(ms)}ms`;
  if (ms < 60_000) return `${(ms / 1_000).toFixed(1)}s`;
  const minutes = Math.floor(ms / 60_000);
  if (minutes < 60) return `${minutes}m${String(Math.floor((ms % 60_000) / 1_000)).padStart(2, '0')}s`;
  return `${Math.floor(minutes / 60)}h${String(minutes % 60).padStart(2, '0')}m`;
}
