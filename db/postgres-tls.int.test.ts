/**
 * The store and its LISTEN session over TLS: a private PostgreSQL cluster started here with `ssl=on`, a
 * server certificate from a test CA, and only `hostssl` connections allowed, so every query that works went
 * through TLS. `verify-full` is checked against the test CA, from the URL and from PGSSLROOTCERT.
 */
import { execFileSync } from 'node:child_process';
import { chmodSync, copyFileSync, existsSync, mkdtempSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { sql } from 'drizzle-orm';
import { ConfigError } from '../schemas/env';
import { eventually } from '../test/support/eventually';
import { createTestPki, type TestPki } from '../test/support/pki';
import { freePort } from '../test/support/ports';
import { createDatabase, type HaruDatabase } from './client';
import { migrate } from './migrate';
import { explainPostgresTlsError, listenPoolerWarning } from './postgres-tls';
import { rowsOf } from './repo/support';

const BIN = '/usr/lib/postgresql/15/bin';
const available = existsSync(path.join(BIN, 'initdb'));
if (!available) console.warn(`skipped: no PostgreSQL 15 binaries in ${BIN}`);
const describePg = available ? describe : describe.skip;

const asPostgres = (args: string[]) => execFileSync('runuser', ['-u', 'postgres', '--', ...args], { stdio: 'pipe' });

describePg('Postgres over TLS', () => {
  let pki: TestPki;
  let dir: string;
  let port: number;
  const opened: HaruDatabase[] = [];
  const open = async (url: string, extra: Parameters<typeof createDatabase>[0] = {}) => {
    const database = await createDatabase({ databaseUrl: url, max: 2, tlsEnv: {}, ...extra });
    opened.push(database);
    return database;
  };
  const url = (query: string) => `postgres://postgres@localhost:${port}/postgres?${query}`;

  beforeAll(async () => {
    pki = createTestPki();
    dir = mkdtempSync(path.join(os.tmpdir(), 'haru-pg-tls-'));
    chmodSync(dir, 0o777);
    const data = path.join(dir, 'data');
    asPostgres([path.join(BIN, 'initdb'), '-D', data, '-U', 'postgres', '--auth=trust']);
    const install = (from: string, to: string) => {
      copyFileSync(from, path.join(data, to));
      execFileSync('chown', ['postgres:postgres', path.join(data, to)]);
      chmodSync(path.join(data, to), 0o600);
    };
    install(pki.server.cert, 'server.crt');
    install(pki.server.key, 'server.key');
    // TLS or nothing over TCP: a plain-text connection is refused by pg_hba.
    writeFileSync(path.join(data, 'pg_hba.conf'), 'local all all trust\nhostssl all all 127.0.0.1/32 trust\n');
    port = await freePort();
    asPostgres([
      path.join(BIN, 'pg_ctl'), '-D', data, '-l', path.join(dir, 'log'), '-w', 'start', '-o',
      `-p ${port} -k ${dir} -c listen_addresses=127.0.0.1 -c ssl=on`,
    ]); // prettier-ignore
  }, 60_000);

  afterAll(async () => {
    await Promise.all(opened.map((d) => d.close()));
    if (dir) asPostgres([path.join(BIN, 'pg_ctl'), '-D', path.join(dir, 'data'), '-m', 'immediate', 'stop']);
  });

  const sslInUse = async (database: HaruDatabase) => {
    const result = await database.db.execute(sql`select ssl from pg_stat_ssl where pid = pg_backend_pid()`);
    return rowsOf<{ ssl: boolean }>(result)[0]?.ssl;
  };

  it('refuses a plain-text connection (so the tests below prove TLS)', async () => {
    const plain = await open(url('sslmode=disable'));
    await expect(plain.ping()).rejects.toThrow(/no encryption|pg_hba/);
  });

  it('queries and LISTENs with sslmode=verify-full against the CA in the URL', async () => {
    const database = await open(url(`sslmode=verify-full&sslrootcert=${encodeURIComponent(pki.ca)}`));
    await expect(sslInUse(database)).resolves.toBe(true);
    const payloads: string[] = [];
    const unlisten = await database.listen('haru_tls_test', (p) => payloads.push(p));
    await database.db.execute(sql`select pg_notify('haru_tls_test', 'over tls')`);
    await expect(eventually('the notification', () => payloads.length && payloads)).resolves.toEqual(['over tls']);
    await unlisten();
  });

  it('takes the CA from PGSSLROOTCERT and LISTENs on HARU_LISTEN_DATABASE_URL', async () => {
    const database = await open(url('sslmode=verify-full'), {
      tlsEnv: { PGSSLROOTCERT: pki.ca },
      listenUrl: url('sslmode=verify-full&application_name=haru-listen'),
    });
    await expect(sslInUse(database)).resolves.toBe(true);
    const payloads: string[] = [];
    await database.listen('haru_tls_listen', (p) => payloads.push(p));
    // The listener is its own session, under its own application name.
    const listeners = await database.db.execute(
      sql`select count(*)::int as n from pg_stat_activity a join pg_stat_ssl s using (pid)
          where a.application_name = 'haru-listen' and s.ssl`,
    );
    expect(rowsOf<{ n: number }>(listeners)[0]?.n).toBe(1);
    await database.db.execute(sql`select pg_notify('haru_tls_listen', 'pushed')`);
    await expect(eventually('the notification', () => payloads.length && payloads)).resolves.toEqual(['pushed']);
  });

  it('stops at start on a CA that did not sign the server certificate, naming the setting, not the raw TLS error', async () => {
    const fromUrl = await open(url(`sslmode=verify-full&sslrootcert=${encodeURIComponent(pki.otherCa)}`));
    const failed = migrate(fromUrl);
    await expect(failed).rejects.toThrow(ConfigError);
    await expect(failed).rejects.toThrow(
      `DATABASE_URL (sslmode=verify-full): the server's certificate is not signed by the CA in DATABASE_URL parameter sslrootcert (${pki.otherCa}) (UNABLE_TO_VERIFY_LEAF_SIGNATURE: unable to verify the first certificate); point PGSSLROOTCERT or the URL's sslrootcert at the CA that signed it`,
    );
    const fromEnv = await open(url('sslmode=verify-ca'), { tlsEnv: { PGSSLROOTCERT: pki.otherCa } });
    await expect(fromEnv.ping()).rejects.toThrow(/^DATABASE_URL \(sslmode=verify-ca\): .* the CA in PGSSLROOTCERT \(/);
    const listenOnly = await open(url('sslmode=disable'), {
      listenUrl: url(`sslmode=verify-full&sslrootcert=${encodeURIComponent(pki.otherCa)}`),
    });
    await expect(listenOnly.listen('haru_tls_wrong', () => undefined)).rejects.toThrow(
      /^HARU_LISTEN_DATABASE_URL \(sslmode=verify-full\): the server's certificate is not signed by the CA in HARU_LISTEN_DATABASE_URL parameter sslrootcert/,
    );
  });

  it('names the host check of verify-full when the certificate does not carry the host', () => {
    const err = Object.assign(new Error("Hostname/IP does not match certificate's altnames"), {
      code: 'ERR_TLS_CERT_ALTNAME_INVALID',
    });
    const explained = explainPostgresTlsError(err, { urlVar: 'DATABASE_URL', sslmode: 'verify-full', trust: 'x' });
    expect(explained).toBeInstanceOf(ConfigError);
    expect((explained as Error).message).toMatch(
      /^DATABASE_URL: the server's certificate does not name the URL's host/,
    );
    const other = new Error('connection refused');
    expect(explainPostgresTlsError(other, { urlVar: 'DATABASE_URL', sslmode: 'require', trust: 'x' })).toBe(other);
  });

  it('fails verify-full against another CA, and names a CA file that cannot be read', async () => {
    const wrong = await open(url(`sslmode=verify-full&sslrootcert=${encodeURIComponent(pki.otherCa)}`));
    await expect(wrong.ping()).rejects.toThrow(/certificate/);
    await expect(open(url('sslmode=verify-full'), { tlsEnv: { PGSSLROOTCERT: '/nope/ca.pem' } })).rejects.toThrow(
      /^PGSSLROOTCERT: cannot read \/nope\/ca\.pem \(ENOENT\)/,
    );
    await expect(open(url('sslmode=verify-full&sslrootcert=/nope.pem'))).rejects.toThrow(ConfigError);
    await expect(open(url('sslmode=sometimes'))).rejects.toThrow(/^DATABASE_URL: sslmode=sometimes is not one of/);
  });

  it('warns when the LISTEN session would go through a transaction pooler', () => {
    expect(listenPoolerWarning('postgres://u@ep-cool-1-pooler.eu.aws.neon.tech/db')).toMatch(
      /DATABASE_URL \(also used for LISTEN\) looks like a transaction-mode pooler.*HARU_LISTEN_DATABASE_URL/,
    );
    expect(listenPoolerWarning('postgres://u@db:6432/haru', 'postgres://u@db:5432/haru')).toBeUndefined();
    expect(listenPoolerWarning('postgres://u@db:5432/haru')).toBeUndefined();
  });
});
