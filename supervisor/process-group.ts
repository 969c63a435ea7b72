import { execFile, execFileSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { readdir, readFile } from 'node:fs/promises';

/** What the training manager needs to know about the host's processes. */
export interface ProcessTable {
  /** Live (non-zombie) pids in process group `pgid`, ascending with the leader first when alive. */
  groupPids(pgid: number): number[];
  /** The kernel's start time of `pid` (tells a recycled pid apart); null when unknown or gone. */
  startTime(pid: number): string | null;
  /** True while `pid` exists and is no zombie. */
  isLive(pid: number): boolean;
  /**
   * Every process group's live pids, by pgid, from one walk of the whole table that never blocks the event loop
   * (a GPU host in a container may have thousands of processes), with when the walk started (`Date.now()`): a
   * process started after that may be missing. Concurrent calls share one walk, and a walk younger than the
   * table's `maxScanAgeMs` is handed out again.
   */
  scanGroups(): Promise<GroupWalk>;
}

interface ProcStat {
  pid: number;
  state: string;
  pgrp: number;
  startTime: string;
}

/** `/proc/<pid>/stat`'s fields the table uses; null when the process is gone or unreadable. */
export function readProcStat(pid: number): ProcStat | null {
  let text: string;
  try {
    text = readFileSync(`/proc/${pid}/stat`, 'utf8');
  } catch {
    return null;
  }
  return parseProcStat(pid, text);
}

function parseProcStat(pid: number, text: string): ProcStat {
  // Field 2 (the command) is parenthesised and may hold spaces: parse after the last ')'.
  const rest = text.slice(text.lastIndexOf(')') + 2).split(' ');
  return { pid, state: rest[0] ?? '?', pgrp: Number(rest[2]), startTime: rest[19] ?? '' };
}

/** Zombies and dead processes: gone for every purpose here. */
export const isGone = (state: string) => state.startsWith('Z') || state.startsWith('X');

/** Sorts a group's pids ascending with its leader (pid = pgid) first when alive. */
export function leaderFirst(pids: number[], pgid: number): number[] {
  pids.sort((a, b) => a - b);
  const i = pids.indexOf(pgid);
  if (i > 0) pids.unshift(...pids.splice(i, 1));
  return pids;
}

/** One walk of the process table: live pids by process group, and when the walk started (epoch ms). */
export interface GroupWalk {
  startedAtMs: number;
  groups: ReadonlyMap<number, number[]>;
}

/** `/proc/<pid>/stat` read without blocking; null when the process is gone or unreadable. */
async function readProcStatAsync(pid: number): Promise<ProcStat | null> {
  try {
    return parseProcStat(pid, await readFile(`/proc/${pid}/stat`, 'utf8'));
  } catch {
    return null;
  }
}

/** Live pids by process group from a list of processes. */
function byGroup(processes: readonly (ProcStat | null)[]): Map<number, number[]> {
  const groups = new Map<number, number[]>();
  for (const p of processes) {
    if (!p || isGone(p.state)) continue;
    const pids = groups.get(p.pgrp);
    if (pids) pids.push(p.pid);
    else groups.set(p.pgrp, [p.pid]);
  }
  return groups;
}

/** Shares one walk among concurrent callers and hands a walk out again while it is younger than `maxAgeMs`. */
function sharedWalk(walk: () => Promise<Map<number, number[]>>, maxAgeMs: number) {
  let last: GroupWalk | null = null;
  let running: Promise<GroupWalk> | null = null;
  return (): Promise<GroupWalk> => {
    if (last && Date.now() - last.startedAtMs < maxAgeMs) return Promise.resolve(last);
    if (!running) {
      const startedAtMs = Date.now();
      running = walk()
        .then((groups) => (last = { startedAtMs, groups }))
        .finally(() => (running = null));
    }
    return running;
  };
}

/**
 * The host's process table: /proc on Linux, `ps` elsewhere. Zombies count as gone: they hold no memory, and
 * an init that does not reap would otherwise keep a stopped run "alive" forever. `maxScanAgeMs` (default 0):
 * how long one `scanGroups` walk serves later calls, for many supervisors in one process (the benchmarks'
 * simulated hosts).
 */
export function createProcessTable(opts: { maxScanAgeMs?: number } = {}): ProcessTable {
  const maxScanAgeMs = opts.maxScanAgeMs ?? 0;
  let hasProc: boolean;
  try {
    readdirSync('/proc/self');
    hasProc = true;
  } catch {
    hasProc = false;
  }
  if (hasProc) {
    return {
      groupPids(pgid) {
        const pids: number[] = [];
        for (const name of readdirSync('/proc')) {
          if (!/^\d+$/.test(name)) continue;
          const stat = readProcStat(Number(name));
          if (stat && stat.pgrp === pgid && !isGone(stat.state)) pids.push(stat.pid);
        }
        return leaderFirst(pids, pgid);
      },
      startTime: (pid) => readProcStat(pid)?.startTime ?? null,
      isLive: (pid) => {
        const stat = readProcStat(pid);
        return stat !== null && !isGone(stat.state);
      },
      scanGroups: sharedWalk(async () => {
        const pids = (await readdir('/proc')).filter((name) => /^\d+$/.test(name)).map(Number);
        return byGroup(await Promise.all(pids.map(readProcStatAsync)));
      }, maxScanAgeMs),
    };
  }
  const PS_ARGS = ['-A', '-o', 'pid=,pgid=,stat=,lstart='];
  const ps = () => parsePs(execFileSync('ps', PS_ARGS, { encoding: 'utf8' }));
  return {
    groupPids: (pgid) =>
      leaderFirst(
        ps()
          .filter((p) => p.pgrp === pgid && !isGone(p.state))
          .map((p) => p.pid),
        pgid,
      ),
    startTime: (pid) => ps().find((p) => p.pid === pid)?.startTime ?? null,
    isLive: (pid) => ps().some((p) => p.pid === pid && !isGone(p.state)),
    scanGroups: sharedWalk(
      () =>
        new Promise((resolve, reject) =>
          execFile('ps', PS_ARGS, { encoding: 'utf8' }, (err, stdout) =>
            err ? reject(err) : resolve(byGroup(parsePs(stdout))),
          ),
        ),
      maxScanAgeMs,
    ),
  };
}

/** `ps -A -o pid=,pgid=,stat=,lstart=` as the table's rows (the start time: lstart, several words). */
function parsePs(stdout: string): ProcStat[] {
  return stdout
    .split('\n')
    .map((line) => line.trim().split(/\s+/))
    .filter((cols) => cols.length >= 3)
    .map(([pid, pgid, stat, ...lstart]) => ({
      pid: Number(pid),
      pgrp: Number(pgid),
      state: stat ?? '',
      startTime: lstart.join(' '),
    }));
}

/** Sends `signal` to process `pid` alone; a process that is already gone is not an error. */
export function signalProcess(pid: number, signal: NodeJS.Signals): void {
  try {
    process.kill(pid, signal);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ESRCH') throw err;
  }
}

/** Sends `signal` to every process of group `pgid`; a group that is already gone is not an error. */
export function signalGroup(pgid: number, signal: NodeJS.Signals): void {
  try {
    process.kill(-pgid, signal);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ESRCH') throw err;
  }
}
