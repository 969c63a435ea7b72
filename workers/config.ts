import { z } from 'zod';
import { resolveTemporalSettings, type TemporalSettings, temporalEnvShape } from '../temporal/config';
import { loadSupervisorClientTls, supervisorClientEnvShape, type SupervisorClientTls } from '../clients/supervisor-tls';
import {
  loadSupervisorCertificateIssuer,
  supervisorCaEnvShape,
  type SupervisorCertificateIssuer,
} from '../activities/provisioning-certificate';
import { postgresTlsEnvShape } from '../db/postgres-tls';
import { secretFromEnv } from '../lib/secret-file';
import { blankable, ConfigError, parseEnv, portSchema } from '../schemas/env';
import { WORKER_QUEUES } from '../core/task-queues';
import { DEFAULT_WATCH_SHARDS, MAX_WATCH_SHARDS } from '../core/watch-shard';
import { DEFAULT_MAX_CONCURRENT_ACTIVITIES, DEFAULT_MAX_MONITORS, DEFAULT_MONITOR_KEEP_INTERVAL_MS } from './limits';

/**
 * The worker's environment, parsed once at boot (`loadWorkerConfig`); a blank variable counts as unset.
 */
export const workerConfigSchema = z.object({
  /** TEMPORAL_ADDRESS, TEMPORAL_NAMESPACE, TEMPORAL_API_KEY, TEMPORAL_TLS_*, TEMPORAL_PROFILE, TEMPORAL_CONFIG_FILE. */
  ...temporalEnvShape,
  /** The operations' task queue; the monitors run on `<HARU_TASK_QUEUE>-monitors` beside it, and the worker polls both (unless HARU_WORKER_QUEUES names one). */
  HARU_TASK_QUEUE: blankable(z.string().min(1).default('haru')),
  /** Shared Postgres (`postgres://…`); unset means the embedded PGlite under HARU_STATE_DIR (single process only). */
  DATABASE_URL: blankable(z.url({ protocol: /^postgres(ql)?$/ }).optional()),
  HARU_STATE_DIR: blankable(z.string().min(1).default('.haru')),
  /** libpq's PGSSLROOTCERT, PGSSLCERT, PGSSLKEY for a DATABASE_URL with sslmode. */
  ...postgresTlsEnvShape,
  /** HARU_SUPERVISOR_TOKEN, HARU_SUPERVISOR_CA_FILE, HARU_SUPERVISOR_CLIENT_CERT_FILE/KEY_FILE. */
  ...supervisorClientEnvShape,
  /** HARU_SUPERVISOR_CA_KEY_FILE, HARU_SUPERVISOR_CERT_VALIDITY_DAYS: issuing supervisor certificates. */
  ...supervisorCaEnvShape,
  /** Prometheus metrics (`GET /metrics`); 0 picks a free port. */
  HARU_WORKER_METRICS_PORT: blankable(portSchema.default(9464)),
  HARU_WORKER_METRICS_HOST: blankable(z.string().min(1).default('0.0.0.0')),
  /** The Temporal SDK runtime's own Prometheus endpoint (`temporal_*` worker metrics) on HARU_WORKER_METRICS_HOST; 0 turns it off. */
  HARU_WORKER_SDK_METRICS_PORT: blankable(portSchema.default(9465)),
  /** A prebuilt workflow bundle (from `bundleWorkflowCode`); unset bundles workflows/ at start (a few seconds). */
  HARU_WORKFLOW_BUNDLE: blankable(z.string().min(1).optional()),
  /** The SkyPilot CLI used to provision skypilot/skyserve domains (a name on PATH or a path). */
  HARU_SKY_BIN: blankable(z.string().min(1).default('sky')),
  /** Activity slots of this worker on the operations queue: the steps of the operations it runs at once. */
  HARU_WORKER_MAX_ACTIVITIES: blankable(z.coerce.number().int().min(10).default(DEFAULT_MAX_CONCURRENT_ACTIVITIES)),
  /** Activity slots on the monitors' queue: how many fleets this worker watches at once (one slot per watch). */
  HARU_WORKER_MAX_MONITORS: blankable(z.coerce.number().int().min(2).default(DEFAULT_MAX_MONITORS)),
  /**
   * Which queues this process serves: `all` (default), or `operations` / `monitors` alone, to run the two
   * tiers as separate processes (a monitor tier sized by fleets, an operations tier that a mass failover
   * never finds busy with idle polls).
   */
  HARU_WORKER_QUEUES: blankable(z.enum(WORKER_QUEUES).default('all')),
  /**
   * How many watch shards the fleets are dealt over (core/watch-shard.ts): each shard is one long-running
   * activity that polls its fleets, on whichever worker holds it. The same on every worker of a deployment.
   */
  HARU_MONITOR_SHARDS: blankable(z.coerce.number().int().min(1).max(MAX_WATCH_SHARDS).default(DEFAULT_WATCH_SHARDS)),
  /** How often the worker ensures a monitor per fleet and ends operations whose workflow closed (`keepMonitors`). */
  HARU_MONITOR_KEEP_INTERVAL_MS: blankable(z.coerce.number().int().min(100).default(DEFAULT_MONITOR_KEEP_INTERVAL_MS)),
  LOG_LEVEL: blankable(z.enum(['debug', 'info', 'warn', 'error']).default('info')),
});
/** The worker's settings; the Temporal ones resolved with the profile file (`temporal`). */
export type WorkerConfig = Omit<z.infer<typeof workerConfigSchema>, keyof typeof temporalEnvShape> & {
  temporal: TemporalSettings;
  /** Read from HARU_SUPERVISOR_CA_FILE and the client certificate files; undefined when none is set. */
  supervisorTls?: SupervisorClientTls;
  /** The supervisor CA with its key (HARU_SUPERVISOR_CA_KEY_FILE); undefined when the key is not set. */
  supervisorCertificates?: SupervisorCertificateIssuer;
};

/**
 * Parses the worker environment; throws ConfigError naming every bad variable or Temporal setting.
 * HARU_SUPERVISOR_TOKEN comes back read from HARU_SUPERVISOR_TOKEN_FILE when that is the one set.
 */
export function loadWorkerConfig(env: NodeJS.ProcessEnv): WorkerConfig {
  const parsed = parseEnv(workerConfigSchema, env, 'worker');
  return {
    ...parsed,
    HARU_SUPERVISOR_TOKEN: secretFromEnv(parsed, 'HARU_SUPERVISOR_TOKEN', { fail: (m) => new ConfigError(m) }),
    temporal: resolveTemporalSettings(env),
    supervisorTls: loadSupervisorClientTls(parsed),
    supervisorCertificates: loadSupervisorCertificateIssuer(parsed),
  };
}
