import type { FleetPolicy } from '../schemas/policy';
import { ageMs, type DomainView } from './fleet-view';

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
  /** Milliseconds since the last successful poll (since the last state change when never seen). */
  heartbeatAgeMs: number;
  isStale: boolean;
}

/**
 * Milliseconds since the domain last answered a poll. A domain never seen counts from its last state
 * change, so a freshly created domain is not stale at once but becomes stale if it never answers.
 */
export function heartbeatAgeMs(domain: DomainView, now: Date): number {
  return ageMs(domain.lastSeenAt ?? domain.stateChangedAt, now);
}

/** True when the last successful poll is older than `heartbeatStaleMs` (strictly). */
export function isStale(domain: DomainView, policy: FleetPolicy, now: Date): boolean {
  return heartbeatAgeMs(domain, now) > policy.heartbeatStaleMs;
}

/** True when the domain missed at least `failureThreshold` polls in a row. */
export function hasExceededFailureThreshold(domain: DomainView, policy: FleetPolicy): boolean {
  return domain.consecutiveFailures >= policy.failureThreshold;
}

/**
 * Assesses one domain from its stored state and heartbeat. `failed` when the store says so, when
 * `failureThreshold` consecutive polls failed, or when the heartbeat is stale; `degraded` when the store
 * says so; `unavailable` while provisioning, stopping or stopped. Pure function of (domain, policy, now).
 */
export function assessDomain(domain: DomainView, policy: FleetPolicy, now: Date): DomainAssessment {
  const age = heartbeatAgeMs(domain, now);
  const stale = age > policy.heartbeatStaleMs;
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
  return { domainId: domain.id, status, reasons, heartbeatAgeMs: age, isStale: stale };
}
