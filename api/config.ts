import { z } from 'zod';
import type { ServerCertificateFiles } from '../lib/server-tls';
import { secretFromEnv } from '../lib/secret-file';
import { type ApiKey, apiKeyRing } from './auth/api-key';
import { loadApiKeysFile } from './auth/keys-file';
import { loadSupervisorClientTls, supervisorClientEnvShape, type SupervisorClientTls } from '../clients/supervisor-tls';
import {
  defaultTemporalSettings,
  resolveTemporalSettings,
  type TemporalSettings,
  temporalEnvShape,
} from '../temporal/config';
import { listenUrlSchema, postgresTlsEnvShape } from '../db/postgres-tls';
import { blankable, ConfigError, parseEnv, portSchema, positiveMsSchema } from '../schemas/env';

const MIB = 1024 * 1024;
const positiveInt = z.coerce.number().int().positive();

/**
 * The API's environment. Parsed once at boot (`loadApiConfig`); a blank variable counts as unset.
 * Durations are milliseconds, sizes bytes.
 */
export const apiConfigSchema = z.object({
  PORT: blankable(portSchema.default(8700)),
  /** Bind address. Unset: 0.0.0.0 with a token, 127.0.0.1 without one (a token-less API never leaves loopback). */
  HOST: blankable(z.string().min(1).optional()),
  /** Shared Postgres (`postgres://…`); unset means the embedded PGlite under HARU_STATE_DIR. */
  DATABASE_URL: blankable(z.url({ protocol: /^postgres(ql)?$/ }).optional()),
  HARU_STATE_DIR: blankable(z.string().min(1).default('.haru')),
  /** libpq's PGSSLROOTCERT, PGSSLCERT, PGSSLKEY for a DATABASE_URL with sslmode. */
  ...postgresTlsEnvShape,
  HARU_LISTEN_DATABASE_URL: listenUrlSchema,
  /** TEMPORAL_ADDRESS, TEMPORAL_NAMESPACE, TEMPORAL_API_KEY, TEMPORAL_TLS_*, TEMPORAL_PROFILE, TEMPORAL_CONFIG_FILE. */
  ...temporalEnvShape,
  HARU_TASK_QUEUE: blankable(z.string().min(1).default('haru')),
  /**
   * Bearer token required on every /v1/* route; unset disables auth and forces a loopback bind. Surrounding
   * whitespace (a secret file's trailing newline) is trimmed: a client never sends it.
   */
  HARU_API_TOKEN: blankable(z.string().trim().min(1).optional()),
  /** A file holding HARU_API_TOKEN (a mounted secret), read once at boot; exclusive with HARU_API_TOKEN. */
  HARU_API_TOKEN_FILE: blankable(z.string().min(1).optional()),
  /**
   * A JSON file of named API keys, each with its scopes and optionally its fleets (api/auth/keys-file.ts),
   * read once at boot; owner-only (mode 600). May be set beside HARU_API_TOKEN, whose key is `default`.
   */
  HARU_API_KEYS_FILE: blankable(z.string().min(1).optional()),
  /**
   * HTTPS: the certificate chain and its key (owner-only), both or neither; renewed files are served without a
   * restart (lib/server-tls.ts).
   */
  HARU_API_TLS_CERT_FILE: blankable(z.string().min(1).optional()),
  HARU_API_TLS_KEY_FILE: blankable(z.string().min(1).optional()),
  /**
   * The Temporal Web UI's address (`http://127.0.0.1:8233`, a Temporal Cloud URL): the fleet page links each
   * operation's workflow there. Unset: the page shows the workflow ids alone.
   */
  HARU_TEMPORAL_UI_URL: blankable(
    z
      .url({ protocol: /^https?$/ })
      .refine((u) => !/[?#]/.test(u), 'an address without a query or fragment (workflow paths are added to it)')
      .optional(),
  ),
  /** Fleet (slug or UUID) for proxy requests without an `X-Haru-Fleet` header. */
  HARU_DEFAULT_FLEET: blankable(z.string().min(1).optional()),
  HARU_CHAT_MAX_BODY_BYTES: blankable(positiveInt.default(32 * MIB)),
  /** Bounds the time until the upstream's response headers (504). */
  HARU_CHAT_HEADER_TIMEOUT_MS: blankable(positiveMsSchema.default(60_000)),
  /**
   * Bounds the time from the upstream's headers to its first body byte (504, or a final SSE error event once
   * pings started the stream); a stream that sent a byte is never cut.
   */
  HARU_CHAT_FIRST_BYTE_TIMEOUT_MS: blankable(positiveMsSchema.default(120_000)),
  /** Longest a request waits for a route move during a failover. */
  HARU_CHAT_HOLD_MS: blankable(positiveMsSchema.default(60_000)),
  /**
   * Longest a non-streaming request is held (at most HARU_CHAT_HOLD_MS): it sends nothing while held, so it
   * stays below the common load-balancer idle timeouts (AWS ALB, nginx: 60 s). Streams are pinged instead.
   */
  HARU_CHAT_HOLD_QUIET_MS: blankable(positiveMsSchema.default(45_000)),
  /** Most requests held at once per API process; more answer 429 `overloaded`. */
  HARU_CHAT_HOLD_MAX: blankable(positiveInt.default(1_000)),
  /**
   * Most times one request is sent again after its upstream died in flight (0 turns resending off);
   * inference has no side effects, so a re-sent request only costs GPU time.
   */
  HARU_RESEND_MAX_PER_REQUEST: blankable(z.coerce.number().int().min(0).max(100).default(3)),
  /**
   * Most bytes of one answer kept so that it can be sent again: a stream's relayed text (past it, that stream
   * cannot be continued elsewhere) or a non-streaming answer read whole before its headers go out (a longer one
   * streams through, and a break then cuts it). Memory per request in flight.
   */
  HARU_RESEND_MAX_BYTES: blankable(positiveInt.default(1 * MIB)),
  HARU_SNAPSHOT_CACHE_TTL_MS: blankable(positiveMsSchema.default(2_000)),
  /** Bound on one routing read from the store; past it the last known routing is served as stale. */
  HARU_STORE_TIMEOUT_MS: blankable(positiveMsSchema.default(500)),
  /** Bound on one Temporal call; past it the route answers 503 `orchestrator_unavailable`. */
  HARU_TEMPORAL_TIMEOUT_MS: blankable(positiveMsSchema.default(5_000)),
  /** Most `events?follow=1` streams one API process holds; more answer 429 `overloaded` with Retry-After. */
  HARU_EVENTS_MAX_FOLLOWERS: blankable(positiveInt.default(1_000)),
  /** On SIGTERM, how long requests in flight may finish before their connections are cut (event follows end at once). */
  HARU_SHUTDOWN_GRACE_MS: blankable(positiveMsSchema.default(10_000)),
  /** How `GET …/domains/:domain/status` reads supervisors: the worker's variables (token, CA, client certificate). */
  ...supervisorClientEnvShape,
  LOG_LEVEL: blankable(z.enum(['debug', 'info', 'warn', 'error']).default('info')),
});
/**
 * Timings the API keeps fixed: no variable, since no operator has a reason to turn them (each is far inside the
 * bounds that matter to clients); tests shorten them through `defaultApiConfig`.
 */
export const API_TIMINGS = {
  /**
   * Interval of the SSE comment pings sent to held streams and to streams waiting for their first byte: well
   * under the common load-balancer idle timeouts (AWS ALB, nginx: 60 s).
   */
  holdPingMs: 5_000,
  /** How often the event feed reads the store for a followed fleet (one read per fleet, whatever its followers). */
  eventsPollMs: 500,
  /** How long `POST /reconcile` waits for the monitor's fresh poll of every domain before it answers. */
  reconcileWaitMs: 3_000,
};
export type ApiTimings = typeof API_TIMINGS;

/** The API's settings; the Temporal ones resolved with the profile file (`temporal`). */
export type ApiConfig = Omit<z.infer<typeof apiConfigSchema>, keyof typeof temporalEnvShape> &
  ApiTimings & {
    temporal: TemporalSettings;
    /** Read from HARU_SUPERVISOR_CA_FILE and the client certificate files; undefined when none is set. */
    supervisorTls?: SupervisorClientTls;
    /** The keys of HARU_API_KEYS_FILE (HARU_API_TOKEN's `default` key is added by `apiKeysOf`). */
    apiKeys?: readonly ApiKey[];
  };

const configError = (m: string) => new ConfigError(`invalid API environment:\n  ${m}`);

/** Every key the API accepts: the keys file's and HARU_API_TOKEN's `default` (api/auth/api-key.ts). */
export const apiKeysOf = (config: Pick<ApiConfig, 'apiKeys' | 'HARU_API_TOKEN'>): ApiKey[] =>
  apiKeyRing(config.apiKeys ?? [], config.HARU_API_TOKEN, configError);

/**
 * HARU_API_TOKEN, or the trimmed content of HARU_API_TOKEN_FILE (lib/secret-file.ts, the one reader of secret
 * files). Throws ConfigError when both are set, or the file cannot be read or holds only whitespace.
 */
const apiToken = (parsed: z.infer<typeof apiConfigSchema>): string | undefined =>
  secretFromEnv(parsed, 'HARU_API_TOKEN', { fail: configError });

/** Parses the API environment; throws ConfigError naming every bad variable or Temporal setting. */
export function loadApiConfig(env: NodeJS.ProcessEnv): ApiConfig {
  const parsed = parseEnv(apiConfigSchema, env, 'API');
  const config: ApiConfig = {
    ...parsed,
    ...API_TIMINGS,
    HARU_API_TOKEN: apiToken(parsed),
    HARU_SUPERVISOR_TOKEN: secretFromEnv(parsed, 'HARU_SUPERVISOR_TOKEN', { fail: configError }),
    temporal: resolveTemporalSettings(env),
    supervisorTls: loadSupervisorClientTls(parsed),
    apiKeys: parsed.HARU_API_KEYS_FILE ? loadApiKeysFile(parsed.HARU_API_KEYS_FILE, configError) : undefined,
  };
  // A clash between the file and HARU_API_TOKEN stops the API here, at start, not at the first request.
  apiKeysOf(config);
  apiCertificateFiles(config);
  return config;
}

/** The API's certificate and key files (HTTPS), or undefined for plain HTTP; ConfigError for one without the other. */
export function apiCertificateFiles(
  config: Pick<ApiConfig, 'HARU_API_TLS_CERT_FILE' | 'HARU_API_TLS_KEY_FILE'>,
): ServerCertificateFiles | undefined {
  const { HARU_API_TLS_CERT_FILE: cert, HARU_API_TLS_KEY_FILE: key } = config;
  if (!cert && !key) return undefined;
  if (!cert || !key) throw configError('HARU_API_TLS_CERT_FILE and HARU_API_TLS_KEY_FILE go together: set both');
  return {
    cert: { setting: 'HARU_API_TLS_CERT_FILE', file: cert },
    key: { setting: 'HARU_API_TLS_KEY_FILE', file: key },
  };
}

/** The config with every default, for tests: `defaultApiConfig({ HARU_CHAT_HOLD_MS: 100 })`. */
export const defaultApiConfig = (overrides: Partial<ApiConfig> = {}): ApiConfig => ({
  ...apiConfigSchema.parse({}),
  ...API_TIMINGS,
  temporal: defaultTemporalSettings(),
  ...overrides,
});
