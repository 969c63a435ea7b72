import { execFile } from 'node:child_process';
import { chownSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import postgres from 'postgres';
import { freePort } from '../../support/ports';

const run = promisify(execFile);

/** A PostgreSQL server of its own (data dir, port, socket dir) that a test may stop and start at will. */
export interface PrivatePostgres {
  port: number;
  /** `postgres://postgres@127.0.0.1:<port>/<database>` (trust auth). */
  url(database?: string): string;
  /** Fast shutdown (`pg_ctl stop -m fast`): open connections are cut, like a crashed or restarted server. */
  stop(): Promise<void>;
  /**
   * Starts the server. `tcp: 'refused'` admits only its local socket (`socketSession`) until `admitTcp`, so a
   * test can prepare the store before the TCP clients (every Haru process) reach it again.
   */
  start(opts?: { tcp?: 'admitted' | 'refused' }): Promise<void>;
  /** Admits TCP clients again (pg_hba.conf reloaded); sessions already open stay. */
  admitTcp(): Promise<void>;
  /** A postgres.js client through the server's local socket, which TCP refusal does not reach. */
  socketSession(database?: string): postgres.Sql;
  /** Stops the server and removes its directory. */
  destroy(): Promise<void>;
}

/** The PostgreSQL binaries of the machine (`/usr/lib/postgresql/<version>/bin`, newest first). */
export function postgresBinDir(): string {
  const root = '/usr/lib/postgresql';
  const versions = existsSync(root) ? readdirSync(root).sort((a, b) => Number(b) - Number(a)) : [];
  for (const version of versions) {
    const bin = path.join(root, version, 'bin');
    if (existsSync(path.join(bin, 'initdb'))) return bin;
  }
  throw new Error(`no PostgreSQL server binaries under ${root} (apt-get install postgresql)`);
}

/**
 * initdb + pg_ctl start on a free port. PostgreSQL refuses to run as root, so as root the directory is
 * handed to the `postgres` user and every server command runs through `runuser -u postgres`.
 */
export async function startPrivatePostgres(): Promise<PrivatePostgres> {
  const bin = postgresBinDir();
  const dir = mkdtempSync(path.join(os.tmpdir(), 'haru-chaos-pg-'));
  const dataDir = path.join(dir, 'data');
  const logFile = path.join(dir, 'server.log');
  const isRoot = process.getuid?.() === 0;
  if (isRoot) {
    const { stdout } = await run('id', ['-u', 'postgres']);
    const { stdout: gid } = await run('id', ['-g', 'postgres']);
    chownSync(dir, Number(stdout.trim()), Number(gid.trim()));
  }
  const pg = (tool: string, args: string[]) =>
    isRoot
      ? run('runuser', ['-u', 'postgres', '--', path.join(bin, tool), ...args], { cwd: dir, timeout: 120_000 })
      : run(path.join(bin, tool), args, { cwd: dir, timeout: 120_000 });
  const port = await freePort();
  const explain = (err: unknown) => {
    let log = '';
    try {
      log = readFileSync(logFile, 'utf8').slice(-2_000);
    } catch {
      // no log yet
    }
    return new Error(`private postgres: ${(err as Error).message}\n${log}`);
  };

  await pg('initdb', ['-D', dataDir, '-U', 'postgres', '--auth=trust', '--no-sync']).catch((err) => {
    throw explain(err);
  });
  // The local socket is always trusted; TCP is trusted or rejected (an existing file keeps its owner).
  const writeHba = (tcp: 'trust' | 'reject') =>
    writeFileSync(
      path.join(dataDir, 'pg_hba.conf'),
      `local all all trust\nhost all all 127.0.0.1/32 ${tcp}\nhost all all ::1/128 ${tcp}\n`,
    );
  const socketSession = (database = 'postgres') =>
    postgres({ host: dir, port, username: 'postgres', database, max: 1, onnotice: () => {} });
  const launch = () =>
    pg('pg_ctl', [
      '-D',
      dataDir,
      '-l',
      logFile,
      '-o',
      `-p ${port} -k ${dir} -c listen_addresses=127.0.0.1 -c fsync=off`,
      '-w',
      '-t',
      '120',
      'start',
    ]).then(
      () => undefined,
      (err) => {
        throw explain(err);
      },
    );
  const stop = () =>
    pg('pg_ctl', ['-D', dataDir, '-m', 'fast', '-w', '-t', '120', 'stop']).then(
      () => undefined,
      (err) => {
        throw explain(err);
      },
    );
  const start = async ({ tcp = 'admitted' }: { tcp?: 'admitted' | 'refused' } = {}) => {
    writeHba(tcp === 'admitted' ? 'trust' : 'reject');
    await launch();
  };
  await start();
  let destroyed = false;
  return {
    port,
    url: (database = 'postgres') => `postgres://postgres@127.0.0.1:${port}/${database}`,
    stop,
    start,
    async admitTcp() {
      writeHba('trust');
      const sql = socketSession();
      try {
        await sql`select pg_reload_conf()`;
      } finally {
        await sql.end({ timeout: 5 });
      }
    },
    socketSession,
    async destroy() {
      if (destroyed) return;
      destroyed = true;
      await stop().catch(() => undefined);
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
