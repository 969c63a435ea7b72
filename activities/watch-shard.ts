import { setMaxListeners } from 'node:events';
import { Context, log } from '@temporalio/activity';
import { ApplicationFailure } from '@temporalio/common';
import type { FleetSnapshot } from '../schemas/entities';
import { FailureType } from '../schemas/failures';
import type { FleetObservation } from '../core/fleet-observation';
import { toFleetView } from '../core/fleet-view';
import { MONITOR_CHECKPOINT_MS } from '../core/monitor-look';
import { isHeartbeatDue } from '../core/poll-record';
import {
  DEFAULT_WATCH_SHARDS,
  dueDigest,
  firstSignalBase,
  type LastSignal,
  signalHoldoffMs,
  signalReason,
} from '../core/watch-shard';
import { openWatchWindow, watchedFleet, type WatchContinuity, type WatchWindow } from '../core/watch-window';
import type { WatchedFleetRow } from '../db/repo/fleets';
import type { ActivityDeps } from './deps';
import type { PollRound, ProbedFleet } from './poll-round';

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
  fleets: number;
  rounds: number;
  /** Observations signalled to the fleets' monitors during this watch. */
  signalled: number;
  /** When the watch last looked (ISO): the next one follows on from it. */
  observedAt: string;
  /** Since when the shard has been watching without a gap (ISO). */
  watchingSince?: string;
}

/** How much earlier than its time a fleet's poll may start: fleets of one interval poll together. */
const ROUND_SLACK_MS = 25;
/** The longest pause between two rounds, so the shard notices new fleets and heartbeats in time. */
const MAX_PAUSE_MS = 1_000;
/** How long the polls of a round that are back wait for the rest of it, to be recorded in one statement. */
const FLUSH_WINDOW_MS = 50;
/**
 * How soon after the last watch's look a watch must start to follow on from it as a shard (its fleets each
 * by their own `heartbeatStaleMs`): the shard's heartbeat timeout, after which a dead worker's watch is retried.
 */
const SHARD_FOLLOW_ON_MS = 5_000;
const noop = () => undefined;

/**
 * Resolves after `ms`, or rejects with `signal`'s reason once it aborts; `cancel` clears the timer early
 * (the loop waits on this or on polls in flight, whichever comes first).
 */
function pause(ms: number, signal: AbortSignal): { done: Promise<void>; cancel(): void } {
  let timer: NodeJS.Timeout | undefined;
  let onAbort: (() => void) | undefined;
  const done = new Promise<void>((resolve, reject) => {
    if (signal.aborted) return reject(signal.reason);
    onAbort = () => reject(signal.reason);
    signal.addEventListener('abort', onAbort, { once: true });
    timer = setTimeout(resolve, ms);
  });
  return {
    done,
    cancel() {
      clearTimeout(timer);
      if (onAbort) signal.removeEventListener('abort', onAbort);
    },
  };
}

/**
 * The watch shards of one worker (docs/architecture.md §4.5). `watchShard` polls every fleet of its shard,
 * each at its own policy's interval and independently of the others (a fleet whose supervisor answers late
 * delays nobody else's polls), and batches the store: each round one statement reads the shard (only changed
 * snapshots come back, `store.fleets.watchShard`) before the polls that are due start, and one statement
 * records the polls that came back (`PollRound.record`). Each fleet's monitor is signalled an observation
 * when something is due that it was not told (`dueDigest`, `signalReason`), and at its checkpoint. A fleet's
 * window counts from its first poll in this watch (`openWatchWindow`), carried on from the last watch by the
 * workflow. What was signalled is remembered per worker, so the next watch of the shard here does not signal
 * it again.
 */
