import type { FleetPolicy } from '../../schemas/policy';
import { type ActiveFailure, detectActiveFailure } from './failover-detection';
import { activeDomainOf, ageMs, type FleetView, type OperationView } from './fleet-view';
import { rankStandbys } from './standby-ranking';

/** Why a failed active is not being replaced right now. */
export type FailoverBlock = 'auto_failover_off' | 'paused' | 'operation_in_flight' | 'no_viable_standby';

/**
 * What the monitor should do after a round of polls.
 * - `none`: nothing is due (the active is fine, or it failed and is already marked but the failover is blocked).
 * - `failover`: mark the active failed when `shouldMarkActiveFailed`, and promote `promoteDomainId` when set.
 */
export type MonitorDecision =
  | { kind: 'none'; failure: ActiveFailure | null; blockedBy: FailoverBlock | null }
  | {
      kind: 'failover';
      failure: ActiveFailure;
      activeDomainId: string | null;
      shouldMarkActiveFailed: boolean;
      promoteDomainId: string | null;
      blockedBy: FailoverBlock | null;
    };

export interface MonitorDecisionOptions {
  /** Set by the `pauseAutoFailover` signal; the policy's `autoFailover` is the standing setting. */
  isAutoFailoverPaused: boolean;
}

// Only these detections describe a broken host; `stopped` is an operator's doing and `no_active` has nothing to mark.
const MARKABLE = new Set<ActiveFailure['reason']>(['consecutive_failures', 'stale', 'degraded_grace']);

/**
 * Decides the monitor's next action from one observation. The active is failed per `detectActiveFailure`;
 * a promotion is requested only when `autoFailover` is on, the monitor is not paused, no operation is in
 * flight and a viable standby exists (the best one by `rankStandbys`). Pure function of its arguments.
 */
export function decideMonitorAction(
  fleet: FleetView,
  policy: FleetPolicy,
  now: Date,
  options: MonitorDecisionOptions,
): MonitorDecision {
  const active = activeDomainOf(fleet);
  const ranked = rankStandbys(fleet, policy, now);
  const failure = detectActiveFailure(fleet.activeDomainId === null ? null : active, policy, now, ranked.length > 0);
  if (!failure) return { kind: 'none', failure: null, blockedBy: null };
  const blockedBy: FailoverBlock | null = !policy.autoFailover
    ? 'auto_failover_off'
    : options.isAutoFailoverPaused
      ? 'paused'
      : fleet.inFlightOperation
        ? 'operation_in_flight'
        : ranked.length === 0
          ? 'no_viable_standby'
          : null;
  const shouldMarkActiveFailed = active !== null && active.state !== 'failed' && MARKABLE.has(failure.reason);
  const promoteDomainId = blockedBy === null ? (ranked[0]?.id ?? null) : null;
  if (!shouldMarkActiveFailed && promoteDomainId === null) return { kind: 'none', failure, blockedBy };
  return {
    kind: 'failover',
    failure,
    activeDomainId: active?.id ?? null,
    shouldMarkActiveFailed,
    promoteDomainId,
    blockedBy,
  };
}

/**
 * The pending operation the monitor should start because its workflow may be missing (the API that
 * inserted it crashed before starting it): pending for at least `pendingGraceMs` and not tried before by
 * this monitor run. Null when there is none.
 */
export function operationToStart(
  fleet: FleetView,
  now: Date,
  pendingGraceMs: number,
  alreadyTriedIds: readonly string[],
): OperationView | null {
  const op = fleet.inFlightOperation;
  if (!op || op.state !== 'pending' || alreadyTriedIds.includes(op.id)) return null;
  return ageMs(op.createdAt, now) >= pendingGraceMs ? op : null;
}

/** True when the monitor's watch activity should hand control back to the workflow. */
export function isDecisionDue(
  fleet: FleetView,
  policy: FleetPolicy,
  now: Date,
  options: MonitorDecisionOptions & { pendingGraceMs: number; alreadyTriedIds: readonly string[] },
): boolean {
  return (
    decideMonitorAction(fleet, policy, now, options).kind !== 'none' ||
    operationToStart(fleet, now, options.pendingGraceMs, options.alreadyTriedIds) !== null
  );
}
