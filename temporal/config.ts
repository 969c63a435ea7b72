/**
 * Temporal connection settings, read the way the `temporal` CLI and every Temporal SDK read them: a
 * profile from the TOML config file (`TEMPORAL_CONFIG_FILE`, default `~/.config/temporalio/temporal.toml`,
 * profile `TEMPORAL_PROFILE` or `default`), then the `TEMPORAL_*` variables over it (`@temporalio/envconfig`).
 * Haru adds two rules of its own: a blank variable counts as unset, and what neither sets takes Haru's
 * default (`localhost:7233`, namespace `default`).
 */
import { accessSync, constants, existsSync } from 'node:fs';
import path from 'node:path';
import type { TLSConfig } from '@temporalio/common/lib/internal-non-workflow';
import {
  type ClientConfigProfile,
  type ConfigDataSource,
  loadClientConfigProfile,
  toClientOptions,
} from '@temporalio/envconfig';
import { z } from 'zod';
import { blankable, ConfigError } from '../schemas/env';

const optional = blankable(z.string().trim().min(1).optional());
const envBool = blankable(z.enum(['true', 'false', '1', '0']).optional());

/**
 * The Temporal variables Haru's processes accept (the envconfig set), merged into each process's env
 * schema so a bad value is reported with the rest.
 */
export const temporalEnvShape = {
  /** host:port of the Temporal frontend; overrides the profile's `address`. */
  TEMPORAL_ADDRESS: optional,
  TEMPORAL_NAMESPACE: optional,
  /** An API key (Temporal Cloud); turns TLS on unless TEMPORAL_TLS=false. */
  TEMPORAL_API_KEY: optional,
  /** Force TLS on (`true`) or off (`false`); unset: on when any TLS setting or an API key is given. */
  TEMPORAL_TLS: envBool,
  TEMPORAL_TLS_SERVER_CA_CERT_PATH: optional,
  TEMPORAL_TLS_SERVER_CA_CERT_DATA: optional,
  TEMPORAL_TLS_SERVER_NAME: optional,
  TEMPORAL_TLS_CLIENT_CERT_PATH: optional,
  TEMPORAL_TLS_CLIENT_CERT_DATA: optional,
  TEMPORAL_TLS_CLIENT_KEY_PATH: optional,
  TEMPORAL_TLS_CLIENT_KEY_DATA: optional,
  /** Which profile of the config file to use (default `default`; a named one must exist). */
  TEMPORAL_PROFILE: optional,
  /** The TOML config file (default `$XDG_CONFIG_HOME/temporalio/temporal.toml`); when set it must exist. */
  TEMPORAL_CONFIG_FILE: optional,
};

export const DEFAULT_TEMPORAL_ADDRESS = 'localhost:7233';
export const DEFAULT_TEMPORAL_NAMESPACE = 'default';

/** The options both `NativeConnection.connect` (worker) and `Connection.connect` (client) take. */
export interface TemporalConnectionOptions {
  address: string;
  tls?: TLSConfig | boolean;
  apiKey?: string;
  metadata?: Record<string, string>;
}

/** Where a TLS setting came from, for error messages: a variable name or a profile key in the file. */
export interface TemporalTlsOrigins {
  serverCa?: string;
  serverName?: string;
  clientCert?: string;
  clientKey?: string;
}

/** Resolved Temporal settings of one process. */
export interface TemporalSettings {
  address: string;
  /** The address came from TEMPORAL_ADDRESS or the profile, not Haru's default (`haru dev` then starts no server). */
  configured: boolean;
  namespace: string;
  connection: TemporalConnectionOptions;
  /** Set when TLS is on: where each TLS setting came from (undefined = not set anywhere). */
  tlsOrigins?: TemporalTlsOrigins;
}

/** The defaults only, for tests and processes that take no Temporal environment. */
export const defaultTemporalSettings = (address = DEFAULT_TEMPORAL_ADDRESS): TemporalSettings => ({
  address,
  configured: false,
  namespace: DEFAULT_TEMPORAL_NAMESPACE,
  connection: { address },
});

type TlsFileKey = 'serverCACert' | 'clientCert' | 'clientKey';
const TLS_FILES: Record<TlsFileKey, { env: string; toml: string; origin: keyof TemporalTlsOrigins }> = {
  serverCACert: { env: 'TEMPORAL_TLS_SERVER_CA_CERT', toml: 'server_ca_cert', origin: 'serverCa' },
  clientCert: { env: 'TEMPORAL_TLS_CLIENT_CERT', toml: 'client_cert', origin: 'clientCert' },
  clientKey: { env: 'TEMPORAL_TLS_CLIENT_KEY', toml: 'client_key', origin: 'clientKey' },
};

