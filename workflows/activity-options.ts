import {
  ActivityCancellationType,
  proxyActivities,
  proxyLocalActivities,
  type ActivityOptions,
} from '@temporalio/workflow';
import type { Activities } from '../activities';
import { NON_RETRYABLE_FAILURES } from '../schemas/failures';
import type { FleetPolicy } from '../schemas/policy';
import { pollTimeoutMs } from '../core/poll-verdict';

/**
 * Activity proxies grouped by latency class (STYLE.md). Every timeout lives here; workflows never set
 * one. Step budgets come from the fleet policy, which arrives as workflow input.
 */

/** Temporal durations as strings (STYLE.md): `ms(1500)` is `'1500ms'`. */
const ms = (n: number): string => `${n}ms`;

const retry = {
  initialInterval: '200ms',
  backoffCoefficient: 2,
  maximumInterval: '5s',
  nonRetryableErrorTypes: [...NON_RETRYABLE_FAILURES],
} satisfies ActivityOptions['retry'];

/** How long a lifecycle activity may go without a heartbeat before Temporal retries it elsewhere (a dead worker). */
export function heartbeatTimeoutMs(policy: FleetPolicy, budgetMs: number): number {
  return Math.min(budgetMs, Math.max(5_000, 4 * policy.heartbeatIntervalMs));
}

/** `control`: state-store reads and writes. Short, retried with backoff for a minute (Postgres blips). */
const CONTROL = { startToCloseTimeout: '15s', scheduleToCloseTimeout: '1m', retry } as const;
export const controlActivities = (): Activities => proxyActivities<Activities>(CONTROL);

/**
 * `control` as local activities, run by the workflow's own worker inside its workflow task: the calls a failover
 * waits on first (`beginOperation`, the monitor's `requestPromotion`), without the round trip through the
 * server that a workflow task and an activity task cost (10-15 ms). Same budget and retries as `control`.
 */
export const controlLocalActivities = (): Activities => proxyLocalActivities<Activities>(CONTROL);

/**
 * `bookkeeping`: an operation's own records (steps, outcome, events, the commit re-read). One call is
 * retried for `budgetMs`; the operation runtime then waits and calls again, so a store outage of any
 * length delays an operation and never ends it with compensation or its outcome skipped.
 */
export const bookkeepingActivities = (budgetMs: number): Activities =>
  proxyActivities<Activities>({
    startToCloseTimeout: ms(Math.min(budgetMs, 15_000)),
    scheduleToCloseTimeout: ms(budgetMs),
    retry,
  });

/**
 * `lifecycle`: one activity that waits for an effect on a GPU host, bounded by `budgetMs` (its step
 * budget: transient errors are retried inside it, never past it) and heartbeating.
 */
export function lifecycleActivities(policy: FleetPolicy, budgetMs: number): Activities {
  return proxyActivities<Activities>({
    scheduleToCloseTimeout: ms(budgetMs),
    startToCloseTimeout: ms(budgetMs),
    heartbeatTimeout: ms(heartbeatTimeoutMs(policy, budgetMs)),
    // An abort waits until the activity has stopped, so compensation never races a step still touching the host.
    cancellationType: ActivityCancellationType.WAIT_CANCELLATION_COMPLETED,
    retry,
  });
}

/** Grace added to the drain budget: drainDomain returns by itself at its deadline, after one last look. */
const DRAIN_MARGIN_MS = 10_000;

/** The step activities of promotion and demotion, each with its policy budget. */
export function stepActivities(policy: FleetPolicy) {
  return {
    stopTraining: lifecycleActivities(policy, policy.stopTrainingTimeoutMs).stopTraining,
    verifyGpuReleased: lifecycleActivities(policy, policy.verifyGpuTimeoutMs).verifyGpuReleased,
    wakeModels: lifecycleActivities(policy, policy.wakeTimeoutMs).wakeModels,
    probeModels: lifecycleActivities(policy, policy.probeTimeoutMs).probeModels,
    commitRouting: proxyActivities<Activities>({
      scheduleToCloseTimeout: ms(policy.commitTimeoutMs),
      startToCloseTimeout: ms(Math.min(policy.commitTimeoutMs, 5_000)),
      retry,
    }).commitRouting,
    drainDomain: lifecycleActivities(policy, policy.drainTimeoutMs + DRAIN_MARGIN_MS).drainDomain,
    sleepModels: lifecycleActivities(policy, policy.sleepTimeoutMs).sleepModels,
    startTraining: lifecycleActivities(policy, policy.startTrainingTimeoutMs).startTraining,
    restoreStandby: lifecycleActivities(policy, restoreBudgetMs(policy)).restoreStandby,
    stopActiveTraining: lifecycleActivities(policy, policy.stopTrainingTimeoutMs).stopActiveTraining,
  };
}

/** How long `restoreStandby` waits for its sleeps, then for its training starts, to show on the host. */
export const restoreWaitMs = (policy: FleetPolicy): number =>
  Math.max(1_000, Math.floor(Math.min(policy.sleepTimeoutMs, policy.startTrainingTimeoutMs) / 2));

/** The budget of `restoreStandby`: its requests and its two waits, with room for one retry of a lost answer. */
const restoreBudgetMs = (policy: FleetPolicy): number => policy.sleepTimeoutMs + policy.startTrainingTimeoutMs;

/** The probe request's own timeout: most of the step budget, leaving room for one retry of a transport error. */
export const probeRequestTimeoutMs = (policy: FleetPolicy): number =>
  Math.max(1_000, Math.floor(policy.probeTimeoutMs * 0.8));

