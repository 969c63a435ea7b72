import { ActivityFailure, continueAsNew, log, workflowInfo } from '@temporalio/workflow';
import { WATCH_SHARD_CHECKPOINT_MS } from '../core/watch-shard';
import { continuityAfterWatch, type WatchContinuity } from '../core/watch-window';
import { watchShardActivities } from './activity-options';
import type { WatchShardWorkflowInput } from './definitions';

/**
 * Watches one shard of the fleets (`haru/watch/<taskQueue>/<shard>-of-<shards>`, docs/architecture.md §4.5) for as long as
 * the deployment deals its fleets over this many shards. Its activity polls every fleet of the shard and
 * signals each fleet's monitor when a decision is due; it hands back at its checkpoint, and the next watch
 * follows on from where it stopped (its gapless watching carried). A watch that handed the shard on to a
 * less loaded worker names that worker's own queue, where the next goes (back to the shared queue if that
 * worker does not take it up). A worker dealing the fleets over another number of shards retires it. Started by
 * every worker (`keepMonitors`) with USE_EXISTING.
 */
export async function watchShardWorkflow(input: WatchShardWorkflowInput): Promise<void> {
  const checkpointMs = input.checkpointMs ?? WATCH_SHARD_CHECKPOINT_MS;
  let continuity: WatchContinuity = { watchingSince: input.watchingSince, lookedUntil: input.lookedUntil };
  /** The own queue of the worker the last watch handed the shard on to, for the next watch. */
  let handedTo: string | undefined;
  while (!workflowInfo().continueAsNewSuggested) {
    const watching = watchShardActivities(checkpointMs, handedTo).watchShard({
      shard: input.shard,
      shards: input.shards,
      checkpointMs,
      ...(input.fleetCheckpointMs !== undefined ? { fleetCheckpointMs: input.fleetCheckpointMs } : {}),
      ...continuity,
    });
    let watched: Awaited<typeof watching>;
    try {
      watched = await watching;
    } catch (err) {
      if (handedTo === undefined || !(err instanceof ActivityFailure)) throw err;
      // The worker it was handed to did not take it up (gone meanwhile): any worker takes the next.
      log.warn('watch shard not taken up where it was handed on; back on the shared queue', {
        shard: input.shard,
        handedTo,
        error: err.cause?.message ?? err.message,
      });
      handedTo = undefined;
      continue;
    }
    handedTo = watched.handTo;
    if (watched.retired) {
      log.warn('watch shard retired: the workers deal the fleets over another number of shards', {
        shard: input.shard,
        shards: input.shards,
      });
      return;
    }
    continuity = continuityAfterWatch(continuity, watched, new Date().toISOString());
  }
  await continueAsNew<typeof watchShardWorkflow>({ ...input, ...continuity });
}
