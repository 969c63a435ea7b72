/** Helpers for tests that run `haru dev` as a user would: a child process on free ports with its own state. */
import { type ChildProcess, spawn } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fleetLayoutSchema } from '../../schemas/layout';
import { simulatorPorts } from '../../cli/dev/layout';
import { freeOffset, freePort } from '../support/ports';

export const ROOT = path.resolve(__dirname, '../..');
export const HARU = path.join(ROOT, 'bin', 'haru.js');

/**
 * An HARU_SIM_PORT_OFFSET under which every simulated port of the dev layout is free now, below Linux's
 * ephemeral range and apart from every port `freePort` hands out in this process (and the reverse).
 */
export async function freeSimOffset(): Promise<number> {
  const layout = fleetLayoutSchema.parse(JSON.parse(readFileSync(path.join(ROOT, 'examples/dev.layout.json'), 'utf8')));
  return freeOffset(simulatorPorts(layout).map((p) => p.port));
}

/** The environment of a dev stack on free ports in `stateDir`, with no inherited Haru settings. */
export async function devEnv(stateDir: string): Promise<NodeJS.ProcessEnv & { PORT: string }> {
  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) {
    if (!/^(HARU_|TEMPORAL_|DATABASE_URL$|PORT$|HOST$)/.test(k)) env[k] = v;
  }
  return {
    ...env,
    HARU_STATE_DIR: stateDir,
    PORT: String(await freePort()),
    HARU_TEMPORAL_PORT: String(await freePort()),
    HARU_TEMPORAL_UI_PORT: String(await freePort()),
    HARU_WORKER_METRICS_PORT: '0',
    HARU_WORKER_SDK_METRICS_PORT: '0', // off: several stacks share this machine
    HARU_SIM_PORT_OFFSET: String(await freeSimOffset()),
  };
}

/** A spawned `haru dev` with its output collected. */
export interface DevProcess {
  child: ChildProcess;
  stdout(): string;
  stderr(): string;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

export function spawnDev(env: NodeJS.ProcessEnv, cwd = ROOT): DevProcess {
  const child = spawn(process.execPath, [HARU, 'dev'], { cwd, env, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  let err = '';
  child.stdout!.on('data', (c: Buffer) => (out += c.toString()));
  child.stderr!.on('data', (c: Buffer) => (err += c.toString()));
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.once('exit', (code, signal) => resolve({ code, signal })),
  );
  return { child, stdout: () => out, stderr: () => err, exited };
}

interface ProcInfo {
  pid: number;
  ppid: number;
  pgid: number;
}

function readProc(pid: number): ProcInfo | null {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // Fields after the command (which may contain spaces) start after the last ')'.
    const rest = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return { pid, ppid: Number(rest[1]), pgid: Number(rest[2]) };
  } catch {
    return null;
  }
}

const allPids = () =>
  readdirSync('/proc')
    .filter((d) => /^\d+$/.test(d))
    .map(Number);

/** Every live descendant of `root` (children, grandchildren, …), from /proc. */
export function descendants(root: number): number[] {
  const procs = allPids()
    .map(readProc)
    .filter((p): p is ProcInfo => p !== null);
  const found = new Set<number>();
  let frontier = [root];
  while (frontier.length) {
    const next = procs.filter((p) => frontier.includes(p.ppid) && !found.has(p.pid)).map((p) => p.pid);
    next.forEach((p) => found.add(p));
    frontier = next;
  }
  return [...found];
}

/** Live processes whose command line or environment mentions `needle` (e.g. a test's state directory). */
export function processesMentioning(needle: string): { pid: number; cmd: string }[] {
  return allPids().flatMap((pid) => {
    if (pid === process.pid) return [];
    try {
      const cmd = readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').join(' ');
      const environ = readFileSync(`/proc/${pid}/environ`, 'utf8');
      return cmd.includes(needle) || environ.includes(needle) ? [{ pid, cmd: cmd.trim() }] : [];
    } catch {
      return [];
    }
  });
}

/** Live processes among `pids` (zombies count as gone: they hold nothing). */
export function stillRunning(pids: number[]): number[] {
  return pids.filter((pid) => {
    try {
      const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
      return stat.slice(stat.lastIndexOf(')') + 2)[0] !== 'Z';
    } catch {
      return false;
    }
  });
}
