import type { FleetPolicy } from '../schemas/policy';
import type { SupervisorStatus } from '../schemas/supervisor';

/** How one supervisor status poll ended: the status it answered, or why it did not. */
export type PollOutcome =
  | { kind: 'answered'; status: SupervisorStatus }
  | { kind: 'timeout'; error: string }
  | { kind: 'unreachable'; error: string };

/** Everything the monitor knows about one domain at one poll. */
export interface PollEvidence {
  outcome: PollOutcome;
  /** The models the layout places on this domain. */
  models: readonly string[];
  /**
   * When this worker last heard that the proxy relayed a successful answer from this domain (ms, this worker's
   * clock); null when it has not.
   */
  lastServedAnswerAtMs: number | null;
  /** When the poll started (ms). */
  polledAtMs: number;
  /** The longest stall of the watcher's own event loop while the poll was under way (ms; 0 when none). */
  watcherLagMs?: number;
  /** How long the poll's answer was waited for (`answerWaitMs`); `pollTimeoutMs` when absent. */
  waitedMs?: number;
}

/** What decided a verdict. */
export type PollEvidenceKind =
  | 'status'
  | 'served_answer'
  | 'watcher_lag'
  | 'process_gone'
  | 'frozen'
  | 'engine_stuck'
  | 'supervisor_timeout'
  | 'supervisor_unreachable';

export interface PollVerdict {
  /**
   * Counts as a failed poll (towards `failureThreshold`; it does not renew the heartbeat). A `watcher_lag`
   * verdict is neither failed nor a sighting: the poll is not recorded at all.
   */
  isFailed: boolean;
  evidence: PollEvidenceKind;
  /** Models whose admin endpoints are slow: alive, their state as last confirmed. */
  busyModels: string[];
  /** One line for the domain's `lastError` and events; null when the poll did not fail. */
  message: string | null;
}

/**
 * How much of a poll's wait the watcher's own event loop may have stalled before a timeout says nothing about
 * the host: a quarter. Past it, the answer may have sat unread in the socket while the deadline's timer, which
 * libuv runs first after a stall, fired.
 */
export const WATCHER_LAG_SHARE = 0.25;

/**
 * How long a supervisor status request may run: twice the poll interval, at least 1 s, at most the stale limit
 * (a round waits for it only `answerWaitMs`; a later answer is heard by the next round). The supervisor answers from its background view, so this bounds the host and the network,
 * never vLLM.
 */
export const pollTimeoutMs = (policy: Pick<FleetPolicy, 'heartbeatIntervalMs' | 'heartbeatStaleMs'>): number =>
  Math.min(Math.max(policy.heartbeatIntervalMs * 2, 1_000), policy.heartbeatStaleMs);

/**
 * The least a round waits for a domain's answer before its interval counts as silent: a supervisor a region away
 * answers a status read over a kept-alive connection in well under this.
 */
export const ANSWER_WAIT_FLOOR_MS = 200;
/** How many times its slowest recent answer a domain is waited for: a host that always answers slowly is not silent. */
export const ANSWER_WAIT_FACTOR = 3;

/**
 * How long a round waits for one domain's status before that interval counts as silent (docs/architecture.md
 * §9.2): ANSWER_WAIT_FACTOR times the slowest of its recent answers (`recentAnswerMs`, this worker's own
 * measurements), at least ANSWER_WAIT_FLOOR_MS, at most the poll interval. The request itself runs on to
 * `pollTimeoutMs`: an answer that comes later is still heard, and clears the silence at the next round. So a
 * host is failed on silence once `failureThreshold` consecutive polls went unanswered in their interval: within
 * `heartbeatIntervalMs` × `failureThreshold` + this wait of its last answer. Pure.
 */
export function answerWaitMs(
  policy: Pick<FleetPolicy, 'heartbeatIntervalMs'>,
  recentAnswerMs: readonly number[],
): number {
  // Nothing measured yet (this worker's first polls of it: a start, a shard handed on): a whole interval, so a
  // host a region away on a fresh TLS connection is not silent at its first poll.
  if (recentAnswerMs.length === 0) return policy.heartbeatIntervalMs;
  const slowest = Math.max(...recentAnswerMs);
  return Math.min(policy.heartbeatIntervalMs, Math.max(ANSWER_WAIT_FLOOR_MS, Math.ceil(slowest * ANSWER_WAIT_FACTOR)));
}

