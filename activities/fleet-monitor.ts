import { Context } from '@temporalio/activity';
import { ApplicationFailure } from '@temporalio/common';
import type { FleetSnapshot } from '../schemas/entities';
import { FailureType } from '../schemas/failures';
import type { FleetObservation } from '../core/fleet-observation';
import { toFleetView } from '../core/fleet-view';
import { watchedFleet } from '../core/watch-window';
import type { ActivityDeps } from './deps';
import { createPollRound } from './poll-round';
import { createWatchHub } from './watch-hub';
import { createWatchShard } from './watch-shard';

export type { FleetObservation } from '../core/fleet-observation';
export type { WatchShardInput, WatchShardResult } from './watch-shard';

/** What the monitor's own look needs: the fleet. */
export interface LookAtFleetInput {
  fleetId: string;
}

/**
 * The fleet monitor's activities (docs/architecture.md §4.5): its own look at a fleet, the watch of a shard
 * of fleets, and the stored pause. Every look and shard of this worker shares one poll round (`PollRound`),
 * so what the worker last saw of a domain is one memory.
 */
export function createFleetMonitorActivities(deps: ActivityDeps) {
  const { store } = deps;
  const round = createPollRound(deps);

  async function readSnapshot(fleetId: string): Promise<FleetSnapshot> {
    const snapshot = await store.fleets.snapshot(fleetId);
    if (!snapshot) throw ApplicationFailure.nonRetryable(`fleet ${fleetId} does not exist`, FailureType.InvalidTarget);
    return snapshot;
  }

  /**
   * One round of polls of every domain of the fleet (each written: a look leaves a fresh sighting), then the
   * fleet as stored now, others' writes during the round included. The look's window is the look itself:
   * staleness and the degraded grace count only time a shard has watched, so a look fails an active over
   * only on what the store says (failed polls, a failed or stopped domain).
   */
  async function lookAtFleet(input: LookAtFleetInput): Promise<FleetObservation> {
    const startedAtMs = deps.now().getTime();
    await round.poll([await readSnapshot(input.fleetId)], Context.current().cancellationSignal, true);
    const latest = round.withSightings(await readSnapshot(input.fleetId));
    return {
      fleet: watchedFleet(toFleetView(latest), { startedAtMs, watchingSinceMs: startedAtMs }),
      policy: latest.policy,
      autoFailoverPause: latest.autoFailoverPause ?? null,
      observedAt: deps.now().toISOString(),
      reason: 'immediate',
      polls: 1,
      watchingSince: new Date(startedAtMs).toISOString(),
    };
  }

  return {
    /**
     * Writes the monitor's `pauseAutoFailover` / `resumeAutoFailover` signal into the fleet's stored pause
     * (the one the API writes too), so it outlives the monitor run. `changed: false` when it already was so.
     */
    async setAutoFailoverPause(input: {
      fleetId: string;
      paused: boolean;
      by: string;
      reason?: string | null;
    }): Promise<{ changed: boolean }> {
      const set = await store.fleets.setAutoFailoverPause(input.fleetId, input);
      if (!set)
        throw ApplicationFailure.nonRetryable(`fleet ${input.fleetId} does not exist`, FailureType.InvalidTarget);
      return { changed: set.changed };
    },

    /** See `lookAtFleet` above. Throws non-retryable InvalidTarget when the fleet is gone. */
    lookAtFleet,

    /** Watches every fleet of one shard until its checkpoint (activities/watch-shard.ts). */
    watchShard: createWatchShard(deps, createWatchHub(deps, round)),
  };
}
