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
  /** Why the status is not `healthy`, as short machine-readable phrases; `unpolled` whatever the status: stale, with no failed poll. */
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

/**
 * True when the domain's silence counts against it: stale, and polls that counted failed since it was last
 * heard. A watcher that lagged (its polls not recorded), saw nothing (a blind round) or did not poll at all has
 * no evidence about the host, and a stale age alone would blame the host for the watcher (§9.2). The one rule
 * for the failover decision and for what the monitor shows.
 */
export function isSilenceHeldAgainst(domain: DomainView, policy: FleetPolicy, now: Date): boolean {
  return domain.consecutiveFailures > 0 && isStale(domain, policy, now);
}

/** True when the domain missed at least `failureThreshold` polls in a row. */
export function hasExceededFailureThreshold(domain: DomainView, policy: FleetPolicy): boolean {
  return domain.consecutiveFailures >= policy.failureThreshold;
}

/**
 * Assesses one domain from its stored state and sighting. `failed` when the store says so, when
 * `failureThreshold` consecutive polls failed, or when its silence is held against it (isSilenceHeldAgainst);
 * `degraded` when the store says so; `unavailable` while provisioning, stopping or stopped. A stale domain no
 * failed poll speaks against keeps its status with the reason `unpolled`: the watcher, not the host, is silent.
 * Pure function of (domain, policy, now).
 */
export function assessDomain(domain: DomainView, policy: FleetPolicy, now: Date): DomainAssessment {
  const stale = isStale(domain, policy, now);
  const reasons: string[] = [];
  if (domain.state === 'failed') reasons.push('state_failed');
  if (hasExceededFailureThreshold(domain, policy)) reasons.push('consecutive_failures');
  if (isSilenceHeldAgainst(domain, policy, now)) reasons.push('stale');
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
  if (stale && !reasons.includes('stale') && status !== 'unavailable') reasons.push('unpolled');
  return { domainId: domain.id, status, reasons, heardAgeMs: heardAgeMs(domain.lastSeenAt, now), isStale: stale };
}
