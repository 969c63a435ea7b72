import type { Store } from '../db/store';
import type { WatchWorkerPeer } from '../db/repo/watch-workers';

/** How often a worker tells the store what it holds and learns what the others hold. */
export const WATCH_PEERS_BEAT_MS = 2_000;
/** A worker whose last beat is older than this is gone (several beats missed, a stalled event loop allowed). */
export const WATCH_PEERS_LIVE_WITHIN_MS = 10_000;

/** What a worker's watch hub knows of the other workers holding watch shards (docs/architecture.md §4.5). */
export interface WatchPeers {
  /** How many shards this worker holds now (the hub tells at every join and leave). */
  hold(held: number): void;
  /** Each other live worker of the deployment, as their last beats left them, as of this worker's last beat. */
  others(): readonly WatchWorkerPeer[];
}

/**
 * This worker's place among the workers holding watch shards (`store.watchWorkers`): from `start` until
 * `stop` it beats every WATCH_PEERS_BEAT_MS, recording what it holds and reading what the others hold. A beat
 * that fails leaves it knowing no others (so it hands nothing on from stale news) until one succeeds.
 */
export function createWatchPeers(opts: {
  store: Store;
  /** This worker's identity for this run. */
  id: string;
  /** The task queue only this worker polls (a shard handed to it goes there). */
  ownQueue: string;
  taskQueue: string;
  shards: number;
  beatMs?: number;
  liveWithinMs?: number;
  onError?: (err: unknown) => void;
}): WatchPeers & { start(): void; stop(): Promise<void> } {
  let held = 0;
  let others: readonly WatchWorkerPeer[] = [];
  let timer: NodeJS.Timeout | undefined;
  let beating: Promise<void> | null = null;
  const beat = () => {
    beating ??= opts.store.watchWorkers
      .beat({
        id: opts.id,
        taskQueue: opts.taskQueue,
        ownQueue: opts.ownQueue,
        shards: opts.shards,
        held,
        liveWithinMs: opts.liveWithinMs ?? WATCH_PEERS_LIVE_WITHIN_MS,
      })
      .then(
        (rows) => void (others = rows),
        (err: unknown) => {
          others = [];
          opts.onError?.(err);
        },
      )
      .finally(() => (beating = null));
    return beating;
  };
  return {
    hold: (n) => void (held = n),
    others: () => others,
    start() {
      if (timer) return;
      void beat();
      timer = setInterval(() => void beat(), opts.beatMs ?? WATCH_PEERS_BEAT_MS);
      timer.unref();
    },
    async stop() {
      clearInterval(timer);
      timer = undefined;
      await beating;
      await opts.store.watchWorkers.leave(opts.id).catch((err: unknown) => opts.onError?.(err));
    },
  };
}
