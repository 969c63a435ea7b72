import type { FleetPolicy } from '../schemas/policy';
import { ageMs, type DomainView } from './fleet-view';
import { heardAgeMs } from './sighting';
import { isWithinWatch } from './watch-window';

/**
 * How a domain looks to the monitor. `unavailable` means the domain is deliberately not serving
 * (provisioning, stopping, stopped) rather than broken.
 */
export type DomainHealthStatus = 'healthy' | 'degraded' | 'failed' | 'unavailable';

export interface DomainAssessment {
  domainId: string;
  status: DomainHealthStatus;
  /** Why the status is not `healthy`, as short machine-readable phrases. */
  reasons: string[];
  /** Milliseconds since the watcher last heard the domain (`heardAgeMs`); null when never heard. */
  heardAgeMs: number | null;
  isStale: boolean;
}

/**
 * The silence held against a domain, in milliseconds: since it was last heard (since its last state change
 * when never heard, so a freshly created domain is not stale at once but becomes stale if it never answers),
 * counted only from the start of the watch that saw it (`watchedFrom`: an outage of the control plane is not
 * the host's silence). What staleness is judged on; the age shown to operators is `heardAgeMs`.
 */
export function silenceMs(domain: DomainView, now: Date): number {
  const heard = domain.lastSeenAt ?? domain.stateChangedAt;
  const from = domain.watchedFrom;
  return ageMs(from !== undefined && !isWithinWatch(heard, Date.parse(from)) ? from : heard, now);
}

/** True when the silence held against the domain is longer than `heartbeatStaleMs` (strictly). */
export function isStale(domain: DomainView, policy: FleetPolicy, now: Date): boolean {
  return silenceMs(domain, now) > policy.heartbeatStaleMs;
}

/** True when the domain missed at least `failureThreshold` polls in a row. */
export function hasExceededFailureThreshold(domain: DomainView, policy: FleetPolicy): boolean {
  return domain.consecutiveFailures >= policy.failureThreshold;
}

/**
 * Assesses one domain from its stored state and sighting. `failed` when the store says so, when
 * `failureThreshold` consecutive polls failed, or when its silence is stale; `degraded` when the store
 * says so; `unavailable` while provisioning, stopping or stopped. Pure function of (domain, policy, now).
 */
export function assessDomain(domain: DomainView, policy: FleetPolicy, now: Date): DomainAssessment {
  const stale = isStale(domain, policy, now);
  const reasons: string[] = [];
  if (domain.state === 'failed') reasons.push('state_failed');
  if (hasExceededFailureThreshold(domain, policy)) reasons.push('consecutive_failures');
  if (stale) reasons.push('stale');
  let status: DomainHealthStatus;
  if (domain.state === 'provisioning' || domain.state === 'stopping' || domain.state === 'stopped') {
    status = 'unavailable';
    reasons.unshift(`state_${domain.state}`);
  } else if (reasons.length > 0) {
    status = 'failed';
  } else if (domain.state === 'degraded') {
    status = 'degraded';
    reasons.push('state_degraded');
  } else {
    status = 'healthy';
  }
  return { domainId: domain.id, status, reasons, heardAgeMs: heardAgeMs(domain.lastSeenAt, now), isStale: stale };
}
