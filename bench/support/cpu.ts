import { readdirSync, readFileSync } from 'node:fs';
import { sql } from 'drizzle-orm';
import type { HaruDb } from '../../db/client';
import { rowsOf } from '../../db/repo/support';

const TICK_MS = 10; // USER_HZ is 100 on Linux

/** CPU time (user + system, ms) a process has used so far; 0 once it is gone. */
export function cpuMs(pid: number): number {
  try {
    // Fields after the command name (which may contain spaces): utime is the 12th, stime the 13th.
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return (Number(fields[11]) + Number(fields[12])) * TICK_MS;
  } catch {
    return 0;
  }
}

/** The pids whose parent is `pid` (nginx's workers under its master). */
export function childPids(pid: number): number[] {
  const out: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      if (Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]) === pid) out.push(Number(entry));
    } catch {
      // gone meanwhile
    }
  }
  return out;
}

/** The pids of the Postgres backends connected to the database `db` talks to, but the one asking. */
export async function databaseBackendPids(db: HaruDb): Promise<number[]> {
  const result = await db.execute(
    sql`select pid from pg_stat_activity where datname = current_database() and pid <> pg_backend_pid()`,
  );
  return rowsOf<{ pid: number }>(result).map((r) => Number(r.pid));
}

/**
 * The CPU (ms) the backends of a database used from now until the returned function is called, each counted
 * from its own first sighting, so connections a pool opens meanwhile count from their start.
 */
export async function databaseCpuSince(db: HaruDb): Promise<() => Promise<number>> {
  const from = new Map((await databaseBackendPids(db)).map((pid) => [pid, cpuMs(pid)]));
  return async () => (await databaseBackendPids(db)).reduce((sum, pid) => sum + cpuMs(pid) - (from.get(pid) ?? 0), 0);
}
