import type { SupervisorClientTls } from '../clients/supervisor-tls';
import {
  bundleWorkflowCode,
  type NativeConnection,
  Runtime,
  type State,
  Worker,
  type WorkerOptions,
} from '@temporalio/worker';
import { createActivities } from '../activities';
import type { ActivityDeps } from '../activities/deps';
import type { SupervisorCertificateIssuer } from '../activities/provisioning-certificate';
import { createSupervisorAccess } from '../clients/supervisor-access';
import { createSupervisorClient } from '../activities/supervisor-client';
import { createWatchPeers } from '../activities/watch-peers';
import { DEFAULT_WATCH_SHARDS } from '../core/watch-shard';
import { randomUUID } from 'node:crypto';
import os from 'node:os';
import type { Store } from '../db/store';
import type { SkyCli } from '../drivers/sky';
import { Client } from '@temporalio/client';
import { monitorTaskQueue, type WorkerQueues, workerOwnQueue } from '../core/task-queues';
import { monitorWorkflowId, OBSERVED_SIGNAL, workerWarmUpWorkflowId } from '../core/workflow-ids';
import type { workerWarmUpWorkflow } from '../workflows/warm-up';
import { DEFAULT_MAX_CONCURRENT_ACTIVITIES, DEFAULT_MAX_MONITORS } from './limits';
import { stepBudgetInterceptor } from '../activities/step-budget';
import { storeFailureInterceptor } from './store-failures';
import type { WorkerMetrics } from './metrics';

export interface HaruWorkerOptions {
  /** Connected first (`NativeConnection.connect`): Worker.create leaks its thread pool when it fails to connect. */
  connection: NativeConnection;
  namespace: string;
  taskQueue: string;
  store: Store;
  /** Bearer token of every supervisor whose domain names no token source of its own. */
  supervisorToken?: string;
  /** CA and client certificate for https:// supervisors. */
  supervisorTls?: SupervisorClientTls;
  /** Issues the certificates of `supervisor.issueCertificate` domains at provisioning (the CA's key). */
  supervisorCertificates?: SupervisorCertificateIssuer;
  /** Where a domain's `supervisor.tokenEnv` is looked up (the worker's environment). */
  env?: Readonly<Record<string, string | undefined>>;
  /** Warnings of the supervisor connections (a domain reached over plain HTTP with `insecure: true`). */
  warn?: (message: string, fields: Record<string, unknown>) => void;
  /** A prebuilt bundle; otherwise workflows/ is bundled now (a few seconds). */
  workflowBundle?: { codePath: string } | { code: string };
  now?: () => Date;
  metrics?: WorkerMetrics;
  /** Pause between two status reads while an activity waits for an effect. */
  pollIntervalMs?: number;
  /** How long a started trainer must stay up to count as started. */
  trainingSettleMs?: number;
  /** The `sky` CLI for skypilot/skyserve domains; without it their provisioning fails with ProvisioningUnavailable. */
  sky?: SkyCli;
  /** Activity slots on the operations queue (default DEFAULT_MAX_CONCURRENT_ACTIVITIES): the operations' steps. */
  maxConcurrentActivities?: number;
  /** Activity slots on the monitors' queue (default DEFAULT_MAX_MONITORS): the fleets this worker watches at once. */
  maxMonitors?: number;
  /**
   * Which queues this process serves (default `all`): `operations` or `monitors` alone split the two tiers
   * into processes of their own (HARU_WORKER_QUEUES), so a mass failover's steps never share an event loop
   * with the idle monitoring of hundreds of fleets (docs/architecture.md §4.1).
   */
  queues?: WorkerQueues;
  /**
   * How many watch shards the fleets are dealt over (HARU_MONITOR_SHARDS, default DEFAULT_WATCH_SHARDS): the
   * same on every worker; a shard's watch started for another count ends at once here.
   */
  watchShards?: number;
  /** Passed through to Worker.create (identity, shutdownGraceTime, ...). */
  workerOptions?: Partial<Omit<WorkerOptions, 'connection' | 'namespace' | 'taskQueue' | 'activities'>>;
}

/**
 * Haru's worker: one SDK worker on the operations queue (`taskQueue`) and one on the monitors' queue beside
 * it (core/task-queues.ts), in one process, with the same workflows and activities; or only one of them
 * (`queues`). Each has its own pollers, task slots, sticky cache and workflow thread, so the monitors' tasks
 * never stand in line before an operation's (docs/architecture.md §4.1).
 */
