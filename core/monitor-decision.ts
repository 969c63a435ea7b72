import type { FleetPolicy } from '../schemas/policy';
import { isStale } from './domain-health';
import { type ActiveFailure, detectActiveFailure } from './failover-detection';
import { activeDomainOf, ageMs, type FleetView, type OperationView } from './fleet-view';
import { rankStandbys } from './standby-ranking';

/** Why a failed active is not being replaced right now. */
export type FailoverBlock =
  'watcher_blind' | 'auto_failover_off' | 'paused' | 'operation_in_flight' | 'no_viable_standby' | 'cooling_down';

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
      /**
       * A promotion in flight that committed routing and only demotes the old active: the monitor asks it
       * to end now (releaseAtCommit), so the next round can fail over. Null otherwise.
       */
      releaseOperationId: string | null;
    };

export interface MonitorDecisionOptions {
  /** Set by the `pauseAutoFailover` signal; the policy's `autoFailover` is the standing setting. */
  isAutoFailoverPaused: boolean;
  /**
   * Standbys the monitor promoted recently and must not pick again yet (a promotion that failed put them
   * back on standby; trying again at once would thrash their GPUs).
   */
  coolingDownIds?: readonly string[];
  /** Committed promotions already asked to end (not asked again). */
  releasedOperationIds?: readonly string[];
}

// Only these detections describe a broken host; `stopped` is an operator's doing and `no_active` has nothing to mark.
const MARKABLE = new Set<ActiveFailure['reason']>(['consecutive_failures', 'stale', 'degraded_grace']);
// A broken host, or one already marked failed: a committed promotion is released for these only.
const MARKABLE_OR_FAILED = new Set<ActiveFailure['reason']>([...MARKABLE, 'already_failed']);

/**
 * Decides the monitor's next action from one observation. The active is failed per `detectActiveFailure`;
 * a promotion is requested only when `autoFailover` is on, the monitor is not paused, no operation is in
 * flight and a viable standby exists that is not cooling down (the best one by `rankStandbys`). Pure
 * function of its arguments.
 */
export function decideMonitorAction(
  fleet: FleetView,
  policy: FleetPolicy,
  now: Date,
  options: MonitorDecisionOptions,
): MonitorDecision {
  const active = activeDomainOf(fleet);
  const viable = rankStandbys(fleet, policy, now);
  const ranked = viable.filter((d) => !options.coolingDownIds?.includes(d.id));
  const failure = detectActiveFailure(fleet.activeDomainId === null ? null : active, policy, now, viable.length > 0);
  if (!failure) return { kind: 'none', failure: null, blockedBy: null };
  if (isWatcherBlind(fleet, failure, policy, now)) return { kind: 'none', failure, blockedBy: 'watcher_blind' };
  const blockedBy: FailoverBlock | null = !policy.autoFailover
    ? 'auto_failover_off'
    : options.isAutoFailoverPaused
      ? 'paused'
      : fleet.inFlightOperation
        ? 'operation_in_flight'
        : viable.length === 0
          ? 'no_viable_standby'
          : ranked.length === 0
            ? 'cooling_down'
            : null;
  const shouldMarkActiveFailed = active !== null && active.state !== 'failed' && MARKABLE.has(failure.reason);
  const promoteDomainId = blockedBy === null ? (ranked[0]?.id ?? null) : null;
  // The operation ends at the commit as far as the next failover goes: one that only demotes the old
  // active is asked to end when the fleet would otherwise fail over now.
  const op = fleet.inFlightOperation;
  const wouldFailOver = policy.autoFailover && !options.isAutoFailoverPaused && MARKABLE_OR_FAILED.has(failure.reason);
  const releaseOperationId =
    blockedBy === 'operation_in_flight' &&
    wouldFailOver &&
    op?.kind === 'promote' &&
    op.routingCommitted === true &&
    op.targetDomainId === fleet.activeDomainId &&
    !options.releasedOperationIds?.includes(op.id)
      ? op.id
      : null;
  if (!shouldMarkActiveFailed && promoteDomainId === null && releaseOperationId === null) {
    return { kind: 'none', failure, blockedBy };
  }
  return {
    kind: 'failover',
    failure,
    activeDomainId: active?.id ?? null,
    shouldMarkActiveFailed,
    promoteDomainId,
    blockedBy,
    releaseOperationId,
  };
}

/**
 * Whether the active's failure says more about the watcher than about the host: it is failed by silence alone
 * (`stale`: no successful poll for `heartbeatStaleMs`) and every other domain of the fleet not stopped is as
 * silent. A dying region leaves the domains elsewhere answering; a watcher cut off from every host hears none.
 * Held, like a blind round of polls (core/poll-record.ts `isBlindRound`): the active is not marked failed and
 * nothing is promoted until a domain answers. Refusals and failed polls are the hosts' own evidence, never
 * held. Pure.
 */
export function isWatcherBlind(fleet: FleetView, failure: ActiveFailure, policy: FleetPolicy, now: Date): boolean {
  if (failure.reason !== 'stale') return false;
  const others = fleet.domains.filter((d) => d.id !== fleet.activeDomainId && d.state !== 'stopped');
  return others.length > 0 && others.every((d) => isStale(d, policy, now));
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

/** A pending operation younger than this is left to whoever created it to start. */
export const PENDING_OPERATION_GRACE_MS = 10_000;

/** How long a standby the monitor promoted is not picked again: a minute, or the degraded grace if longer. */
export const promotionCooldownMs = (policy: FleetPolicy): number => Math.max(60_000, policy.degradedGraceMs);

/** The standbys promoted within the cooldown before `now` (the `coolingDownIds` decision option). */
export function coolingDownIds(
  recent: readonly { domainId: string; at: string }[],
  policy: FleetPolicy,
  now: Date,
): string[] {
  return recent.filter((r) => ageMs(r.at, now) < promotionCooldownMs(policy)).map((r) => r.domainId);
}
