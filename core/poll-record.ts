import type { FleetPolicy } from '../schemas/policy';

/** What the store holds of a domain's polls (a Domain row fits). */
export interface StoredPollFields {
  lastSeenAt: string | null;
  consecutiveFailures: number;
  lastError: string | null;
}

/**
 * How stale the stored `lastSeenAt` of a domain that keeps answering may get before a poll writes it again:
 * half the stale limit, never under one poll interval. Readers of the store (`haru fleet status`'s last-poll
 * age, a promotion's standby ranking, the API's stored health) then never see a live domain as stale: its
 * stored sighting is at most this plus one late round old, well under `heartbeatStaleMs`.
 */
export const lastSeenRefreshMs = (policy: Pick<FleetPolicy, 'heartbeatIntervalMs' | 'heartbeatStaleMs'>): number =>
  Math.max(policy.heartbeatIntervalMs, Math.floor(policy.heartbeatStaleMs / 2));

/**
 * Whether a poll must be written to the domain's row, or carries nothing the store does not already say. A
 * failed poll always counts (one more failure, its error); a successful one is written when it clears a
 * failure count or an error, when the stored sighting is `refreshMs` old or older (or missing), and on
 * `isForced` (a watch's first round, so `checkNow` and a restarted monitor leave a fresh sighting). Pure.
 */
export function needsPollWrite(
  stored: StoredPollFields,
  poll: { ok: boolean; atMs: number },
  refreshMs: number,
  isForced = false,
): boolean {
  if (isForced || !poll.ok) return true;
  if (stored.consecutiveFailures !== 0 || stored.lastError !== null) return true;
  if (stored.lastSeenAt === null) return true;
  return poll.atMs - Date.parse(stored.lastSeenAt) >= refreshMs;
}

/**
 * Whether a shard's watch should heartbeat Temporal now: when none was sent yet, or the last one is two fifths
 * of the heartbeat timeout old (2 s of 5 s). The watch's own tick (a quarter second) sends it, and no round of
 * polls holds that tick up, so two beats fall in every timeout with more than a second to spare; each beat
 * costs the Temporal server more than the rest of an idle shard (docs/performance.md). Without a timeout (a
 * test environment) every tick heartbeats. Pure.
 */
export function isHeartbeatDue(
  lastAtMs: number | null,
  nowMs: number,
  heartbeatTimeoutMs: number | undefined,
): boolean {
  if (lastAtMs === null || !heartbeatTimeoutMs) return true;
  return nowMs - lastAtMs >= (heartbeatTimeoutMs * 2) / 5;
}

/**
 * What one poll of a round showed of the watcher's sight: `seen` (the supervisor answered, or its host's kernel
 * refused or reset the connection: the host speaks), or `unseen` (it timed out or found no route: silence, which
 * a watcher cut off from every host produces as well as a dead one).
 */
export type PollSight = 'seen' | 'unseen';

/**
 * Whether a fleet's round says the watcher cannot see rather than that its hosts died: two domains or more
 * polled, and not one of them seen. A dying region leaves the domains elsewhere answering; a watcher cut off
 * from the network, or one whose path to every host broke, hears nothing from any. Such a round is held against
 * no host (not recorded) until one is seen again. A real death of every domain of a fleet loses nothing by it:
 * there is no standby to fail over to. Pure.
 */
export const isBlindRound = (sights: readonly PollSight[]): boolean =>
  sights.length >= 2 && sights.every((s) => s === 'unseen');