export interface HaruWorker {
  /**
   * The SDK workers it runs: operations first, then monitors (either may be left out by `queues`), then, with
   * the monitors, the activity worker of this process's own queue (`workerOwnQueue`).
   */
  workers: readonly Worker[];
  /** The task queues they poll, in the same order. */
  taskQueues: readonly string[];
  /** Runs them; settles when all stopped, rejecting with the first fatal error (the others are shut down then). */
  run(): Promise<void>;
  /** Starts a graceful shutdown of all. */
  shutdown(): void;
  /** RUNNING while all run; otherwise the state of the first that does not. */
  getState(): State;
}

/**
 * Creates (does not run) a worker for Haru's workflows and activities on the operations queue `taskQueue` and
 * the monitors' queue beside it (`HaruWorker`). Activities get a
 * supervisor client that reaches each domain as its layout says (token source, CA, plain-HTTP opt-in) with
 * the fleet-wide token and TLS as defaults, and the given store. Heartbeats reach the server at least
 * every second, so an abort or `checkNow` cancels a waiting activity within about a second.
 */
export async function createHaruWorker(opts: HaruWorkerOptions): Promise<HaruWorker> {
  const access = createSupervisorAccess({
    token: opts.supervisorToken,
    tls: opts.supervisorTls,
    env: opts.env,
    warn: opts.warn,
  });
  const supervisor = createSupervisorClient({ access });
  // The watch shards signal the fleets' monitors from their activity, over the worker's own connection.
  const client = new Client({ connection: opts.connection, namespace: opts.namespace });
  const deps: ActivityDeps = {
    store: opts.store,
    supervisor,
    now: opts.now ?? (() => new Date()),
    metrics: opts.metrics,
    pollIntervalMs: opts.pollIntervalMs,
    trainingSettleMs: opts.trainingSettleMs,
    sky: opts.sky,
    supervisorAccess: access,
    supervisorCertificates: opts.supervisorCertificates,
    watchShards: opts.watchShards,
    observeFleet: (fleetId, observation) =>
      client.workflow.getHandle(monitorWorkflowId(fleetId)).signal(OBSERVED_SIGNAL, observation),
  };
  const queues = opts.queues ?? 'all';
  // The workers holding watch shards know of each other through the store, so that each holds its share; a
  // shard handed on to this worker comes on a queue only it polls.
  const workerId = `${os.hostname()}:${process.pid}:${randomUUID().slice(0, 8)}`;
  const ownQueue = queues === 'operations' ? null : workerOwnQueue(opts.taskQueue, workerId);
  const peers =
    ownQueue === null
      ? null
      : createWatchPeers({
          store: opts.store,
          id: workerId,
          ownQueue,
          taskQueue: opts.taskQueue,
          shards: opts.watchShards ?? DEFAULT_WATCH_SHARDS,
          onError: (err) =>
            opts.warn?.('watch peers: the store did not take this worker’s beat', {
              error: err instanceof Error ? err.message : String(err),
            }),
        });
  if (peers) deps.watchPeers = peers;
  const activities = createActivities(deps);
  if (opts.metrics) await knowSeries(opts.metrics, opts.store, Object.keys(activities), opts.warn);
  // Bundled once for both SDK workers (each would bundle workflows/ again: seconds of CPU at every start).
  const workflowBundle =
    opts.workflowBundle ??
    (await bundleWorkflowCode({ workflowsPath: require.resolve('../workflows'), logger: Runtime.instance().logger }));
  const create = (taskQueue: string, maxActivities: number, withWorkflows = true) =>
    Worker.create({
      connection: opts.connection,
      namespace: opts.namespace,
      taskQueue,
      ...(withWorkflows ? { workflowBundle } : {}),
      activities,
      maxHeartbeatThrottleInterval: '1s',
      maxConcurrentActivityTaskExecutions: maxActivities,
      // The store's interceptor sits innermost, so metrics count the failure it rethrows; an attempt past its
      // step budget waits for Temporal's timeout inside the metrics' count (activities/step-budget.ts).
      interceptors: {
        activity: [
          ...(opts.metrics ? [opts.metrics.activityInterceptor] : []),
          stepBudgetInterceptor,
          storeFailureInterceptor,
        ],
      },
      ...opts.workerOptions,
    });
  const tiers: { taskQueue: string; slots: number }[] = [];
  if (queues !== 'monitors')
    tiers.push({ taskQueue: opts.taskQueue, slots: opts.maxConcurrentActivities ?? DEFAULT_MAX_CONCURRENT_ACTIVITIES });
  // Every monitored fleet holds one of these slots while its watch runs (see workers/limits.ts).
  if (queues !== 'operations')
    tiers.push({ taskQueue: monitorTaskQueue(opts.taskQueue), slots: opts.maxMonitors ?? DEFAULT_MAX_MONITORS });
  const workers: Worker[] = [];
  for (const tier of tiers) workers.push(await create(tier.taskQueue, tier.slots));
  // Activities only: the watches of shards handed on to this worker.
  if (ownQueue !== null) workers.push(await create(ownQueue, opts.maxMonitors ?? DEFAULT_MAX_MONITORS, false));
  const warmUp = queues === 'monitors' ? null : () => warmUpOperations(client, opts.taskQueue, workerId, opts.warn);
  return composeWorkers(workers, peers, warmUp);
}

