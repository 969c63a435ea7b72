import { continueAsNew, log, workflowInfo } from '@temporalio/workflow';
import { WATCH_SHARD_CHECKPOINT_MS } from '../core/watch-shard';
import { continuityAfterWatch, type WatchContinuity } from '../core/watch-window';
import { watchShardActivities } from './activity-options';
import type { WatchShardWorkflowInput } from './definitions';

/**
 * Watches one shard of the fleets (`haru/watch/<taskQueue>/<shard>-of-<shards>`, docs/architecture.md §4.5) for as long as
 * the deployment deals its fleets over this many shards. Its activity polls every fleet of the shard and
 * signals each fleet's monitor when a decision is due; it hands back at its checkpoint, and the next watch
 * follows on from where it stopped (its gapless watching carried). A worker dealing the fleets over another
 * number of shards retires it. Started by every worker (`keepMonitors`) with USE_EXISTING.
 */
export async function watchShardWorkflow(input: WatchShardWorkflowInput): Promise<void> {
  const checkpointMs = input.checkpointMs ?? WATCH_SHARD_CHECKPOINT_MS;
  let continuity: WatchContinuity = { watchingSince: input.watchingSince, lookedUntil: input.lookedUntil };
  while (!workflowInfo().continueAsNewSuggested) {
    const watched = await watchShardActivities(checkpointMs).watchShard({
      shard: input.shard,
      shards: input.shards,
      checkpointMs,
      ...(input.fleetCheckpointMs !== undefined ? { fleetCheckpointMs: input.fleetCheckpointMs } : {}),
      ...continuity,
    });
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
