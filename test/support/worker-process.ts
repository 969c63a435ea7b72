import { type ChildProcess, spawn } from 'node:child_process';
import { closeSync, mkdtempSync, openSync, readFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parsePrometheusText, sumSamples } from '../../supervisor/prometheus-text';
import { workflowBundle } from '../workflows/support/bundle';

const REPO_ROOT = path.resolve(__dirname, '..', '..');

export interface WorkerExit {
  code: number | null;
  signal: NodeJS.Signals | null;
}

/** `haru worker` running as a child process: the production entry point, so SIGKILL is a real crash. */
export interface WorkerProcess {
  child: ChildProcess;
  pid: number;
  /** Where its stdout and stderr go (its JSON log lines). */
  logFile: string;
  /** The `worker running` line (taskQueue, monitors, metricsUrl, ...). */
  ready: Record<string, unknown>;
  /** Resolves with the exit code or signal once the process has exited. */
  exited: Promise<WorkerExit>;
  /** SIGKILL, like a host losing power; resolves once the process is gone. */
  kill(): Promise<WorkerExit>;
  /** SIGTERM (graceful drain), SIGKILL after `graceMs`; resolves once the process is gone. */
  stop(graceMs?: number): Promise<WorkerExit>;
}

export interface WorkerProcessOptions {
  databaseUrl: string;
  taskQueue: string;
  /** Default: the test run's dev server (TEMPORAL_TEST_ADDRESS). */
  temporalAddress?: string;
  /** Output is appended here; default: a fresh file under the OS temp dir. */
  logFile?: string;
  /** Give up when the worker does not report `worker running` within this. Default 90 s. */
  startTimeoutMs?: number;
  /** More environment (TEMPORAL_TLS_*, a short HARU_MONITOR_KEEP_INTERVAL_MS, …), over the defaults above. */
  env?: NodeJS.ProcessEnv;
}

const hasExited = (child: ChildProcess) => child.exitCode !== null || child.signalCode !== null;

/** The JSON lines of a log file from `from` on (other output is skipped). */
function logLines(file: string, from = 0): Record<string, unknown>[] {
  return readFileSync(file, 'utf8')
    .slice(from)
    .split('\n')
    .flatMap((text) => {
      try {
        return [JSON.parse(text) as Record<string, unknown>];
      } catch {
        return [];
      }
    });
}

/**
 * Starts `node bin/haru.js worker` with the run's prebuilt workflow bundle and resolves once it logs
 * `worker running` (it polls and has ensured a monitor per fleet). Rejects with the log tail when the
 * process exits first or stays silent past the start timeout (the process is killed then).
 */
export async function startWorkerProcess(opts: WorkerProcessOptions): Promise<WorkerProcess> {
  const logFile = opts.logFile ?? path.join(mkdtempSync(path.join(os.tmpdir(), 'haru-worker-')), 'worker.log');
  const fd = openSync(logFile, 'a');
  const startedAt = readFileSync(logFile, 'utf8').length;
  let child: ChildProcess;
  try {
    child = spawn(process.execPath, [path.join(REPO_ROOT, 'bin/haru.js'), 'worker'], {
      cwd: REPO_ROOT,
      stdio: ['ignore', fd, fd],
      env: {
        ...process.env,
        DATABASE_URL: opts.databaseUrl,
        TEMPORAL_ADDRESS: opts.temporalAddress ?? process.env.TEMPORAL_TEST_ADDRESS,
        TEMPORAL_NAMESPACE: 'default',
        HARU_TASK_QUEUE: opts.taskQueue,
        HARU_WORKFLOW_BUNDLE: workflowBundle().codePath,
        HARU_WORKER_METRICS_PORT: '0',
        HARU_WORKER_SDK_METRICS_PORT: '0', // off: several workers share this machine
        HARU_WORKER_METRICS_HOST: '127.0.0.1',
        LOG_LEVEL: 'info',
        ...opts.env,
      },
    });
  } finally {
    closeSync(fd);
  }
  let spawnError: Error | null = null;
  const exited = new Promise<WorkerExit>((resolve) => {
    child.once('exit', (code, signal) => resolve({ code, signal }));
    child.once('error', (err) => {
      spawnError = err;
      resolve({ code: null, signal: null });
    });
  });
  const tail = () => readFileSync(logFile, 'utf8').slice(-3_000);
  const kill = async () => {
    if (!hasExited(child)) child.kill('SIGKILL');
    return exited;
  };
  const timeoutMs = opts.startTimeoutMs ?? 90_000;
  const deadline = Date.now() + timeoutMs;
  let ready: Record<string, unknown> | undefined;
  while (!(ready = logLines(logFile, startedAt).find((line) => line.msg === 'worker running'))) {
    if (spawnError) throw new Error(`haru worker could not be started: ${(spawnError as Error).message}`);
    if (hasExited(child)) throw new Error(`haru worker exited during start-up:\n${tail()}`);
    if (Date.now() > deadline) {
      await kill();
      throw new Error(`haru worker did not start within ${timeoutMs} ms:\n${tail()}`);
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  return {
    child,
    pid: child.pid ?? 0,
    logFile,
    ready,
    exited,
    kill,
    async stop(graceMs = 10_000) {
      if (hasExited(child)) return exited;
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), graceMs);
      const exit = await exited;
      clearTimeout(timer);
      return exit;
    },
  };
}

/**
 * A promise that rejects (with the worker's log tail) if the worker process exits before `dispose()` is
 * called; race a wait against it so a crashed worker fails the test at once instead of timing it out.
 */
export function crashWatch(worker: WorkerProcess): { crashed: Promise<never>; dispose(): void } {
  let isDisposed = false;
  const crashed = worker.exited.then(() => {
    if (isDisposed) return new Promise<never>(() => undefined);
    const log = readFileSync(worker.logFile, 'utf8').slice(-3_000);
    throw new Error(`the haru worker process (pid ${worker.pid}) exited unexpectedly:\n${log}`);
  });
  crashed.catch(() => undefined);
  return {
    crashed,
    dispose() {
      isDisposed = true;
    },
  };
}

/** A counter of one worker's `/metrics` so far, summed over the series with `labels`. */
export async function workerCounter(
  worker: WorkerProcess,
  name: string,
  labels: Record<string, string> = {},
): Promise<number> {
  const text = await (await fetch(String(worker.ready.metricsUrl))).text();
  return sumSamples(parsePrometheusText(text), name, labels) ?? 0;
}
