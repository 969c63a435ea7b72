import { type ChildProcess, spawn } from 'node:child_process';
import { closeSync, openSync, readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { isAlive } from './gpu-state';
import { type Dispatcher, fetch as undiciFetch } from 'undici';

/** Repository root: simulated processes run from here, so layout commands like `node sim/trainer.js` resolve. */
export const REPO_ROOT = path.resolve(__dirname, '..');
/** Environment variable carrying a simulated domain's marker to every process it starts (and their children). */
export const SIM_MARKER_ENV = 'HARU_SIM_MARKER';

/** A child started in its own process group, its output appended to a log file. */
export interface SimChild {
  name: string;
  process: ChildProcess;
  logFile: string;
  /** Resolves when the process has exited (immediately if it already has). */
  exited: Promise<void>;
}

/** True once the child has exited (its pid may then be recycled: never signal it again). */
export const hasExited = (child: SimChild) => child.process.exitCode !== null || child.process.signalCode !== null;

/** Runs a TypeScript entry point with plain node and tsx's require hook. */
export function tsEntry(file: string): [string, string[]] {
  return [process.execPath, ['-r', require.resolve('tsx/cjs'), path.join(REPO_ROOT, file)]];
}

/** Spawns `command` detached (own process group) with stdout/stderr appended to `logFile`. */
export function spawnLogged(
  name: string,
  [file, args]: [string, string[]],
  env: NodeJS.ProcessEnv,
  logFile: string,
): SimChild {
  const fd = openSync(logFile, 'a');
  try {
    const child = spawn(file, args, { cwd: REPO_ROOT, env, detached: true, stdio: ['ignore', fd, fd] });
    const exited = new Promise<void>((resolve) => {
      child.once('exit', () => resolve());
      child.once('error', () => resolve());
    });
    return { name, process: child, logFile, exited };
  } finally {
    closeSync(fd); // the child holds its own copy
  }
}

/** The last `chars` characters of a log file ('' when unreadable). */
export function logTail(file: string, chars = 2_000): string {
  try {
    return readFileSync(file, 'utf8').slice(-chars);
  } catch {
    return '';
  }
}

/** Sends `signal` to process group `pgid`, ignoring a group that is gone. */
export function signalGroup(pgid: number | undefined, signal: NodeJS.Signals): void {
  if (!pgid) return;
  try {
    process.kill(-pgid, signal);
  } catch {
    // already gone
  }
}

/** Sends `signal` to `pid`, ignoring a process that is gone. */
export function signalPid(pid: number, signal: NodeJS.Signals): void {
  try {
    process.kill(pid, signal);
  } catch {
    // already gone
  }
}

/** Pids whose environment carries `HARU_SIM_MARKER=<marker>` (Linux /proc; empty elsewhere). */
export function findMarkedPids(marker: string): number[] {
  const needle = `${SIM_MARKER_ENV}=${marker}\0`;
  let names: string[];
  try {
    names = readdirSync('/proc');
  } catch {
    return [];
  }
  const pids: number[] = [];
  for (const name of names) {
    if (!/^\d+$/.test(name) || Number(name) === process.pid) continue;
    try {
      if (`${readFileSync(`/proc/${name}/environ`, 'latin1')}\0`.includes(needle)) pids.push(Number(name));
    } catch {
      // exited, or not ours to read
    }
  }
  return pids.filter(isAlive);
}

/** Resolves true once `condition` holds, false when `timeoutMs` passes first. */
export async function pollUntil(condition: () => boolean | Promise<boolean>, timeoutMs: number, intervalMs = 50) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (await condition()) return true;
    if (Date.now() > deadline) return false;
    await new Promise((r) => setTimeout(r, intervalMs));
  }
}

/**
 * True when `url` answers 2xx within `timeoutMs` (through `dispatcher` when given: an https supervisor).
 */
export async function answers(
  url: string,
  opts: { dispatcher?: Dispatcher; timeoutMs?: number } = {},
): Promise<boolean> {
  try {
    const signal = AbortSignal.timeout(opts.timeoutMs ?? 1_000);
    const res = opts.dispatcher
      ? await undiciFetch(url, { signal, dispatcher: opts.dispatcher })
      : await fetch(url, { signal });
    await res.arrayBuffer();
    return res.ok;
  } catch {
    return false;
  }
}
