import type { SupervisorClientTls } from '../activities/supervisor-tls';
import { type NativeConnection, Worker, type WorkerOptions } from '@temporalio/worker';
import { createActivities } from '../activities';
import type { ActivityDeps } from '../activities/deps';
import type { SupervisorCertificateIssuer } from '../activities/provisioning-certificate';
import { createSupervisorAccess } from '../activities/supervisor-access';
import { createSupervisorClient } from '../activities/supervisor-client';
import type { Store } from '../db/store';
import type { SkyCli } from '../drivers/sky';
import { DEFAULT_MAX_CONCURRENT_ACTIVITIES } from './limits';
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
  /** Activity slots (default DEFAULT_MAX_CONCURRENT_ACTIVITIES); each monitored fleet holds one. */
  maxConcurrentActivities?: number;
  /** Passed through to Worker.create (identity, shutdownGraceTime, ...). */
  workerOptions?: Partial<Omit<WorkerOptions, 'connection' | 'namespace' | 'taskQueue' | 'activities'>>;
}

/**
 * Creates (does not run) a worker for Haru's workflows and activities on `taskQueue`. Activities get a
 * supervisor client that reaches each domain as its layout says (token source, CA, plain-HTTP opt-in) with
 * the fleet-wide token and TLS as defaults, and the given store. Heartbeats reach the server at least
 * every second, so an abort or `checkNow` cancels a waiting activity within about a second.
 */
export async function createHaruWorker(opts: HaruWorkerOptions): Promise<Worker> {
  const access = createSupervisorAccess({
    token: opts.supervisorToken,
    tls: opts.supervisorTls,
    env: opts.env,
    warn: opts.warn,
  });
  const supervisor = createSupervisorClient({ access });
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
  };
  return Worker.create({
    connection: opts.connection,
    namespace: opts.namespace,
    taskQueue: opts.taskQueue,
    ...(opts.workflowBundle
      ? { workflowBundle: opts.workflowBundle }
      : { workflowsPath: require.resolve('../workflows') }),
    activities: createActivities(deps),
    maxHeartbeatThrottleInterval: '1s',
    // Every fleet's monitor holds an activity slot while it watches (watchFleet returns only when a decision
    // is due or at its checkpoint): see workers/limits.ts.
    maxConcurrentActivityTaskExecutions: opts.maxConcurrentActivities ?? DEFAULT_MAX_CONCURRENT_ACTIVITIES,
    // The store's interceptor sits innermost, so metrics count the failure it rethrows.
    interceptors: {
      activity: [...(opts.metrics ? [opts.metrics.activityInterceptor] : []), storeFailureInterceptor],
    },
    ...opts.workerOptions,
  });
}
