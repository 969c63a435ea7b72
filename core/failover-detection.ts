import type { FleetPolicy } from '../schemas/policy';
import { hasExceededFailureThreshold, isSilenceHeldAgainst, silenceMs } from './domain-health';
import { ageMs, type DomainView } from './fleet-view';

/** Why the active is considered failed. */
export type ActiveFailureReason =
  'no_active' | 'already_failed' | 'stopped' | 'consecutive_failures' | 'stale' | 'degraded_grace';

export interface ActiveFailure {
  reason: ActiveFailureReason;
  /** One human-readable line for events and operation reasons. */
  message: string;
}

/**
 * Decides whether the active domain has failed. In order: no active domain at all; the store already
 * says `failed`; it is stopping or stopped; it missed `failureThreshold` consecutive polls; its last
 * successful poll is older than `heartbeatStaleMs` and a poll since has failed; or it has been `degraded` for at least
 * `degradedGraceMs` while a viable standby exists (a degraded active with nowhere to go keeps serving).
 * Returns null when the active is fine. Pure function of its arguments.
 */
export function detectActiveFailure(
  active: DomainView | null,
  policy: FleetPolicy,
  now: Date,
  hasViableStandby: boolean,
): ActiveFailure | null {
  if (!active) return { reason: 'no_active', message: 'the fleet has no active domain' };
  if (active.state === 'failed') {
    return { reason: 'already_failed', message: `active domain ${active.slug} is failed` };
  }
  if (active.state === 'stopping' || active.state === 'stopped') {
    return { reason: 'stopped', message: `active domain ${active.slug} is ${active.state}` };
  }
  if (hasExceededFailureThreshold(active, policy)) {
    return {
      reason: 'consecutive_failures',
      // The last poll's own words (engine wedged, supervisor timed out, ...): what the on-call reads first.
      message: `active domain ${active.slug} failed ${active.consecutiveFailures} consecutive polls (threshold ${policy.failureThreshold})${active.lastError ? `: ${active.lastError}` : ''}`,
    };
  }
  if (isSilenceHeldAgainst(active, policy, now)) {
    return {
      reason: 'stale',
      message: `active domain ${active.slug} has not answered for ${silenceMs(active, now)} ms (stale after ${policy.heartbeatStaleMs} ms)`,
    };
  }
  if (active.state === 'degraded' && hasViableStandby && ageMs(active.stateChangedAt, now) >= policy.degradedGraceMs) {
    return {
      reason: 'degraded_grace',
      message: `active domain ${active.slug} has been degraded for ${ageMs(active.stateChangedAt, now)} ms (grace ${policy.degradedGraceMs} ms)`,
    };
  }
  return null;
}