/** The config file envconfig reads for `env`, for messages (its own rule; undefined: it reads none). */
function configFilePath(env: Record<string, string>): string | undefined {
  if (env.TEMPORAL_CONFIG_FILE) return env.TEMPORAL_CONFIG_FILE;
  const base =
    process.platform === 'darwin'
      ? env.HOME && path.join(env.HOME, 'Library', 'Application Support')
      : env.XDG_CONFIG_HOME || (env.HOME && path.join(env.HOME, '.config'));
  return base ? path.join(base, 'temporalio', 'temporal.toml') : undefined;
}

/**
 * Resolves the Temporal settings from `env` (profile file, then variables, then Haru's defaults) and checks
 * every TLS file named anywhere: a missing file, a certificate without its key, or an unknown profile is a
 * ConfigError naming the variable or the profile key.
 */
export function resolveTemporalSettings(env: NodeJS.ProcessEnv): TemporalSettings {
  // Blank counts as unset, as for every Haru variable (envconfig alone would take `TEMPORAL_ADDRESS=` as '').
  const vars: Record<string, string> = {};
  for (const [k, v] of Object.entries(env)) if (v !== undefined && v.trim() !== '') vars[k] = v.trim();
  const file = configFilePath(vars);
  if (vars.TEMPORAL_CONFIG_FILE && !existsSync(vars.TEMPORAL_CONFIG_FILE)) {
    throw new ConfigError(`TEMPORAL_CONFIG_FILE: no such file ${vars.TEMPORAL_CONFIG_FILE}`);
  }
  const profileName = vars.TEMPORAL_PROFILE ?? 'default';
  let profile: ClientConfigProfile;
  try {
    profile = loadClientConfigProfile({ overrideEnvVars: vars });
  } catch (err) {
    const what = vars.TEMPORAL_PROFILE ? `TEMPORAL_PROFILE=${profileName}` : `the Temporal config file`;
    throw new ConfigError(`${what}: ${(err as Error).message} (config file ${file ?? 'none'})`);
  }
  const fromProfile = (key: string) => `tls.${key} of profile "${profileName}" in ${file}`;
  const origins: TemporalTlsOrigins = {};
  for (const [key, names] of Object.entries(TLS_FILES) as [TlsFileKey, (typeof TLS_FILES)[TlsFileKey]][]) {
    const source: ConfigDataSource | undefined = profile.tls?.[key];
    if (!source) continue;
    const isPath = 'path' in source;
    const envName = `${names.env}_${isPath ? 'PATH' : 'DATA'}`;
    const origin = vars[envName] ? envName : fromProfile(`${names.toml}_${isPath ? 'path' : 'data'}`);
    origins[names.origin] = origin;
    if (isPath) {
      try {
        accessSync(source.path, constants.R_OK);
      } catch (err) {
        throw new ConfigError(`${origin}: cannot read ${source.path} (${(err as NodeJS.ErrnoException).code})`);
      }
    }
  }
  if (profile.tls?.serverName) {
    origins.serverName = vars.TEMPORAL_TLS_SERVER_NAME ? 'TEMPORAL_TLS_SERVER_NAME' : fromProfile('server_name');
  }
  if (!origins.clientCert !== !origins.clientKey) {
    const given = origins.clientCert ?? origins.clientKey;
    throw new ConfigError(
      `${given}: a client certificate needs both TEMPORAL_TLS_CLIENT_CERT_PATH and TEMPORAL_TLS_CLIENT_KEY_PATH ` +
        '(or the profile keys tls.client_cert_path and tls.client_key_path)',
    );
  }
  const { connectionOptions, namespace } = toClientOptions(profile);
  const address = connectionOptions.address ?? DEFAULT_TEMPORAL_ADDRESS;
  const tls = connectionOptions.tls as TLSConfig | boolean | undefined;
  return {
    address,
    configured: connectionOptions.address !== undefined,
    namespace: namespace ?? DEFAULT_TEMPORAL_NAMESPACE,
    connection: {
      address,
      ...(tls !== undefined && { tls }),
      ...(connectionOptions.apiKey !== undefined && { apiKey: connectionOptions.apiKey as string }),
      ...(profile.grpcMeta !== undefined && { metadata: profile.grpcMeta }),
    },
    ...(tls && { tlsOrigins: origins }),
  };
}
