import { type ChildProcess, spawn } from 'node:child_process';
import { closeSync, openSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { workflowBundle } from '../../workflows/support/bundle';

const REPO_ROOT = path.resolve(__dirname, '../../..');

/** `haru worker` running as a child process: the production entry point, so SIGKILL is a real crash. */
export interface WorkerProcess {
  pid: number;
  logFile: string;
  /** Resolves when the process has exited. */
  exited: Promise<void>;
  /** SIGKILL, like a host losing power; resolves once the process is gone. */
  kill(): Promise<void>;
  /** SIGTERM (graceful drain), SIGKILL after `graceMs`; resolves once the process is gone. */
  stop(graceMs?: number): Promise<void>;
}

export interface WorkerProcessOptions {
  databaseUrl: string;
  temporalAddress: string;
  taskQueue: string;
  /** Output is appended here (the worker's JSON log lines). */
  logFile: string;
  /** Give up when the worker does not report `worker running` within this. Default 90 s. */
  startTimeoutMs?: number;
}

const hasExited = (child: ChildProcess) => child.exitCode !== null || child.signalCode !== null;

/**
 * Starts `node bin/haru.js worker` with the run's prebuilt workflow bundle and resolves once it logs
 * `worker running` (it polls and has ensured a monitor per fleet). Rejects with the log tail when the
 * process exits first or stays silent past the start timeout (the process is killed then).
 */
export async function startWorkerProcess(opts: WorkerProcessOptions): Promise<WorkerProcess> {
  const fd = openSync(opts.logFile, 'a');
  let child: ChildProcess;
  try {
    child = spawn(process.execPath, [path.join(REPO_ROOT, 'bin/haru.js'), 'worker'], {
      cwd: REPO_ROOT,
      stdio: ['ignore', fd, fd],
      env: {
        ...process.env,
        DATABASE_URL: opts.databaseUrl,
        TEMPORAL_ADDRESS: opts.temporalAddress,
        HARU_TASK_QUEUE: opts.taskQueue,
        HARU_WORKFLOW_BUNDLE: workflowBundle().codePath,
        HARU_WORKER_METRICS_PORT: '0',
        HARU_WORKER_METRICS_HOST: '127.0.0.1',
        LOG_LEVEL: 'info',
      },
    });
  } finally {
    closeSync(fd);
  }
  const exited = new Promise<void>((resolve) => {
    child.once('exit', () => resolve());
    child.once('error', () => resolve());
  });
  const tail = () => {
    try {
      return readFileSync(opts.logFile, 'utf8').slice(-3_000);
    } catch {
      return '';
    }
  };
  const kill = async () => {
    if (!hasExited(child)) child.kill('SIGKILL');
    await exited;
  };
  const startedAt = readFileSync(opts.logFile, 'utf8').length;
  const deadline = Date.now() + (opts.startTimeoutMs ?? 90_000);
  for (;;) {
    if (readFileSync(opts.logFile, 'utf8').slice(startedAt).includes('"worker running"')) break;
    if (hasExited(child)) throw new Error(`haru worker exited during start-up:\n${tail()}`);
    if (Date.now() > deadline) {
      await kill();
      throw new Error(`haru worker did not start within ${opts.startTimeoutMs ?? 90_000} ms:\n${tail()}`);
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  return {
    pid: child.pid ?? 0,
    logFile: opts.logFile,
    exited,
    kill,
    async stop(graceMs = 10_000) {
      if (hasExited(child)) return;
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), graceMs);
      await exited;
      clearTimeout(timer);
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
