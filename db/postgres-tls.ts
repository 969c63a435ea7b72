/**
 * libpq's TLS conventions for a `DATABASE_URL`, turned into postgres.js options: `sslmode`
 * (`disable`, `prefer`, `require`, `verify-ca`, `verify-full`), the CA from `sslrootcert` in the URL or
 * `PGSSLROOTCERT`, a client certificate from `sslcert`/`sslkey` or `PGSSLCERT`/`PGSSLKEY`. postgres.js alone
 * reads `sslmode` but takes no CA file, and treats `verify-ca` as `verify-full`.
 */
import { readFileSync } from 'node:fs';
import type { ConnectionOptions } from 'node:tls';
import { z } from 'zod';
import { causeCode } from '../lib/error-cause';
import { blankable, ConfigError } from '../schemas/env';

const optionalPath = blankable(z.string().trim().min(1).optional());

/** libpq's TLS variables beside DATABASE_URL, merged into the API's and the worker's schemas. */
export const postgresTlsEnvShape = {
  /** CA for `sslmode=verify-ca|verify-full` (or `require`), as in libpq; the URL's `sslrootcert` wins. */
  PGSSLROOTCERT: optionalPath,
  /** Client certificate and key, as in libpq; the URL's `sslcert`/`sslkey` win. */
  PGSSLCERT: optionalPath,
  PGSSLKEY: optionalPath,
};

/** The API's LISTEN session URL (the direct endpoint behind a transaction pooler); default DATABASE_URL. */
export const listenUrlSchema = blankable(z.url({ protocol: /^postgres(ql)?$/ }).optional());

const SSL_MODES = ['disable', 'allow', 'prefer', 'require', 'verify-ca', 'verify-full'] as const;
type SslMode = (typeof SSL_MODES)[number];

/** The libpq variables Haru reads beside the URL (the process environment, as libpq does). */
export interface PostgresTlsEnv {
  PGSSLROOTCERT?: string;
  PGSSLCERT?: string;
  PGSSLKEY?: string;
}

/** What postgres.js gets: the URL without the TLS parameters it cannot read, and its `ssl` option. */
export interface PostgresConnectTarget {
  url: string;
  ssl: false | 'prefer' | ConnectionOptions;
  /** Which setting the server's certificate is checked against, for errors: `PGSSLROOTCERT (/ca.pem)`. */
  trust: string;
  /** The URL's variable (DATABASE_URL, HARU_LISTEN_DATABASE_URL) and its sslmode, for errors. */
  urlVar: string;
  sslmode: string;
}

function readSetting(setting: string, file: string): Buffer {
  try {
    return readFileSync(file);
  } catch (err) {
    throw new ConfigError(`${setting}: cannot read ${file} (${(err as NodeJS.ErrnoException).code})`);
  }
}

/**
 * Resolves the TLS options of `url` (named `urlVar` in messages, e.g. DATABASE_URL). A CA turns `require`
 * into verification of the chain, as libpq does when a root certificate is given; `verify-full` also
 * checks the host name. A missing file or an unknown mode is a ConfigError naming the parameter.
 */
export function postgresConnectTarget(url: string, urlVar: string, env: PostgresTlsEnv = {}): PostgresConnectTarget {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw new ConfigError(`${urlVar}: not a URL`);
  }
  const q = parsed.searchParams;
  const mode = (q.get('sslmode') ?? q.get('ssl') ?? 'disable') as SslMode;
  if (!SSL_MODES.includes(mode)) {
    throw new ConfigError(`${urlVar}: sslmode=${mode} is not one of ${SSL_MODES.join(', ')}`);
  }
  const params = Object.fromEntries(['sslrootcert', 'sslcert', 'sslkey'].map((p) => [p, q.get(p)]));
  const source = (param: string, envName: keyof PostgresTlsEnv) => {
    const fromUrl = params[param];
    if (fromUrl) return { setting: `${urlVar} parameter ${param}`, file: fromUrl };
    const fromEnv = env[envName]?.trim();
    return fromEnv ? { setting: envName, file: fromEnv } : undefined;
  };
  const file = (param: string, envName: keyof PostgresTlsEnv) => {
    const from = source(param, envName);
    return from ? readSetting(from.setting, from.file) : undefined;
  };
  for (const param of ['sslmode', 'ssl', 'sslrootcert', 'sslcert', 'sslkey']) q.delete(param);
  const cleaned = parsed.toString();
  const caSource = source('sslrootcert', 'PGSSLROOTCERT');
  const base = {
    url: cleaned,
    urlVar,
    sslmode: mode,
    trust: caSource
      ? `the CA in ${caSource.setting} (${caSource.file})`
      : 'the system CAs (no PGSSLROOTCERT or sslrootcert)',
  };
  if (mode === 'disable') return { ...base, ssl: false };
  if (mode === 'allow' || mode === 'prefer') return { ...base, ssl: 'prefer' };
  const ca = file('sslrootcert', 'PGSSLROOTCERT');
  const cert = file('sslcert', 'PGSSLCERT');
  const key = file('sslkey', 'PGSSLKEY');
  if (!cert !== !key) throw new ConfigError(`${urlVar}: a client certificate needs both sslcert and sslkey`);
  const client = cert && key ? { cert, key } : {};
  if (mode === 'require' && !ca) return { ...base, ssl: { rejectUnauthorized: false, ...client } };
  if (mode === 'verify-full') return { ...base, ssl: { ca, ...client } };
  // verify-ca, or require with a CA: the chain is checked, the host name is not.
  return { ...base, ssl: { ca, checkServerIdentity: () => undefined, ...client } };
}

