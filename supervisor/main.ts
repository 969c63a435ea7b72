/**
 * The supervisor's composition root: reads the environment, builds the parts, listens, and on SIGTERM/SIGINT
 * stops every training run within the shutdown grace before exiting. Run it as `haru supervisor` or
 * `node -r tsx/cjs supervisor/main.ts`.
 */
import { listenerLimits } from '../lib/listener-limits';
import { readFileSync } from 'node:fs';
import http, { type Server } from 'node:http';
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import { ConfigError } from '../schemas/env';
import { createApp } from './app';
import {
  apiKeyEnvNames,
  supervisorConfigOf,
  loadSupervisorEnv,
  migSlotsOf,
  resolveListenHost,
  resolveVllmApiKeys,
} from './config';
import { createGpuReader, execFileTool } from './gpu';
import { createJsonLogger, type Logger } from '../lib/logger';
import { readOwnerOnlyFile } from '../lib/secret-file';
import { createListenerTable } from './listeners';
import { createSupervisorMetrics } from './metrics';
import { detectTracking, type TrainingTracking, trainingRefusal } from './cgroup';
import { createProcessTable } from './process-group';
import { createObservedInference } from './status-view';
import { ownCapabilities, resolveRunAs } from './run-as';
import { loadSupervisorTls, requireClientCertificate } from './tls';
import { createTrainingManager, type TrainingManager } from './training';
import { createVllmClient } from './vllm';

/** Default SIGTERM-to-SIGKILL grace of `POST /v1/training/stop` without `graceMs`. */
export const DEFAULT_STOP_GRACE_MS = 30_000;

export interface RunningSupervisor {
  server: Server;
  host: string;
  port: number;
  training: TrainingManager;
  logger: Logger;
  /** Stops every training run (grace from the env unless given), then closes the listener. */
  shutdown(graceMs?: number): Promise<void>;
}

/**
 * Builds and starts a supervisor from `env`. Throws ConfigError (every problem listed) for a bad environment
 * or config. Without HARU_SUPERVISOR_TOKEN it warns loudly and listens on 127.0.0.1 only.
 */
