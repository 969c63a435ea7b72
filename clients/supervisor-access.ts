import { createHmac } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { Agent, type Dispatcher } from 'undici';
import { isPlainHttpOffLoopback } from '../lib/loopback';
import { readSecretFile, type SecretReadOptions } from '../lib/secret-file';
import type { SupervisorAccess } from '../schemas/layout';
import { secretEnvProblem, secretFileProblem, secretsDir } from '../schemas/secret-ref';
import type { SupervisorClientTls } from './supervisor-tls';

/** The supervisor a call goes to: a domain's address and its layout settings (a Domain row fits). */
export interface SupervisorTarget {
  /** The domain's id: what a `supervisor.issueToken` domain's token is derived from. */
  id?: string;
  slug: string;
  supervisorUrl: string;
  supervisor?: SupervisorAccess | null;
}

/** A domain's supervisor settings that cannot work; the message names the domain and the layout field. */
export class SupervisorAccessError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'SupervisorAccessError';
  }
}

/** The fleet-wide settings a domain falls back to, and where per-domain sources are read. */
export interface SupervisorAccessOptions {
  /** HARU_SUPERVISOR_TOKEN (or its _FILE): the token of every domain that names no source of its own. */
  token?: string;
  /** HARU_SUPERVISOR_CA_FILE and the client certificate: for every https:// supervisor. */
  tls?: SupervisorClientTls;
  /** The environment a domain's `tokenEnv` is looked up in (the worker's). */
  env?: Readonly<Record<string, string | undefined>>;
  readFile?: (file: string) => Buffer;
  /** Told once per domain and address that plain HTTP crosses the network (`insecure: true`). */
  warn?: (message: string, fields: Record<string, unknown>) => void;
}

/** How one call reaches a domain's supervisor. */
export interface SupervisorConnection {
  token?: string;
  dispatcher: Dispatcher;
}

/** Resolves a domain's token and connection (see {@link createSupervisorAccess}). */
export interface SupervisorAccessResolver {
  /**
   * The domain's token: read at each call from its `tokenEnv` or `tokenFile` (so a rotated file is used
   * without a restart), else the fleet-wide one; undefined when there is none. Throws SupervisorAccessError.
   */
  tokenFor(target: SupervisorTarget): string | undefined;
  /**
   * The token and the undici dispatcher for a call. Refuses plain http:// to a supervisor off loopback unless
   * the domain says `insecure: true`; a domain's `caFile` or `serverName` gets its own Agent. Throws
   * SupervisorAccessError.
   */
  connect(target: SupervisorTarget): SupervisorConnection;
  close(): Promise<void>;
}

const field = (target: SupervisorTarget, name: keyof SupervisorAccess) => `domain ${target.slug}: supervisor.${name}`;

/**
 * The message for plain HTTP to a remote supervisor without the domain's opt-in: what to change, where.
 */
export const plainHttpRefusal = (target: SupervisorTarget): string =>
  `domain ${target.slug}: supervisor ${target.supervisorUrl} is plain HTTP to a host off loopback, so its token ` +
  'would cross the network in clear text; serve it over https:// (HARU_SUPERVISOR_TLS_CERT_FILE on the host) or ' +
  'set "supervisor": { "insecure": true } on the domain in the layout';

/**
 * The token of a `supervisor.issueToken` domain: HMAC-SHA256 of its id under the token it would otherwise be
 * sent, as hex. One per domain, the same from every worker, nothing stored; a host holding it can derive neither
 * the key nor another domain's token.
 */
export function issuedSupervisorToken(key: string, domainId: string): string {
  return createHmac('sha256', key).update(`haru supervisor token v1 ${domainId}`).digest('hex');
}

/**
 * Reads a domain's token from where its layout says (trimmed), else returns `fallback`; for a
 * `supervisor.issueToken` domain, the token issued from that one (issuedSupervisorToken). Throws `fail(message)`
 * (default SupervisorAccessError) naming the field for an unset variable or an unreadable or empty file, and
 * for a source outside the layout's allow-list (a variable not named `HARU_SECRET_…`, a file outside
 * HARU_SECRETS_DIR of `env`): layout validation refuses those, and a layout stored before it did is refused
 * here, before its token is read and sent.
 */
export function domainToken(
  target: SupervisorTarget,
  env: Readonly<Record<string, string | undefined>>,
  fallback: string | undefined,
  opts: SecretReadOptions = {},
): string | undefined {
  const fail = opts.fail ?? ((message: string) => new SupervisorAccessError(message));
  const token = configuredToken(target, env, fallback, { ...opts, fail });
  if (!target.supervisor?.issueToken) return token;
  if (!token) {
    throw fail(`${field(target, 'issueToken')}: derives the host's token from HARU_SUPERVISOR_TOKEN, which is not set`);
  }
  if (!target.id) throw fail(`${field(target, 'issueToken')}: the domain's id is not known here`);
  return issuedSupervisorToken(token, target.id);
}

/** The token a domain's layout names, else `fallback` (domainToken without the issued one). */
function configuredToken(
  target: SupervisorTarget,
  env: Readonly<Record<string, string | undefined>>,
  fallback: string | undefined,
  opts: SecretReadOptions & { fail: (message: string) => Error },
): string | undefined {
  const access = target.supervisor;
  const { fail } = opts;
  if (access?.tokenEnv) {
    const refused = secretEnvProblem(access.tokenEnv);
    if (refused) throw fail(`${field(target, 'tokenEnv')}: ${access.tokenEnv} ${refused}`);
    const value = env[access.tokenEnv]?.trim();
    if (!value) throw fail(`${field(target, 'tokenEnv')}: ${access.tokenEnv} is not set`);
    return value;
  }
  if (access?.tokenFile) {
    const refused = secretFileProblem(access.tokenFile, secretsDir(env));
    if (refused) throw fail(`${field(target, 'tokenFile')}: ${access.tokenFile} ${refused}`);
    return readSecretFile(access.tokenFile, field(target, 'tokenFile'), opts);
  }
  return fallback;
}