/**
 * What the demotion's sleep step needs to fingerprint the models first (docs/architecture.md §4.4). A policy
 * recorded before the fingerprint existed has no `probe.fingerprint`: no fingerprint is taken for it.
 */
export const fingerprintTaking = (policy: FleetPolicy): { maxTokens: number; timeoutMs: number } | undefined =>
  policy.probe.fingerprint
    ? { maxTokens: policy.probe.fingerprint.maxTokens, timeoutMs: probeRequestTimeoutMs(policy) }
    : undefined;

/**
 * `look`: the monitor's own round of polls of its fleet (`lookAtFleet`): the supervisors' poll timeout plus
 * the control class's room for the store, retried for a minute more.
 */
export function lookActivities(policy: FleetPolicy | null): Activities {
  const pollMs = policy ? pollTimeoutMs(policy) : 1_000;
  return proxyActivities<Activities>({
    startToCloseTimeout: ms(pollMs + 15_000),
    scheduleToCloseTimeout: ms(pollMs + 60_000),
    retry,
  });
}

/**
 * How long a watch shard's activity may go without a heartbeat before Temporal hands it to another worker
 * (a dead worker's shard is watched again after this): the per-fleet watch's default.
 */
export const WATCH_SHARD_HEARTBEAT_TIMEOUT_MS = 5_000;

/**
 * How long a watch sent to one worker's own queue may wait to be taken up before it fails and the shard's
 * next watch goes to the deployment's queue: a worker that died holding the shard leaves it unwatched for its
 * heartbeat timeout, a retry's 200 ms and this.
 */
export const HAND_ON_START_TIMEOUT_MS = 2_000;

/**
 * `watch`: a shard's long-running watch (`watchShard`). Lives until its checkpoint, heartbeats (a few times
 * per heartbeat timeout, core/poll-record.ts), is retried without limit, and is waited for when cancelled.
 */
export function watchShardActivities(checkpointMs: number, handedTo?: string): Activities {
  return proxyActivities<Activities>({
    // A watch handed to a worker goes to its own queue, and fails (for the deployment's queue) unless that
    // worker takes it up within HAND_ON_START_TIMEOUT_MS: a worker that died meanwhile never holds it.
    ...(handedTo !== undefined ? { taskQueue: handedTo, scheduleToStartTimeout: ms(HAND_ON_START_TIMEOUT_MS) } : {}),
    startToCloseTimeout: ms(checkpointMs + 60_000),
    heartbeatTimeout: ms(WATCH_SHARD_HEARTBEAT_TIMEOUT_MS),
    cancellationType: ActivityCancellationType.WAIT_CANCELLATION_COMPLETED,
    retry: { ...retry, maximumInterval: '10s' },
  });
}

/** Default limit of `sky launch` / `sky serve up`: machines, images, model weights. */
export const DEFAULT_LAUNCH_TIMEOUT_MS = 45 * 60_000;
/** Default time the launched supervisor gets to answer with every model loaded. */
export const DEFAULT_READY_TIMEOUT_MS = 20 * 60_000;

/** The `sky` CLI's retries: slower than the store's, its commands take seconds to minutes. */
const provisioningRetry = {
  initialInterval: '1s',
  backoffCoefficient: 2,
  maximumInterval: '30s',
  nonRetryableErrorTypes: [...NON_RETRYABLE_FAILURES],
} satisfies ActivityOptions['retry'];

/**
 * `provisioning`: the activities of the provisioning and teardown workflows. A launch runs for up to its
 * limit and heartbeats every few seconds, so a dead worker is noticed in a minute and the launch retried
 * elsewhere (it reuses the cluster). Limits left out take their defaults.
 */
export function provisioningActivities(opts: { launchTimeoutMs?: number; readyTimeoutMs?: number } = {}) {
  const launchTimeoutMs = opts.launchTimeoutMs ?? DEFAULT_LAUNCH_TIMEOUT_MS;
  const readyTimeoutMs = opts.readyTimeoutMs ?? DEFAULT_READY_TIMEOUT_MS;
  return {
    launchDomain: proxyActivities<Activities>({
      // The command's own limit ends it first; the margin lets the activity report why.
      startToCloseTimeout: ms(launchTimeoutMs + 60_000),
      scheduleToCloseTimeout: ms(3 * (launchTimeoutMs + 60_000)),
      heartbeatTimeout: '60s',
      cancellationType: ActivityCancellationType.WAIT_CANCELLATION_COMPLETED,
      retry: { ...provisioningRetry, maximumAttempts: 3 },
    }).launchDomain,
    awaitSupervisor: proxyActivities<Activities>({
      scheduleToCloseTimeout: ms(readyTimeoutMs),
      startToCloseTimeout: ms(readyTimeoutMs),
      heartbeatTimeout: '60s',
      cancellationType: ActivityCancellationType.WAIT_CANCELLATION_COMPLETED,
      retry: provisioningRetry,
    }).awaitSupervisor,
    // One short `sky status --endpoint`; a failing or unreadable answer (SkyCommandFailed) is asked again.
    resolveSupervisorUrl: proxyActivities<Activities>({
      startToCloseTimeout: '3m',
      scheduleToCloseTimeout: '10m',
      retry: provisioningRetry,
    }).resolveSupervisorUrl,
    // `sky down` takes minutes; failures are retried (SkyCommandFailed) within this budget.
    destroyDomain: proxyActivities<Activities>({
      startToCloseTimeout: '15m',
      scheduleToCloseTimeout: '1h',
      heartbeatTimeout: '60s',
      retry: provisioningRetry,
    }).destroyDomain,
  };
}