/**
 * Whether one poll counts as failed, and on what evidence (docs/architecture.md §9.2). Pure.
 * - The supervisor answered: the poll fails only on proof that a model cannot serve: every process serving
 *   it is stopped (`frozen`, SIGSTOP) or none is left and its port refuses (`gone`). A model whose admin
 *   endpoints are slow or timed out is `busy`: alive, never a failed poll, traffic or not. A supervisor that
 *   sends no `condition` (older than the status view) is read as before: an answer is a success.
 * - The supervisor did not answer in its wait while the watcher's own event loop stalled for a quarter of it or more
 *   (`watcher_lag`): the watcher could not see, so the poll counts neither way. A refused or reset connection
 *   is the host's answer, whatever the watcher's lag.
 * - The supervisor did not answer (refused, reset, timed out): the poll fails unless the proxy relayed a
 *   successful answer from the domain while the poll waited: users are being served, so the host is alive and
 *   only its supervisor or the path to it is slow. An answer relayed before the poll was sent is a sighting, not
 *   a pass: the failed poll counts, from that sighting on (the poll round hands it to the store as the domain's
 *   `lastSeenAt`, and the store counts the failed polls since the domain was last heard). So a host that went
 *   dark under traffic is failed as fast as an idle one, and traffic keeps a host whose supervisor alone is
 *   silent alive while answers come more often than the threshold's failed polls do.
 */
export function judgePoll(
  evidence: PollEvidence,
  policy: Pick<FleetPolicy, 'heartbeatIntervalMs' | 'heartbeatStaleMs'>,
): PollVerdict {
  const { outcome } = evidence;
  if (outcome.kind === 'answered') {
    const mine = outcome.status.models.filter((m) => evidence.models.includes(m.name));
    const frozen = mine.filter((m) => m.condition === 'frozen');
    const gone = mine.filter((m) => m.condition === 'gone');
    const busyModels = mine.filter((m) => m.condition === 'busy').map((m) => m.name);
    if (frozen.length > 0) {
      const pids = frozen.flatMap((m) => m.processes?.stoppedPids ?? []);
      return failed('frozen', `${names(frozen)}: every process stopped (pids ${pids.join(', ')})`, busyModels);
    }
    if (gone.length > 0) {
      return failed(
        'process_gone',
        `${names(gone)}: no process serves the port and it refuses connections`,
        busyModels,
      );
    }
    // Awake, and its engine does not serve inference (supervisor/engine-progress.ts): as certain as frozen.
    const stuck = mine.filter((m) => m.condition === 'wedged' || m.condition === 'erroring');
    if (stuck.length > 0) {
      return failed(
        'engine_stuck',
        `${names(stuck)}: ${stuck.map((m) => m.error ?? m.condition).join('; ')}`,
        busyModels,
      );
    }
    return { isFailed: false, evidence: 'status', busyModels, message: null };
  }
  const waitedMs = evidence.waitedMs ?? pollTimeoutMs(policy);
  if (outcome.kind === 'timeout' && (evidence.watcherLagMs ?? 0) >= waitedMs * WATCHER_LAG_SHARE) {
    return { isFailed: false, evidence: 'watcher_lag', busyModels: [], message: null };
  }
  if (evidence.lastServedAnswerAtMs !== null && evidence.lastServedAnswerAtMs >= evidence.polledAtMs) {
    return { isFailed: false, evidence: 'served_answer', busyModels: [], message: null };
  }
  return outcome.kind === 'timeout'
    ? failed('supervisor_timeout', outcome.error, [])
    : failed('supervisor_unreachable', outcome.error, []);
}

const names = (models: { name: string }[]) =>
  models.length === 1 ? `model ${models[0]!.name}` : `models ${models.map((m) => m.name).join(', ')}`;

const failed = (evidence: PollEvidenceKind, message: string, busyModels: string[]): PollVerdict => ({
  isFailed: true,
  evidence,
  busyModels,
  message,
});