export async function startSupervisor(
  env: NodeJS.ProcessEnv,
  opts: {
    write?: (line: string) => void;
    /** Where the unauthenticated-mode banner goes (stderr by default). */
    warn?: (line: string) => void;
    trainingOutput?: 'inherit' | 'ignore';
    cwd?: string;
    /** How training runs are tracked, instead of what this host allows (detectTracking): tests. */
    tracking?: TrainingTracking;
  } = {},
): Promise<RunningSupervisor> {
  const settings = loadSupervisorEnv(env);
  const config = supervisorConfigOf(settings, (file) => readFileSync(file, 'utf8'));
  const host = resolveListenHost(settings);
  const tls = loadSupervisorTls(settings);
  const now = () => new Date();
  const logger = createJsonLogger({
    write: opts.write ?? ((line) => process.stdout.write(line)),
    level: settings.LOG_LEVEL,
    base: { component: 'supervisor' },
  });
  const token = settings.HARU_SUPERVISOR_TOKEN ?? null;
  if (!token) {
    logger.warn('HARU_SUPERVISOR_TOKEN is not set: the supervisor API is unauthenticated, loopback only', { host });
    (opts.warn ?? ((line) => process.stderr.write(line)))(
      `\n*** WARNING: HARU_SUPERVISOR_TOKEN is not set. The supervisor API is UNAUTHENTICATED and listens on ${host} only. ***\n\n`,
    );
  }
  const migSlots = migSlotsOf(config);
  if (migSlots.length && settings.HARU_GPU_VENDOR !== 'nvidia') {
    throw new ConfigError(`${migSlots[0]!.field}: MIG is NVIDIA's; HARU_GPU_VENDOR is ${settings.HARU_GPU_VENDOR}`);
  }
  const gpu = createGpuReader({
    vendor: settings.HARU_GPU_VENDOR,
    exec: execFileTool,
    binary: settings.HARU_GPU_SMI,
    mig: migSlots,
    hostProc: settings.HARU_HOST_PROC,
  });
  await gpu.checkConfig();
  const vllm = createVllmClient({
    wakeTimeoutMs: settings.HARU_VLLM_WAKE_TIMEOUT_MS,
    // A key file group or others may read is refused, as every secret file is (lib/secret-file.ts).
    apiKeys: resolveVllmApiKeys(config, env, (file) => readOwnerOnlyFile(file, 'apiKey').toString('utf8')),
  });
  const trainingEnv = { ...env };
  for (const name of apiKeyEnvNames(config)) delete trainingEnv[name];
  const uid = process.getuid?.() ?? null;
  const capabilities = ownCapabilities();
  const runAs = resolveRunAs(config, { uid, capabilities });
  const tracking = opts.tracking ?? detectTracking();
  const refusal = config.training.length
    ? trainingRefusal(tracking, settings.HARU_TRAINING_ALLOW_PGROUP === '1')
    : null;
  if (refusal) {
    logger.error('training refused: no cgroup tracking', { reason: refusal });
  } else if (tracking.kind === 'process-group' && config.training.length) {
    logger.warn('training tracked by process group only: a trainer that leaves its group is not found', {
      reason: tracking.reason,
    });
  }
  const training = createTrainingManager({
    tracking,
    refusal,
    runAs,
    dropCapabilities: uid !== 0 && capabilities.size > 0,
    slots: config.training,
    baseEnv: trainingEnv,
    cwd: opts.cwd ?? process.cwd(),
    processTable: createProcessTable(),
    now,
    logger,
    output: opts.trainingOutput ?? 'inherit',
    onExit: (gpuIndex, exit) => {
      metrics.trainingExits.inc({ gpu: String(gpuIndex), how: exit.signal ?? `code ${exit.code ?? 'unknown'}` });
      // A promotion's release step reads the GPUs right after a trainer's end (`since`): the run starts now,
      // not once that request arrives. A failure here is the request's to report.
      gpu.read().catch(() => undefined);
    },
  });
  const listeners = createListenerTable();
  const { inference, statusView } = createObservedInference({
    config,
    vllm,
    logger,
    listeners,
    now,
    wedgeMs: settings.HARU_VLLM_WEDGE_MS,
  });
  statusView.start();
  const metrics = createSupervisorMetrics({ trainingStatus: () => training.status(), defaults: true });
  const app = createApp({
    token,
    previousTokens: token && settings.HARU_SUPERVISOR_TOKEN_PREVIOUS ? [settings.HARU_SUPERVISOR_TOKEN_PREVIOUS] : [],
    inference,
    training,
    gpu,
    config,
    listeners,
    vllm,
    statusView,
    metrics,
    logger,
    now,
    defaultStopGraceMs: DEFAULT_STOP_GRACE_MS,
  });
  const server: Server = tls
    ? https.createServer({ ...listenerLimits(), ...tls }, tls.requestCert ? requireClientCertificate(app) : app)
    : http.createServer(listenerLimits(), app);
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(settings.PORT, host, () => resolve());
  });
  const port = (server.address() as AddressInfo).port;
  logger.info('supervisor listening', {
    host,
    port,
    tls: tls ? (tls.requestCert ? 'mtls' : 'tls') : 'off',
    models: config.inference.flatMap((s) => s.models.map((m) => m.name)),
    trainingGpus: config.training.map((s) => s.gpuIndex),
  });
  return {
    server,
    host,
    port,
    training,
    logger,
    async shutdown(graceMs = settings.HARU_SHUTDOWN_GRACE_MS) {
      statusView.stop();
      await training.stopAll(graceMs);
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      server.closeAllConnections();
      await closed;
    },
  };
}

/** Runs the supervisor until SIGTERM/SIGINT; a second signal forces the exit without waiting for the grace. */
export async function runSupervisor(env: NodeJS.ProcessEnv): Promise<void> {
  const supervisor = await startSupervisor(env);
  let stopping = false;
  const onSignal = (signal: NodeJS.Signals) => {
    if (stopping) {
      supervisor.logger.warn('second signal: stopping training runs now', { signal });
      void supervisor.training.stopAll(0).then(() => process.exit(1));
      return;
    }
    stopping = true;
    supervisor.logger.info('supervisor stopping', { signal });
    supervisor.shutdown().then(
      () => process.exit(0),
      (err: Error) => {
        supervisor.logger.error('shutdown failed', { error: err.message });
        process.exit(1);
      },
    );
  };
  process.on('SIGTERM', onSignal);
  process.on('SIGINT', onSignal);
}

if (require.main === module) {
  runSupervisor(process.env).catch((err: Error) => {
    process.stderr.write(`haru supervisor: ${err instanceof ConfigError ? err.message : (err.stack ?? err.message)}\n`);
    process.exit(err instanceof ConfigError ? 2 : 1);
  });
}
