import type { FleetHealth } from '../schemas/health';
import type { FleetPolicy } from '../schemas/policy';
import { assessDomain } from './domain-health';
import { activeDomainOf, type FleetView } from './fleet-view';
import { HOST_REPAIR_REASONS, hostRepairsDue } from './host-repair';
import { decideMonitorAction, type MonitorDecisionOptions } from './monitor-decision';
import { rankStandbys, standbyViability } from './standby-ranking';

/**
 * Summarises one observation for the monitor's `health` query: every domain's assessment, the standby
 * ranking, the active's failure (if any) and what blocks a failover. Pure function of its arguments.
 */
export function summarizeHealth(
  fleet: FleetView,
  policy: FleetPolicy,
  now: Date,
  options: MonitorDecisionOptions,
): FleetHealth {
  const active = activeDomainOf(fleet);
  const decision = decideMonitorAction(fleet, policy, now, options);
  const repairs = hostRepairsDue(fleet);
  return {
    fleetId: fleet.id,
    fleetSlug: fleet.slug,
    activeDomainId: fleet.activeDomainId,
    routeRevision: fleet.routeRevision,
    autoFailover: policy.autoFailover,
    isAutoFailoverPaused: options.isAutoFailoverPaused,
    checkedAt: now.toISOString(),
    domains: fleet.domains.map((d) => {
      const assessment = assessDomain(d, policy, now);
      return {
        domainId: d.id,
        slug: d.slug,
        state: d.state,
        isActive: d.id === fleet.activeDomainId,
        status: assessment.status,
        // A host not in the shape its role needs is flagged whatever its health (the monitor repairs it).
        reasons: [
          ...assessment.reasons,
          ...repairs.filter((r) => r.domainId === d.id).map((r) => HOST_REPAIR_REASONS[r.kind]),
        ],
        lastSeenAt: d.lastSeenAt,
        heartbeatAgeMs: assessment.heardAgeMs,
        consecutiveFailures: d.consecutiveFailures,
        lastError: d.lastError,
        isViableStandby: standbyViability(d, active, policy, now).isViable,
      };
    }),
    standbyRanking: rankStandbys(fleet, policy, now).map((d) => d.id),
    activeFailure: decision.failure,
    failoverBlockedBy: decision.blockedBy,
    inFlightOperationId: fleet.inFlightOperation?.id ?? null,
  };
}
