import type { FleetPolicy } from '../schemas/policy';
import { hasExceededFailureThreshold, isStale } from './domain-health';
import { activeDomainOf, type DomainView, type FleetView } from './fleet-view';

/** Why a domain cannot take over from the active; empty when it can. */
export type NonViableReason =
  'is_active' | 'not_ready' | 'stale' | 'consecutive_failures' | 'no_inference' | 'missing_models';

export interface StandbyViability {
  domainId: string;
  isViable: boolean;
  reasons: NonViableReason[];
}

/**
 * Whether `candidate` could be promoted instead of `active`: it is not the active, is `ready` or
 * `degraded`, answered a poll within `heartbeatStaleMs`, has missed fewer than `failureThreshold` polls,
 * serves at least one model, and serves every model the active serves (so no client loses its model).
 */
export function standbyViability(
  candidate: DomainView,
  active: DomainView | null,
  policy: FleetPolicy,
  now: Date,
): StandbyViability {
  const reasons: NonViableReason[] = [];
  if (active && candidate.id === active.id) reasons.push('is_active');
  if (candidate.state !== 'ready' && candidate.state !== 'degraded') reasons.push('not_ready');
  if (isStale(candidate, policy, now)) reasons.push('stale');
  if (hasExceededFailureThreshold(candidate, policy)) reasons.push('consecutive_failures');
  if (candidate.modelNames.length === 0) reasons.push('no_inference');
  else if (active && active.modelNames.some((name) => !candidate.modelNames.includes(name))) {
    reasons.push('missing_models');
  }
  return { domainId: candidate.id, isViable: reasons.length === 0, reasons };
}

const stateRank = (d: DomainView): number => (d.state === 'ready' ? 0 : 1);
const seenAtMs = (d: DomainView): number => (d.lastSeenAt === null ? -Infinity : Date.parse(d.lastSeenAt));

/** Orders standbys: `ready` before `degraded`, then the freshest heartbeat, then slug (ascending). */
export function compareStandbys(a: DomainView, b: DomainView): number {
  return stateRank(a) - stateRank(b) || seenAtMs(b) - seenAtMs(a) || (a.slug < b.slug ? -1 : a.slug > b.slug ? 1 : 0);
}

/** Every viable standby of the fleet, best first. Empty when none can take over. */
export function rankStandbys(fleet: FleetView, policy: FleetPolicy, now: Date): DomainView[] {
  const active = activeDomainOf(fleet);
  return fleet.domains.filter((d) => standbyViability(d, active, policy, now).isViable).sort(compareStandbys);
}
