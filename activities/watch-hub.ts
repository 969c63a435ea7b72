import { setMaxListeners } from 'node:events';
import { log } from '@temporalio/activity';
import type { FleetSnapshot } from '../schemas/entities';
import type { FleetObservation } from '../core/fleet-observation';
import { toFleetView } from '../core/fleet-view';
import { MONITOR_CHECKPOINT_MS } from '../core/monitor-look';
import {
  dueDigest,
  firstSignalBase,
  handOnTarget,
  type LastSignal,
  signalHoldoffMs,
  signalReason,
} from '../core/watch-shard';
import { openWatchWindow, watchedFleet, type WatchContinuity, type WatchWindow } from '../core/watch-window';
import type { ActivityDeps } from './deps';
import type { PollRound, ProbedFleet } from './poll-round';

/** How much earlier than its time a fleet's poll may start: fleets of one interval poll together. */
const ROUND_SLACK_MS = 25;
/** How often empty shards are read, so the hub notices their first fleet. */
const MAX_PAUSE_MS = 1_000;
/** How long the polls of a round that are back wait for the rest of it, to be recorded in one statement. */
const FLUSH_WINDOW_MS = 50;
/**
 * How long a worker waits between two shards it hands on: one at a time, so the others' beats (every 2 s,
 * activities/watch-peers.ts) show where the last one went before the next leaves.
 */
export const HAND_ON_SPACING_MS = 2_000;

/** A shard joining the hub: its number and count, the continuity its last watch left, and its attempt. */
export interface ShardJoin extends WatchContinuity {
  shard: number;
  shards: number;
  /** The activity attempt of the watch joining: a retry never follows on from the last watch. */
  attempt: number;
  /** How long a fleet's routine signal waits (default MONITOR_CHECKPOINT_MS). */
  fleetCheckpointMs?: number;
}

/** What a joined shard's watch reports (its heartbeat and its result). */
export interface ShardStats {
  fleets: number;
  rounds: number;
  signalled: number;
  /** When the hub last looked at the shard's fleets (recorded a poll, or read an empty shard), epoch ms. */
  lookedAtMs: number;
  /** Since when the shard has been watched without a gap (its own window, or its earliest fleet's), epoch ms. */
  watchingSinceMs: number;
}

/** A shard's place in the hub, from `join` until `leave`. */
export interface ShardMembership {
  stats(): ShardStats;
  /** Rejects when the hub's loop fails (the store unreachable): the shard's watch fails with it, and is retried. */
  readonly failed: Promise<never>;
  /**
   * The own queue of the worker to hand this shard to, once, when this worker holds more shards than its share
   * and another live worker fewer (`handOnTarget`), for one shard at a time (the highest-numbered, once the
   * hub has looked at its fleets here); otherwise null. The watch returns then, naming it, and the shard's
   * workflow sends its next watch there.
   */
  handOnTo(): string | null;
  /** Leaves the hub: its fleets are no longer polled (polls under way are still recorded). */
  leave(): void;
}

interface JoinedShard {
  join: ShardJoin;
  startedAtMs: number;
  /** The shard's own window: whether this watch follows on from the last, whatever fleets it has. */
  window: WatchWindow;
  rounds: number;
  signalled: number;
  lookedAtMs: number;
  fail(err: unknown): void;
}

/** A fleet the hub watches: its shard, its stored picture by hash, and its rounds. */
interface WatchedFleet {
  shard: number;
  hash: string;
  snapshot: FleetSnapshot;
  /** Opened at its first poll under its shard's current watch. */
  window?: WatchWindow;
  nextPollAtMs: number;
  polls: number;
}

/**
 * How long after the last watch's look a shard's next watch must start to follow on from it as a shard (its
 * fleets each by their own `heartbeatStaleMs`): the shard's heartbeat timeout, after which a dead worker's
 * watch is retried.
 */
const SHARD_FOLLOW_ON_MS = 5_000;

/**
 * Resolves after `ms`, or when `wake` is called; `cancel` clears the timer early (the loop waits on this or on
 * polls in flight, whichever comes first).
 */
function pause(ms: number): { done: Promise<void>; wake(): void; cancel(): void } {
  let timer: NodeJS.Timeout | undefined;
  let wake = () => undefined as void;
  const done = new Promise<void>((resolve) => {
    timer = setTimeout(resolve, ms);
    wake = resolve;
  });
  return { done, wake, cancel: () => clearTimeout(timer) };
}

const noop = () => undefined;

