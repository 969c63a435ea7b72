import { type ChildProcess, spawn } from 'node:child_process';
import path from 'node:path';
import { workflowBundle } from './bundle';

const REPO_ROOT = path.resolve(__dirname, '..', '..', '..');

/** A `haru worker` running as a child process (so it can be SIGKILLed like a crashed host). */
export interface WorkerProcess {
  child: ChildProcess;
  /** The worker's JSON log lines so far. */
  lines: Record<string, unknown>[];
  /** The `worker running` line (metricsUrl, monitors, ...). */
  ready: Record<string, unknown>;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

/**
 * Starts `node bin/haru.js worker` against the test server and `databaseUrl`, using the run's prebuilt
 * workflow bundle, and resolves once it logs `worker running`. Rejects with its output when it exits first.
 */
export async function startWorkerProcess(opts: {
  databaseUrl: string;
  taskQueue: string;
  timeoutMs?: number;
}): Promise<WorkerProcess> {
  const child = spawn(process.execPath, [path.join(REPO_ROOT, 'bin/haru.js'), 'worker'], {
    cwd: REPO_ROOT,
    env: {
      ...process.env,
      TEMPORAL_ADDRESS: process.env.TEMPORAL_TEST_ADDRESS,
      TEMPORAL_NAMESPACE: 'default',
      HARU_TASK_QUEUE: opts.taskQueue,
      DATABASE_URL: opts.databaseUrl,
      HARU_WORKFLOW_BUNDLE: workflowBundle().codePath,
      HARU_WORKER_METRICS_PORT: '0',
      HARU_WORKER_METRICS_HOST: '127.0.0.1',
      LOG_LEVEL: 'info',
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const lines: Record<string, unknown>[] = [];
  let output = '';
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.once('exit', (code, signal) => resolve({ code, signal })),
  );
  let buffer = '';
  const ready = new Promise<Record<string, unknown>>((resolve, reject) => {
    child.stdout!.on('data', (chunk: Buffer) => {
      output = (output + chunk.toString()).slice(-8_000);
      buffer += chunk.toString();
      let nl: number;
      while ((nl = buffer.indexOf('\n')) >= 0) {
        const text = buffer.slice(0, nl);
        buffer = buffer.slice(nl + 1);
        try {
          const line = JSON.parse(text) as Record<string, unknown>;
          lines.push(line);
          if (line.msg === 'worker running') resolve(line);
        } catch {
          // not a log line
        }
      }
    });
    child.stderr!.on('data', (chunk: Buffer) => (output = (output + chunk.toString()).slice(-8_000)));
    void exited.then(({ code, signal }) =>
      reject(new Error(`haru worker exited (${code ?? signal}) before it was ready:\n${output}`)),
    );
    setTimeout(
      () => reject(new Error(`haru worker not ready within ${opts.timeoutMs ?? 90_000} ms:\n${output}`)),
      opts.timeoutMs ?? 90_000,
    ).unref();
  });
  try {
    return { child, lines, ready: await ready, exited };
  } catch (err) {
    child.kill('SIGKILL');
    throw err;
  }
}
