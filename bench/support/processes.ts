import { type ChildProcess, spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';

const REPO_ROOT = path.resolve(__dirname, '../..');

/** A `haru <command>` child process, its JSON log lines, and its peak resident memory. */
export interface HaruProcess {
  child: ChildProcess;
  pid: number;
  /** The line that said it was ready (e.g. `worker running`, `api listening`). */
  ready: Record<string, unknown>;
  /** Peak resident set size so far (VmHWM, MiB); null where /proc is unavailable. */
  peakRssMiB(): number | null;
  stop(): Promise<void>;
}

/**
 * Starts `node [nodeArgs] bin/haru.js <command>` with `env` added to this process's environment and resolves once a
 * JSON log line has `msg === readyMsg`. Rejects with the output when the process exits first or is not
 * ready within `timeoutMs`.
 */
export async function startHaruProcess(
  command: string,
  env: Record<string, string>,
  readyMsg: string,
  opts: { timeoutMs?: number; nodeArgs?: string[]; root?: string } = {},
): Promise<HaruProcess> {
  const timeoutMs = opts.timeoutMs ?? 120_000;
  const root = opts.root ?? REPO_ROOT;
  const child = spawn(process.execPath, [...(opts.nodeArgs ?? []), path.join(root, 'bin/haru.js'), command], {
    cwd: root,
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  let buffer = '';
  let isReady = false;
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const ready = await new Promise<Record<string, unknown>>((resolve, reject) => {
    const timer = setTimeout(
      () => reject(new Error(`haru ${command} not ready in ${timeoutMs} ms:\n${output}`)),
      timeoutMs,
    );
    child.stdout!.on('data', (chunk: Buffer) => {
      output = (output + chunk.toString()).slice(-8_000);
      // Once ready, lines are no longer parsed: a bench's load generator shares this process, and an API
      // writes one access-log line per request.
      if (isReady) return;
      buffer += chunk.toString();
      for (let nl = buffer.indexOf('\n'); nl >= 0; nl = buffer.indexOf('\n')) {
        const text = buffer.slice(0, nl);
        buffer = buffer.slice(nl + 1);
        try {
          const line = JSON.parse(text) as Record<string, unknown>;
          if (line.msg === readyMsg) {
            isReady = true;
            buffer = '';
            clearTimeout(timer);
            resolve(line);
          }
        } catch {
          // not a log line
        }
      }
    });
    child.stderr!.on('data', (chunk: Buffer) => (output = (output + chunk.toString()).slice(-8_000)));
    void exited.then(() => {
      clearTimeout(timer);
      reject(new Error(`haru ${command} exited before it was ready:\n${output}`));
    });
  }).catch((err: unknown) => {
    child.kill('SIGKILL');
    throw err;
  });
  return {
    child,
    pid: child.pid ?? 0,
    ready,
    peakRssMiB() {
      try {
        const kib = /VmHWM:\s+(\d+) kB/.exec(readFileSync(`/proc/${child.pid}/status`, 'utf8'))?.[1];
        return kib ? Number(kib) / 1024 : null;
      } catch {
        return null;
      }
    },
    async stop() {
      if (child.exitCode !== null || child.signalCode !== null) return;
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), 15_000);
      await exited;
      clearTimeout(timer);
    },
  };
}
