import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { EmbeddedDatabaseLockedError, lockDataDir } from './pglite-lock';

let dir: string;
beforeEach(() => {
  dir = mkdtempSync(path.join(os.tmpdir(), 'haru-lock-'));
});
afterEach(() => rmSync(dir, { recursive: true, force: true }));

/** The pid of a process that has exited (so it cannot hold anything). */
function deadPid(): number {
  const child = spawnSync(process.execPath, ['-e', 'process.stdout.write(String(process.pid))']);
  return Number(child.stdout.toString());
}

describe('lockDataDir', () => {
  it('takes the lock, refuses a second holder with a message pointing at DATABASE_URL, and releases', () => {
    const dataDir = path.join(dir, 'pgdata');
    const release = lockDataDir(dataDir);
    expect(readFileSync(path.join(dataDir, 'haru.lock'), 'utf8').trim()).toBe(String(process.pid));
    let err: unknown;
    try {
      lockDataDir(dataDir);
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(EmbeddedDatabaseLockedError);
    expect((err as Error).message).toMatch(/in use by process \d+.*set DATABASE_URL/);
    release();
    expect(existsSync(path.join(dataDir, 'haru.lock'))).toBe(false);
    lockDataDir(dataDir)();
  });

  it('takes over a lock left by a process that no longer exists', () => {
    writeFileSync(path.join(dir, 'haru.lock'), `${deadPid()}\n`);
    const release = lockDataDir(dir);
    expect(readFileSync(path.join(dir, 'haru.lock'), 'utf8').trim()).toBe(String(process.pid));
    release();
  });
});
