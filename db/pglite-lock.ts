import { closeSync, mkdirSync, openSync, readFileSync, rmSync, writeSync } from 'node:fs';
import path from 'node:path';

/** Thrown when another live process holds the embedded database's data directory. */
export class EmbeddedDatabaseLockedError extends Error {
  constructor(
    readonly dataDir: string,
    readonly holderPid: number,
  ) {
    super(
      `the embedded database in ${dataDir} is in use by process ${holderPid}; PGlite serves one process only. ` +
        'Stop that process, or set DATABASE_URL to a PostgreSQL server to run several Haru processes.',
    );
    this.name = 'EmbeddedDatabaseLockedError';
  }
}

const LOCK_FILE = 'haru.lock';

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    // EPERM: the process exists but belongs to someone else.
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

function readHolder(lockPath: string): number | null {
  try {
    const pid = Number.parseInt(readFileSync(lockPath, 'utf8').trim(), 10);
    return Number.isInteger(pid) && pid > 0 ? pid : null;
  } catch {
    return null;
  }
}

/**
 * Takes the exclusive lock on `dataDir` (a `haru.lock` file holding this process's pid), creating the
 * directory if needed. A lock left by a dead process is taken over. Returns the release function.
 * Throws EmbeddedDatabaseLockedError when a live process (this one included) already holds it.
 */
export function lockDataDir(dataDir: string): () => void {
  mkdirSync(dataDir, { recursive: true });
  const lockPath = path.join(dataDir, LOCK_FILE);
  for (let attempt = 0; attempt < 3; attempt += 1) {
    try {
      const fd = openSync(lockPath, 'wx');
      writeSync(fd, `${process.pid}\n`);
      closeSync(fd);
      return () => rmSync(lockPath, { force: true });
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
    }
    const holder = readHolder(lockPath);
    // A holder that has not written its pid yet is mid-acquire: treat it as live.
    if (holder === null || isAlive(holder)) throw new EmbeddedDatabaseLockedError(dataDir, holder ?? 0);
    rmSync(lockPath, { force: true });
  }
  throw new EmbeddedDatabaseLockedError(dataDir, readHolder(lockPath) ?? 0);
}