/** Node's codes for a server certificate that did not verify (node:tls, OpenSSL's X509_V_ERR_* names). */
const CERTIFICATE_REJECTED = new Set([
  'UNABLE_TO_VERIFY_LEAF_SIGNATURE',
  'UNABLE_TO_GET_ISSUER_CERT',
  'UNABLE_TO_GET_ISSUER_CERT_LOCALLY',
  'SELF_SIGNED_CERT_IN_CHAIN',
  'DEPTH_ZERO_SELF_SIGNED_CERT',
  'CERT_HAS_EXPIRED',
  'CERT_NOT_YET_VALID',
  'ERR_TLS_CERT_ALTNAME_INVALID',
]);

/**
 * For a connection refused because the supervisor's certificate did not verify: which settings it was checked
 * against (the domain's `supervisor.caFile`, else HARU_SUPERVISOR_CA_FILE or the system CAs; under
 * `supervisor.serverName`, else the URL's host), appended to the failure so that a wrong CA names what to fix.
 * Empty for any other failure.
 */
export function certificateRejectionHint(code: string | undefined, target: SupervisorTarget): string {
  if (!code || !CERTIFICATE_REJECTED.has(code)) return '';
  const ca = target.supervisor?.caFile
    ? `${field(target, 'caFile')} (${target.supervisor.caFile})`
    : 'HARU_SUPERVISOR_CA_FILE (else the system CAs)';
  const name = target.supervisor?.serverName
    ? `${field(target, 'serverName')} (${target.supervisor.serverName})`
    : `the host of ${target.supervisorUrl}`;
  return `; the certificate was checked against ${ca} under the name ${name}`;
}

/** The longest a connect to a supervisor may stay pending (undici's own default is 10 s). */
const CONNECT_TIMEOUT_MS = 5_000;

/** Builds the resolver the supervisor client and the provisioning activities share. */
export function createSupervisorAccess(options: SupervisorAccessOptions = {}): SupervisorAccessResolver {
  const env = options.env ?? {};
  const readFile = options.readFile ?? ((file: string) => readFileSync(file));
  // Each call ends at its own deadline whatever phase it is in (lib/deadline.ts `bound`); the connect timeout
  // bounds how long a connect abandoned by such a call (a host that drops packets) keeps a socket.
  const agentWith = (tls: (SupervisorClientTls & { servername?: string }) | undefined) =>
    new Agent({ keepAliveTimeout: 30_000, connect: { timeout: CONNECT_TIMEOUT_MS, ...tls } });
  const fleetAgent = agentWith(options.tls);
  const agents = new Map<string, Agent>();
  const warned = new Set<string>();
  // Asked at every call (several a second per domain): the URL is parsed once.
  const plainOffLoopback = new Map<string, boolean>();
  const isPlainOffLoopback = (url: string): boolean => {
    let plain = plainOffLoopback.get(url);
    if (plain === undefined) plainOffLoopback.set(url, (plain = isPlainHttpOffLoopback(url)));
    return plain;
  };

  /**
   * The Agent of a domain: the fleet-wide one, unless its layout names its own CA (`caFile`, read once, kept) or
   * the name its certificate is verified under (`serverName`, the TLS server name whatever address it is
   * reached at); one Agent per such pair, so each keeps its connections alive.
   */
  function agentFor(target: SupervisorTarget): Agent {
    const { caFile, serverName } = target.supervisor ?? {};
    if (!caFile && !serverName) return fleetAgent;
    const key = `${caFile ?? ''}\n${serverName ?? ''}`;
    let agent = agents.get(key);
    if (!agent) {
      let ca = options.tls?.ca;
      if (caFile) {
        try {
          ca = readFile(caFile);
        } catch (err) {
          const code = (err as NodeJS.ErrnoException).code ?? (err as Error).message;
          throw new SupervisorAccessError(`${field(target, 'caFile')}: cannot read ${caFile} (${code})`);
        }
      }
      agent = agentWith({ ...options.tls, ca, ...(serverName && { servername: serverName }) });
      agents.set(key, agent);
    }
    return agent;
  }

  // A token file is read by lib/secret-file.ts, which refuses one that group or others may read; an injected
  // reader (tests) reads instead.
  const injectedRead = options.readFile;
  const tokenRead = injectedRead ? { read: (file: string) => injectedRead(file).toString('utf8') } : {};
  const tokenFor = (target: SupervisorTarget) => domainToken(target, env, options.token, tokenRead);

  return {
    tokenFor,
    connect(target) {
      if (isPlainOffLoopback(target.supervisorUrl)) {
        if (!target.supervisor?.insecure) throw new SupervisorAccessError(plainHttpRefusal(target));
        const key = `${target.slug} ${target.supervisorUrl}`;
        if (!warned.has(key)) {
          warned.add(key);
          options.warn?.(
            'supervisor reached over plain HTTP (insecure: true): its token crosses the network readable',
            {
              domain: target.slug,
              supervisorUrl: target.supervisorUrl,
            },
          );
        }
      }
      return { token: tokenFor(target), dispatcher: agentFor(target) };
    },
    async close() {
      await Promise.all([fleetAgent, ...agents.values()].map((a) => a.close()));
    },
  };
}