/** Node's codes for a server certificate that the configured CA does not vouch for. */
const UNTRUSTED_CERTIFICATE = new Set([
  'SELF_SIGNED_CERT_IN_CHAIN',
  'DEPTH_ZERO_SELF_SIGNED_CERT',
  'UNABLE_TO_VERIFY_LEAF_SIGNATURE',
  'UNABLE_TO_GET_ISSUER_CERT',
  'UNABLE_TO_GET_ISSUER_CERT_LOCALLY',
  'CERT_SIGNATURE_FAILURE',
  'CERT_HAS_EXPIRED',
  'CERT_NOT_YET_VALID',
]);

/**
 * A connection failure caused by the TLS settings (the server's certificate is not signed by the configured
 * CA, or does not name the host under verify-full) as a ConfigError naming the settings to fix; any other
 * error comes back as it is. Retrying cannot help the first kind, so processes stop at start with it.
 */
export function explainPostgresTlsError(
  err: unknown,
  target: Pick<PostgresConnectTarget, 'trust' | 'urlVar' | 'sslmode'>,
): unknown {
  const code = causeCode(err, (c) => UNTRUSTED_CERTIFICATE.has(c) || c === 'ERR_TLS_CERT_ALTNAME_INVALID');
  if (!code) return err;
  const detail = `${code}: ${(err as Error).message}`;
  if (code === 'ERR_TLS_CERT_ALTNAME_INVALID') {
    return new ConfigError(
      `${target.urlVar}: the server's certificate does not name the URL's host, which sslmode=verify-full checks ` +
        `(${detail}); connect by a name the certificate carries, or use sslmode=verify-ca`,
    );
  }
  return new ConfigError(
    `${target.urlVar} (sslmode=${target.sslmode}): the server's certificate is not signed by ${target.trust} ` +
      `(${detail}); point PGSSLROOTCERT or the URL's sslrootcert at the CA that signed it`,
  );
}

/** The warning to log when the LISTEN session probably goes through a transaction pooler, else undefined. */
export function listenPoolerWarning(databaseUrl: string, listenUrl?: string): string | undefined {
  const hint = transactionPoolerHint(listenUrl ?? databaseUrl);
  if (!hint) return undefined;
  const which = listenUrl ? 'HARU_LISTEN_DATABASE_URL' : 'DATABASE_URL (also used for LISTEN)';
  return (
    `${which} looks like a transaction-mode pooler (${hint}): LISTEN needs a session connection, so routing ` +
    'pushes may never arrive; set HARU_LISTEN_DATABASE_URL to the direct endpoint'
  );
}

/**
 * Why `url` probably reaches a transaction-mode pooler, where LISTEN does not work (the session it was sent
 * on is handed to other clients): PgBouncer's port 6432, Supabase's pooler port 6543, Neon's `-pooler` host,
 * or `pgbouncer=true`. Undefined when nothing suggests one.
 */
export function transactionPoolerHint(url: string): string | undefined {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    return undefined;
  }
  if (parsed.searchParams.get('pgbouncer') === 'true') return 'the URL says pgbouncer=true';
  if (/-pooler\./.test(parsed.hostname)) return `${parsed.hostname} is a pooled (Neon) endpoint`;
  if (parsed.port === '6432') return 'port 6432 is PgBouncer’s';
  if (parsed.port === '6543') return 'port 6543 is a transaction pooler’s (Supabase)';
  return undefined;
}
