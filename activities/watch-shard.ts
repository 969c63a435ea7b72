import { Context, log } from '@temporalio/activity';
import { ApplicationFailure } from '@temporalio/common';
import { FailureType } from '../schemas/failures';
import { isHeartbeatDue } from '../core/poll-record';
import { DEFAULT_WATCH_SHARDS } from '../core/watch-shard';
import type { WatchContinuity } from '../core/watch-window';
import { isWorkerOwnQueue } from '../core/task-queues';
import type { ActivityDeps } from './deps';
import type { ShardStats, WatchHub } from './watch-hub';

/** The watch of one shard: which shard of how many, and the continuity the previous watch left. */
export interface WatchShardInput extends WatchContinuity {
  shard: number;
  shards: number;
  /** Return after this long, so the workflow's history and the shard's placement are renewed now and then. */
  checkpointMs: number;
  /** How long a fleet's routine signal waits (default MONITOR_CHECKPOINT_MS): its monitor's `health` age. */
  fleetCheckpointMs?: number;
}

/** What a shard's watch reports when it returns at its checkpoint (or at once, retired). */
export interface WatchShardResult {
  /** This worker deals the fleets over another number of shards (HARU_MONITOR_SHARDS): the workflow ends. */
  retired: boolean;
  /**
   * The own task queue of the worker where the shard's next watch goes: the worker holding least when this one
   * held more than its share (returned before its checkpoint), or this worker's when the watch came on its own
   * queue (so a shard handed on stays there). Absent: the deployment's monitors queue.
   */
  handTo?: string;
  fleets: number;
  rounds: number;
  /** Observations signalled to the fleets' monitors during this watch. */
  signalled: number;
  /** When the watch last looked (ISO): the next one follows on from it. */
  observedAt: string;
  /** Since when the shard has been watching without a gap (ISO). */
  watchingSince?: string;
}

/** How often the watch looks at its stats: for its heartbeat and its checkpoint. */
const TICK_MS = 250;

/**
 * The `watchShard` activity (docs/architecture.md §4.5): the shard joins this worker's watch hub, whose one
 * loop polls the fleets of every shard the worker holds, and stays joined until its checkpoint, heartbeating
 * Temporal with what the hub did for it two fifths of its heartbeat timeout apart. A cancellation, or a failure
 * of the hub's loop (the store unreachable), ends it; Temporal retries it, here or on another worker. A
 * worker dealing the fleets over another number of shards retires it at once; one holding more than its share
 * while another holds less hands it on early (its workflow sends the next watch to that worker's own queue).
 */
export function createWatchShard(deps: ActivityDeps, hub: WatchHub) {
  const configuredShards = deps.watchShards ?? DEFAULT_WATCH_SHARDS;
  return async function watchShard(input: WatchShardInput): Promise<WatchShardResult> {
    const ctx = Context.current();
    const startedAtMs = deps.now().getTime();
    if (input.shards !== configuredShards) {
      log.warn('watch shard retired: this worker deals the fleets over another number of shards', {
        shard: input.shard,
        shards: input.shards,
        configuredShards,
      });
      return { retired: true, fleets: 0, rounds: 0, signalled: 0, observedAt: new Date(startedAtMs).toISOString() };
    }
    if (!deps.observeFleet)
      throw ApplicationFailure.nonRetryable('this worker cannot signal monitors', FailureType.InvalidTarget);
    const membership = hub.join({ ...input, attempt: ctx.info.attempt });
    let lastHeartbeatAtMs: number | null = null;
    const heartbeat = (stats: ShardStats, nowMs: number) => {
      ctx.heartbeat({
        fleets: stats.fleets,
        rounds: stats.rounds,
        signalled: stats.signalled,
        observedAt: new Date(stats.lookedAtMs).toISOString(),
      });
      lastHeartbeatAtMs = nowMs;
    };
    try {
      for (;;) {
        const nowMs = deps.now().getTime();
        const stats = membership.stats();
        const handedOn = membership.handOnTo();
        if (handedOn !== null || nowMs - startedAtMs >= input.checkpointMs) {
          if (handedOn !== null)
            log.info('watch shard handed on: this worker holds more than its share', {
              shard: input.shard,
              handTo: handedOn,
            });
          const ownQueue = isWorkerOwnQueue(ctx.info.taskQueue) ? ctx.info.taskQueue : null;
          const handTo = handedOn ?? ownQueue;
          return {
            retired: false,
            ...(handTo !== null ? { handTo } : {}),
            fleets: stats.fleets,
            rounds: stats.rounds,
            signalled: stats.signalled,
            observedAt: new Date(stats.lookedAtMs).toISOString(),
            watchingSince: new Date(stats.watchingSinceMs).toISOString(),
          };
        }
        if (isHeartbeatDue(lastHeartbeatAtMs, nowMs, ctx.info.heartbeatTimeoutMs)) heartbeat(stats, nowMs);
        await Promise.race([
          ctx.sleep(Math.min(TICK_MS, input.checkpointMs - (nowMs - startedAtMs))),
          membership.failed,
        ]);
      }
    } finally {
      membership.leave();
    }
  };
}