/** How long a warm-up waits for a worker of its queue; one not picked up by then was never needed. */
const WARM_UP_TIMEOUT = '1 minute';

/**
 * Runs one empty workflow on the operations queue as this worker starts. An SDK worker's first workflow task
 * costs about 30 ms more than later ones (its workflow thread compiles the workflow code and builds its
 * converters on first use, docs/performance.md), and on the operations queue that first task would be the
 * first promotion's: a failover, the one moment it matters. With several workers on the queue the task
 * goes to whichever polls first. Never fails the worker: a warm-up that does not finish is logged.
 */
async function warmUpOperations(
  client: Client,
  taskQueue: string,
  workerId: string,
  warn: HaruWorkerOptions['warn'],
): Promise<void> {
  try {
    await client.workflow.execute<typeof workerWarmUpWorkflow>('workerWarmUpWorkflow', {
      taskQueue,
      workflowId: workerWarmUpWorkflowId(workerId),
      workflowExecutionTimeout: WARM_UP_TIMEOUT,
      staticSummary: `worker ${workerId} warming up its operations queue`,
    });
  } catch (err) {
    warn?.('worker warm-up did not finish; the first promotion pays for it', {
      error: err instanceof Error ? err.message : String(err),
    });
  }
}

/**
 * Writes the counters an alert or a dashboard panel reads at 0 before anything counts (workers/metrics.ts): for
 * each activity type, and for each fleet in the store now. The keeper loop adds the fleets created later. A
 * store that does not answer leaves the fleets to the keeper's first round.
 */
async function knowSeries(
  metrics: WorkerMetrics,
  store: Store,
  activityTypes: readonly string[],
  warn: HaruWorkerOptions['warn'],
): Promise<void> {
  metrics.knowActivityTypes(activityTypes);
  try {
    metrics.knowFleets(await store.fleets.list());
  } catch (err) {
    warn?.('metrics: the fleets were not read; their counters start at the keeper’s first round', {
      error: err instanceof Error ? err.message : String(err),
    });
  }
}

/** The SDK workers as one; `peers` beat while they run. */
function composeWorkers(
  all: readonly Worker[],
  peers: { start(): void; stop(): Promise<void> } | null,
  warmUp: (() => Promise<void>) | null,
): HaruWorker {
  const shutdown = () => {
    for (const w of all) if (w.getState() === 'RUNNING') w.shutdown();
  };
  return {
    workers: all,
    taskQueues: all.map((w) => w.options.taskQueue),
    async run() {
      peers?.start();
      const runs = all.map((w) =>
        w.run().catch((err: unknown) => {
          shutdown();
          throw err;
        }),
      );
      void warmUp?.();
      const settled = await Promise.allSettled(runs);
      await peers?.stop();
      const failed = settled.find((r): r is PromiseRejectedResult => r.status === 'rejected');
      if (failed) throw failed.reason;
    },
    shutdown,
    getState: () => all.map((w) => w.getState()).find((state) => state !== 'RUNNING') ?? 'RUNNING',
  };
}