/**
 * One worker's watch of the shards it holds (docs/architecture.md §4.5): every shard's `watchShard` activity
 * joins this hub, and one loop polls every fleet of every joined shard, so the store sees one read and one
 * write a round per worker however many shards it holds. Each fleet is polled at its own policy's interval and
 * independently of the others (a fleet whose supervisor answers late delays nobody else's polls): each round
 * one statement reads the joined shards (only changed snapshots come back, `store.fleets.watchShards`) before
 * the polls that are due start, and one statement records the polls that came back (`PollRound.record`).
 * Each fleet's monitor is signalled an observation when something is due that it was not told (`dueDigest`,
 * `signalReason`), and at its checkpoint. A fleet's window counts from its first poll under its shard's
 * watch (`openWatchWindow`), carried on from the shard's last watch. What was signalled is remembered per
 * worker, so the next watch of a shard here does not signal it again.
 */
export function createWatchHub(deps: ActivityDeps, round: PollRound) {
  const shards = new Map<number, JoinedShard>();
  const fleets = new Map<string, WatchedFleet>();
  /** Fleets whose polls are under way. */
  const inFlight = new Map<string, Promise<ProbedFleet>>();
  /** Polls back and not yet recorded. */
  const probed: ProbedFleet[] = [];
  /** Fleets with a round started and not yet recorded: a fleet has one round at a time. */
  const unrecorded = new Set<string>();
  const lastSignals = new Map<string, LastSignal>();
  const signalling = new Set<string>();
  let loop: Promise<void> | null = null;
  /** Set when shards join or leave: the loop reads at once. */
  let isMembershipChanged = false;
  let wakeLoop: () => void = noop;
  let lastReadAtMs = 0;
  /** Aborts the polls under way when the loop stops (no shard left, or it failed). */
  let stopPolls = new AbortController();
  let lastHandOnAtMs = Number.NEGATIVE_INFINITY;

  /** Tells the peers and the metrics how many shards this worker holds. */
  const holdingChanged = () => {
    deps.watchPeers?.hold(shards.size);
    deps.metrics?.watchShardsHeld?.(shards.size);
  };

  /** The fleet as its monitor would read it now: stored, with this worker's sightings, seen through `window`. */
  const observationOf = (snapshot: FleetSnapshot, window: WatchWindow, polls: number): FleetObservation => ({
    fleet: watchedFleet(toFleetView(round.withSightings(snapshot)), window),
    policy: snapshot.policy,
    autoFailoverPause: snapshot.autoFailoverPause ?? null,
    observedAt: deps.now().toISOString(),
    reason: 'decision_due',
    polls,
    watchingSince: new Date(window.watchingSinceMs).toISOString(),
  });

  /** Signals the fleet's monitor, one signal at a time per fleet; a failed one is tried again next round. */
  function signal(shard: JoinedShard, fleetId: string, observation: FleetObservation, sent: LastSignal) {
    const observe = deps.observeFleet!;
    const before = lastSignals.get(fleetId);
    lastSignals.set(fleetId, sent);
    signalling.add(fleetId);
    shard.signalled += 1;
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
  }

  /** After fleets' polls were recorded: signals each one's monitor whatever is due (see `signalReason`). */
  async function signalDue(polled: readonly FleetSnapshot[]) {
    for (const snapshot of polled) {
      const watched = fleets.get(snapshot.id);
      const shard = watched && shards.get(watched.shard);
      if (!watched?.window || !shard || signalling.has(snapshot.id)) continue;
      const checkpointMs = shard.join.fleetCheckpointMs ?? MONITOR_CHECKPOINT_MS;
      const nowMs = deps.now().getTime();
      let observation = observationOf(snapshot, watched.window, watched.polls);
      let digest = dueDigest(observation.fleet, snapshot.policy, new Date(nowMs), !!observation.autoFailoverPause);
      let last = lastSignals.get(snapshot.id);
      if (!last) lastSignals.set(snapshot.id, (last = firstSignalBase(snapshot.id, nowMs, checkpointMs)));
      const holdoffMs = signalHoldoffMs(snapshot.policy);
      let reason = signalReason(last, digest, nowMs, holdoffMs, checkpointMs);
      if (reason === 'decision_due') {
        // The monitor decides on the fleet as stored now, others' writes during this round included.
        const latest = await deps.store.fleets.snapshot(snapshot.id);
        if (!latest) continue; // deleted meanwhile: its monitor ends by itself
        observation = observationOf(latest, watched.window, watched.polls);
        const at = Date.parse(observation.observedAt);
        digest = dueDigest(observation.fleet, latest.policy, new Date(at), !!observation.autoFailoverPause);
        reason = signalReason(last, digest, at, holdoffMs, checkpointMs);
      }
      if (reason)
        signal(shard, snapshot.id, { ...observation, reason }, { digest, atMs: Date.parse(observation.observedAt) });
    }
  }

  /** Starts the polls of one fleet, from its picture as last read and as its own polls since have left it. */
  function startPolls(watched: WatchedFleet, roundStartMs: number, shard: JoinedShard) {
    const fleet = watched.snapshot;
    const isFirstRound = !watched.window;
    watched.window ??= openWatchWindow(shard.join, shard.join.attempt, roundStartMs, fleet.policy.heartbeatStaleMs);
    // Counted from when the poll was due when it starts a little early (ROUND_SLACK_MS), so that never adds
    // polls; from the round's start when it starts late (a late poll is not made up for with a hurried one).
    watched.nextPollAtMs = Math.max(watched.nextPollAtMs, roundStartMs) + fleet.policy.heartbeatIntervalMs;
    watched.polls += 1;
    const polling = round.probe(fleet, stopPolls.signal, isFirstRound);
    inFlight.set(fleet.id, polling);
    unrecorded.add(fleet.id);
    void polling.then(
      (p) => {
        inFlight.delete(fleet.id);
        probed.push(p);
      },
      () => {
        // The loop stopped: nothing is recorded.
        inFlight.delete(fleet.id);
        unrecorded.delete(fleet.id);
      },
    );
  }

  /** One read of the joined shards: their fleets, and the pictures of those that changed. */
  async function read() {
    const joined = [...shards.values()];
    const rows = await deps.store.fleets.watchShards({
      of: joined.map((s) => s.join.shard),
      shards: joined[0]!.join.shards,
      known: [...fleets].map(([fleetId, { hash }]) => ({ fleetId, hash })),
    });
    const present = new Set(rows.map((r) => r.fleetId));
    for (const fleetId of [...fleets.keys()]) if (!present.has(fleetId)) fleets.delete(fleetId);
    for (const row of rows) {
      if (!row.snapshot) continue;
      const watched = fleets.get(row.fleetId);
      if (watched) Object.assign(watched, { hash: row.hash, snapshot: row.snapshot });
      else
        fleets.set(row.fleetId, {
          shard: row.shard,
          hash: row.hash,
          snapshot: row.snapshot,
          nextPollAtMs: 0,
          polls: 0,
        });
    }
    lastReadAtMs = deps.now().getTime();
    const lookedAtMs = lastReadAtMs;
    for (const shard of joined) if (!rows.some((r) => r.shard === shard.join.shard)) shard.lookedAtMs = lookedAtMs;
  }

  /**
   * Waits until polls are back to record: the first that comes back, then the rest of its round for up to
   * FLUSH_WINDOW_MS (so they share one write without holding back a fast failure behind a slow host), or
   * until the next poll or read is due, or a shard joins or leaves.
   */
  async function pollsBack() {
    const untilDue = () => {
      const nowMs = deps.now().getTime();
      const waiting = [...fleets].filter(([id]) => !unrecorded.has(id)).map(([, f]) => f.nextPollAtMs);
      return Math.max(0, Math.min(lastReadAtMs + readIntervalMs(), ...waiting) - nowMs);
    };
    const anyBack = () => Promise.race([...inFlight.values()].map((p) => p.then(noop, noop)));
    const allBack = () => Promise.allSettled(inFlight.values());
    if (probed.length === 0) await waitFor(untilDue(), inFlight.size > 0 ? [anyBack()] : []);
    if (probed.length > 0 && inFlight.size > 0) await waitFor(Math.min(FLUSH_WINDOW_MS, untilDue()), [allBack()]);
  }

  /** The first of `ms` passing, `events` and a change of the shards joined. */
  async function waitFor(ms: number, events: Promise<unknown>[]) {
    const wait = pause(ms);
    wakeLoop = wait.wake;
    try {
      await Promise.race([wait.done, ...events]);
    } finally {
      wait.cancel();
      wakeLoop = noop;
    }
  }

  /**
   * How long a read stays good: the shortest poll interval of the fleets watched, so every poll starts from a
   * picture at most one interval old, fleets whose rounds drift apart do not multiply the reads, and a fleet
   * added to a shard is watched within the interval its fleets keep; MAX_PAUSE_MS while the shards are empty.
   */
  const readIntervalMs = () =>
    fleets.size === 0
      ? MAX_PAUSE_MS
      : Math.min(...[...fleets.values()].map((f) => f.snapshot.policy.heartbeatIntervalMs));

  /** Rounds until no shard is joined. */
  async function run() {
    while (shards.size > 0) {
      const roundStartMs = deps.now().getTime();
      const isDue = (id: string, f: WatchedFleet) =>
        shards.has(f.shard) && !unrecorded.has(id) && f.nextPollAtMs <= roundStartMs + ROUND_SLACK_MS;
      const sinceReadMs = roundStartMs - lastReadAtMs;
      if (isMembershipChanged || sinceReadMs >= readIntervalMs() - Math.min(ROUND_SLACK_MS, readIntervalMs() / 2)) {
        isMembershipChanged = false;
        await read();
      }
      for (const [id, f] of fleets) if (isDue(id, f)) startPolls(f, roundStartMs, shards.get(f.shard)!);
      if (!isMembershipChanged) await pollsBack();
      if (probed.length > 0) {
        const batch = probed.splice(0);
        const recorded = await round.record(batch);
        for (const p of batch) unrecorded.delete(p.fleet.id);
        // The picture as this worker's own writes left it, until a read says otherwise (a read that came in
        // while the polls were out is newer, and kept).
        recorded.forEach(({ stored }, i) => {
          const watched = fleets.get(stored.id);
          if (watched?.snapshot === batch[i]!.fleet) watched.snapshot = stored;
        });
        await signalDue(recorded.map((r) => r.polled));
        const lookedAtMs = deps.now().getTime();
        const shardsLooked = new Set(batch.map((p) => fleets.get(p.fleet.id)?.shard));
        for (const shard of shards.values()) {
          shard.rounds += 1;
          if (shardsLooked.has(shard.join.shard)) shard.lookedAtMs = lookedAtMs;
        }
      }
    }
  }

  /** Starts the loop unless it runs; a loop that fails fails every shard joined, which are retried. */
  function ensureLoop() {
    if (loop) return;
    stopPolls = new AbortController();
    // Every request of the hub's rounds listens to it: more than Node's default of ten.
    setMaxListeners(0, stopPolls.signal);
    loop = run()
      .catch((err: unknown) => {
        for (const shard of shards.values()) shard.fail(err);
        shards.clear();
        holdingChanged();
      })
      .finally(() => {
        stopPolls.abort();
        fleets.clear();
        probed.length = 0;
        unrecorded.clear();
        loop = null;
        // A shard that joined while this loop was ending is served by the next.
        if (shards.size > 0) ensureLoop();
      });
  }

  return {
    /**
     * Joins shard `join.shard` to the hub (a shard joined already is replaced: a retried watch of it on this
     * worker). Its fleets are polled from the next round until `leave`.
     */
    join(join: ShardJoin): ShardMembership {
      const startedAtMs = deps.now().getTime();
      let fail: (err: unknown) => void = noop;
      const failed = new Promise<never>((_resolve, reject) => (fail = reject));
      failed.catch(noop); // rejected only for a watch that awaits it
      const shard: JoinedShard = {
        join,
        startedAtMs,
        window: openWatchWindow(join, join.attempt, startedAtMs, SHARD_FOLLOW_ON_MS),
        rounds: 0,
        signalled: 0,
        lookedAtMs: startedAtMs,
        fail,
      };
      const previous = shards.get(join.shard);
      if (previous) previous.fail(new Error(`watch shard ${join.shard} joined again on this worker`));
      shards.set(join.shard, shard);
      // Its fleets' windows open again at their first poll under this watch.
      for (const f of fleets.values()) if (f.shard === join.shard) f.window = undefined;
      isMembershipChanged = true;
      holdingChanged();
      wakeLoop();
      ensureLoop();
      return {
        failed,
        handOnTo() {
          const peers = deps.watchPeers;
          const nowMs = deps.now().getTime();
          if (!peers || shards.get(join.shard) !== shard || shard.lookedAtMs <= startedAtMs) return null;
          if (nowMs - lastHandOnAtMs < HAND_ON_SPACING_MS || join.shard !== Math.max(...shards.keys())) return null;
          const target = handOnTarget(shards.size, peers.others(), join.shards);
          if (!target) return null;
          lastHandOnAtMs = nowMs;
          return target.ownQueue;
        },
        stats() {
          const own = [...fleets.values()].filter((f) => f.shard === join.shard);
          const since = Math.min(
            shard.window.watchingSinceMs,
            ...own.flatMap((f) => (f.window ? [f.window.watchingSinceMs] : [])),
          );
          return {
            fleets: own.length,
            rounds: shard.rounds,
            signalled: shard.signalled,
            lookedAtMs: shard.lookedAtMs,
            watchingSinceMs: since,
          };
        },
        leave() {
          if (shards.get(join.shard) !== shard) return;
          shards.delete(join.shard);
          for (const [id, f] of fleets) if (f.shard === join.shard) fleets.delete(id);
          isMembershipChanged = true;
          holdingChanged();
          wakeLoop();
        },
      };
    },
  };
}
export type WatchHub = ReturnType<typeof createWatchHub>;