export function createWatchShard(deps: ActivityDeps, round: PollRound) {
  const configuredShards = deps.watchShards ?? DEFAULT_WATCH_SHARDS;
  const lastSignals = new Map<string, LastSignal>();
  const signalling = new Set<string>();

  /** The fleet as its monitor would read it now: stored, with this worker's sightings, seen through `window`. */
  const observationOf = (
    snapshot: FleetSnapshot,
    window: WatchWindow,
    reason: FleetObservation['reason'],
    polls: number,
  ): FleetObservation => ({
    fleet: watchedFleet(toFleetView(round.withSightings(snapshot)), window),
    policy: snapshot.policy,
    autoFailoverPause: snapshot.autoFailoverPause ?? null,
    observedAt: deps.now().toISOString(),
    reason,
    polls,
    watchingSince: new Date(window.watchingSinceMs).toISOString(),
  });

  return async function watchShard(input: WatchShardInput): Promise<WatchShardResult> {
    const ctx = Context.current();
    const startedAt = deps.now();
    if (input.shards !== configuredShards) {
      log.warn('watch shard retired: this worker deals the fleets over another number of shards', {
        shard: input.shard,
        shards: input.shards,
        configuredShards,
      });
      return { retired: true, fleets: 0, rounds: 0, signalled: 0, observedAt: startedAt.toISOString() };
    }
    const observe = deps.observeFleet;
    if (!observe)
      throw ApplicationFailure.nonRetryable('this worker cannot signal monitors', FailureType.InvalidTarget);
    const fleetCheckpointMs = input.fleetCheckpointMs ?? MONITOR_CHECKPOINT_MS;
    const cancelled = ctx.cancellationSignal;
    /** Each fleet of the shard as last read, by the hash its read came with. */
    const known = new Map<string, { hash: string; snapshot: FleetSnapshot }>();
    const windows = new Map<string, WatchWindow>();
    const nextPollAtMs = new Map<string, number>();
    const polls = new Map<string, number>();
    /** Fleets whose polls are under way. */
    const inFlight = new Map<string, Promise<ProbedFleet>>();
    /** Polls back and not yet recorded. */
    const probed: ProbedFleet[] = [];
    /** Fleets with a round started and not yet recorded: a fleet has one round at a time. */
    const unrecorded = new Set<string>();
    // Every request of the shard's rounds listens to the cancellation: more than Node's default of ten.
    setMaxListeners(0, cancelled);
    let rounds = 0;
    let signalled = 0;
    let lastHeartbeatAtMs: number | null = null;
    let lastLookMs = startedAt.getTime();
    // The shard's own window: whether this watch follows on from the last, whatever fleets it has.
    const shardWindow = openWatchWindow(input, ctx.info.attempt, startedAt.getTime(), SHARD_FOLLOW_ON_MS);

    /** Signals the fleet's monitor, one signal at a time per fleet; a failed one is tried again next round. */
    const signal = (fleetId: string, observation: FleetObservation, sent: LastSignal) => {
      const before = lastSignals.get(fleetId);
      lastSignals.set(fleetId, sent);
      signalling.add(fleetId);
      signalled += 1;
      observe(fleetId, observation)
        .catch((err: unknown) => {
          if (lastSignals.get(fleetId) === sent) {
            if (before) lastSignals.set(fleetId, before);
            else lastSignals.delete(fleetId);
          }
          log.warn('monitor not signalled; trying again next round', {
            fleetId,
            reason: observation.reason,
            error: err instanceof Error ? err.message : String(err),
          });
        })
        .finally(() => signalling.delete(fleetId));
    };

    /** After fleets' polls were recorded: signals each one's monitor whatever is due (see `signalReason`). */
    const signalDue = async (polled: readonly FleetSnapshot[]) => {
      for (const snapshot of polled) {
        const window = windows.get(snapshot.id);
        if (!window || signalling.has(snapshot.id)) continue;
        const count = polls.get(snapshot.id) ?? 0;
        const nowMs = deps.now().getTime();
        let observation = observationOf(snapshot, window, 'decision_due', count);
        let digest = dueDigest(observation.fleet, snapshot.policy, new Date(nowMs), !!observation.autoFailoverPause);
        let last = lastSignals.get(snapshot.id);
        if (!last) lastSignals.set(snapshot.id, (last = firstSignalBase(snapshot.id, nowMs, fleetCheckpointMs)));
        const holdoffMs = signalHoldoffMs(snapshot.policy);
        let reason = signalReason(last, digest, nowMs, holdoffMs, fleetCheckpointMs);
        if (reason === 'decision_due') {
          // The monitor decides on the fleet as stored now, others' writes during this round included.
          const latest = await deps.store.fleets.snapshot(snapshot.id);
          if (!latest) continue; // deleted meanwhile: its monitor ends by itself
          observation = observationOf(latest, window, 'decision_due', count);
          const at = Date.parse(observation.observedAt);
          digest = dueDigest(observation.fleet, latest.policy, new Date(at), !!observation.autoFailoverPause);
          reason = signalReason(last, digest, at, holdoffMs, fleetCheckpointMs);
        }
        if (reason)
          signal(snapshot.id, { ...observation, reason }, { digest, atMs: Date.parse(observation.observedAt) });
      }
    };

    for (;;) {
      const roundStartMs = deps.now().getTime();
      // At the checkpoint no poll starts: the watch returns once the polls under way are recorded.
      const isCheckpoint = roundStartMs - startedAt.getTime() >= input.checkpointMs;
      const isPollDue = (fleetId: string) =>
        !isCheckpoint && !unrecorded.has(fleetId) && (nextPollAtMs.get(fleetId) ?? 0) <= roundStartMs + ROUND_SLACK_MS;
      if (!isCheckpoint && (known.size === 0 || [...known.keys()].some(isPollDue))) {
        const rows = await deps.store.fleets.watchShard({
          shard: input.shard,
          shards: input.shards,
          known: [...known].map(([fleetId, { hash }]) => ({ fleetId, hash })),
        });
        const present = new Set(rows.map((r) => r.fleetId));
        for (const fleetId of [...known.keys()].filter((id) => !present.has(id))) {
          for (const state of [known, windows, nextPollAtMs, polls]) state.delete(fleetId);
        }
        for (const row of rows) {
          if (row.snapshot) known.set(row.fleetId, { hash: row.hash, snapshot: row.snapshot });
          if (isPollDue(row.fleetId)) startPolls(row, roundStartMs);
        }
        if (rows.length === 0) lastLookMs = deps.now().getTime(); // an empty shard looked, and found nothing
      }
      if (isCheckpoint && unrecorded.size === 0) {
        const since = Math.min(shardWindow.watchingSinceMs, ...[...windows.values()].map((w) => w.watchingSinceMs));
        return {
          retired: false,
          fleets: known.size,
          rounds,
          signalled,
          observedAt: new Date(lastLookMs).toISOString(),
          watchingSince: new Date(since).toISOString(),
        };
      }
      await pollsBack();
      if (probed.length > 0) {
        const batch = probed.splice(0);
        const recorded = await round.record(batch);
        for (const p of batch) unrecorded.delete(p.fleet.id);
        await signalDue(recorded);
        lastLookMs = deps.now().getTime();
        rounds += 1;
      }
      const nowMs = deps.now().getTime();
      if (isHeartbeatDue(lastHeartbeatAtMs, nowMs, ctx.info.heartbeatTimeoutMs)) {
        ctx.heartbeat({ fleets: known.size, rounds, signalled, observedAt: new Date(nowMs).toISOString() });
        lastHeartbeatAtMs = nowMs;
      }
    }

    /** Starts the polls of one fleet of the shard's read (its cached snapshot with the sightings just read). */
    function startPolls(row: WatchedFleetRow, roundStartMs: number) {
      const cached = known.get(row.fleetId)!.snapshot;
      const fleet = {
        ...cached,
        domains: cached.domains.map((d) => ({ ...d, lastSeenAt: row.lastSeenAt[d.id] ?? null })),
      };
      const isFirstRound = !windows.has(fleet.id);
      if (isFirstRound) {
        windows.set(fleet.id, openWatchWindow(input, ctx.info.attempt, roundStartMs, fleet.policy.heartbeatStaleMs));
      }
      // Counted from when the poll was due, so starting a little early (ROUND_SLACK_MS) never adds polls.
      const dueAtMs = Math.max(nextPollAtMs.get(fleet.id) ?? roundStartMs, roundStartMs - ROUND_SLACK_MS);
      nextPollAtMs.set(fleet.id, dueAtMs + fleet.policy.heartbeatIntervalMs);
      polls.set(fleet.id, (polls.get(fleet.id) ?? 0) + 1);
      const polling = round.probe(fleet, cancelled, isFirstRound);
      inFlight.set(fleet.id, polling);
      unrecorded.add(fleet.id);
      void polling.then(
        (p) => {
          inFlight.delete(fleet.id);
          probed.push(p);
        },
        () => {
          // Cancelled: the wait below throws.
          inFlight.delete(fleet.id);
          unrecorded.delete(fleet.id);
        },
      );
    }

    /**
     * Waits until polls are back to record: the first that comes back, then the rest of its round for up to
     * FLUSH_WINDOW_MS (so they share one write without holding back a fast failure behind a slow host), or
     * until the next poll is due, a heartbeat or a read of new fleets (MAX_PAUSE_MS). Throws once cancelled.
     */
    async function pollsBack() {
      const untilDue = () => {
        const nowMs = deps.now().getTime();
        const waiting = [...nextPollAtMs].filter(([id]) => !unrecorded.has(id)).map(([, at]) => at);
        return Math.max(0, Math.min(nowMs + MAX_PAUSE_MS, ...waiting) - nowMs);
      };
      const anyBack = () => Promise.race([...inFlight.values()].map((p) => p.then(noop, noop)));
      const allBack = () => Promise.allSettled(inFlight.values());
      if (probed.length === 0) await waitFor(untilDue(), inFlight.size > 0 ? [anyBack()] : []);
      if (probed.length > 0 && inFlight.size > 0) await waitFor(Math.min(FLUSH_WINDOW_MS, untilDue()), [allBack()]);
      if (cancelled.aborted) throw cancelled.reason;
    }

    /** The first of `ms` passing and `events`; rejects when the watch is cancelled. */
    async function waitFor(ms: number, events: Promise<unknown>[]) {
      const wait = pause(ms, cancelled);
      try {
        await Promise.race([wait.done, ...events]);
      } finally {
        wait.cancel();
      }
    }
  };
}
