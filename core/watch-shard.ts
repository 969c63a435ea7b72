import type { FleetPolicy } from '../schemas/policy';
import type { FleetView } from './fleet-view';
import { hostRepairRetryMs, hostRepairsDue } from './host-repair';
import { decideMonitorAction, operationToStart, PENDING_OPERATION_GRACE_MS } from './monitor-decision';

/**
 * Watch shards (docs/architecture.md §4.5): the fleets are dealt over a fixed number of shards by a hash of
 * their id, and one long-running activity per shard polls every fleet of its shard. A fleet's monitor
 * workflow waits between looks; the shard signals it an observation when a decision is due, and once per
 * checkpoint so its `health` stays fresh. Temporal then carries one heartbeating activity per shard rather
 * than one per fleet, and the shard reads and writes its fleets in one statement a round.
 */

/** How many shards the fleets are dealt over unless HARU_MONITOR_SHARDS says otherwise (every worker the same). */
export const DEFAULT_WATCH_SHARDS = 8;

/** The most shards a deployment may ask for: one activity slot each on whichever workers hold them. */
export const MAX_WATCH_SHARDS = 256;

/** How long a shard's watch runs before it hands back to its workflow (which starts the next at once). */
export const WATCH_SHARD_CHECKPOINT_MS = 5 * 60_000;

/**
 * What is due for a fleet after one look, as a stable string, or null when nothing is: the monitor's
 * failover decision (its reason, target, marking and release), a pending operation to start, and the host
 * repairs. The shard knows only what the store says (the stored pause included): the monitor's own memory
 * (a standby cooling down, an operation it already tried, a repair held back) is the monitor's to apply, so a
 * digest the monitor acts on no further stays the same, and the shard does not signal it again before
 * `signalHoldoffMs`. Pure.
 */
export function dueDigest(
  fleet: FleetView,
  policy: FleetPolicy,
  now: Date,
  isAutoFailoverPaused: boolean,
): string | null {
  const parts: string[] = [];
  const decision = decideMonitorAction(fleet, policy, now, { isAutoFailoverPaused });
  if (decision.kind === 'failover') {
    parts.push(
      [
        'failover',
        decision.failure.reason,
        decision.shouldMarkActiveFailed ? 'mark' : 'marked',
        decision.promoteDomainId ?? '-',
        decision.releaseOperationId ?? '-',
      ].join(':'),
    );
  }
  const pending = operationToStart(fleet, now, PENDING_OPERATION_GRACE_MS, []);
  if (pending) parts.push(`start:${pending.id}`);
  for (const repair of hostRepairsDue(fleet)) parts.push(`${repair.kind}:${repair.domainId}`);
  return parts.length > 0 ? parts.join(' ') : null;
}

/** How long the shard waits before it signals an unchanged due digest again: the monitor's repair retry. */
export const signalHoldoffMs = (policy: FleetPolicy): number => hostRepairRetryMs(policy);

/** What the shard last signalled a fleet's monitor: the digest (null for a routine look) and when (ms). */
export interface LastSignal {
  digest: string | null;
  atMs: number;
}

/**
 * Whether the shard signals the fleet's monitor after this round, and why: `decision_due` when something is
 * due that it has not signalled (a new digest) or not within `holdoffMs`; `checkpoint` when it has signalled
 * nothing for `checkpointMs`, so the monitor's `health` never ages past a checkpoint while its shard runs;
 * null otherwise. Pure.
 */
export function signalReason(
  last: LastSignal,
  digest: string | null,
  nowMs: number,
  holdoffMs: number,
  checkpointMs: number,
): 'decision_due' | 'checkpoint' | null {
  if (digest !== null && (digest !== last.digest || nowMs - last.atMs >= holdoffMs)) return 'decision_due';
  return nowMs - last.atMs >= checkpointMs ? 'checkpoint' : null;
}

/**
 * When a shard that first sees a fleet at `nowMs` counts its last signal, so the routine signals of a
 * shard's fleets spread over the checkpoint instead of coming all at once: a fraction of the checkpoint
 * taken from the fleet id (FNV-1a), the same on every worker. The fleet's monitor looked for itself when it
 * started, so nothing is lost by the first routine signal coming up to a checkpoint later. Pure.
 */
export function firstSignalBase(fleetId: string, nowMs: number, checkpointMs: number): LastSignal {
  let hash = 0x811c9dc5;
  for (let i = 0; i < fleetId.length; i += 1) {
    hash ^= fleetId.charCodeAt(i);
    hash = Math.imul(hash, 0x01000193) >>> 0;
  }
  return { digest: null, atMs: nowMs - (hash % Math.max(1, checkpointMs)) };
}

/**
 * Where a worker holding `held` of `shards` watch shards should hand one on, `others` being each other live
 * worker of the deployment: to the one holding least, when this worker holds more than its share (the shards
 * over the live workers, rounded up) and that one less than its share; otherwise nowhere (null). The shard's
 * next watch is sent to that worker's own queue. Pure.
 */
export function handOnTarget<T extends { held: number }>(held: number, others: readonly T[], shards: number): T | null {
  const share = Math.ceil(shards / (others.length + 1));
  const least = others.reduce<T | null>((a, b) => (a === null || b.held < a.held ? b : a), null);
  return held > share && least !== null && least.held < share ? least : null;
}
