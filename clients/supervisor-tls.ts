import { readFileSync } from 'node:fs';
import { z } from 'zod';
import { blankable, ConfigError } from '../schemas/env';

/** The variables that say how supervisors are reached, read by the worker and the API alike. */
export const supervisorClientEnvShape = {
  /**
   * Bearer token of every supervisor whose domain names no token source of its own (`supervisor.tokenEnv`,
   * `tokenFile`); inline or read from HARU_SUPERVISOR_TOKEN_FILE (trimmed, by `secretFromEnv`). Unset sends
   * none (supervisors then listen on loopback only).
   */
  HARU_SUPERVISOR_TOKEN: blankable(z.string().trim().min(1).optional()),
  HARU_SUPERVISOR_TOKEN_FILE: blankable(z.string().min(1).optional()),
  /** CA that https:// supervisors are verified against (default: the system CAs). */
  HARU_SUPERVISOR_CA_FILE: blankable(z.string().min(1).optional()),
  /** Client certificate and key presented to supervisors that require mTLS (both or neither). */
  HARU_SUPERVISOR_CLIENT_CERT_FILE: blankable(z.string().min(1).optional()),
  HARU_SUPERVISOR_CLIENT_KEY_FILE: blankable(z.string().min(1).optional()),
};

/** How the worker reaches supervisors over HTTPS: the CA it trusts, the client certificate it presents. */
export interface SupervisorClientTls {
  ca?: Buffer;
  cert?: Buffer;
  key?: Buffer;
}

/** The worker variables read here (validated as optional strings by the worker's env schema). */
export interface SupervisorClientTlsEnv {
  HARU_SUPERVISOR_CA_FILE?: string;
  HARU_SUPERVISOR_CLIENT_CERT_FILE?: string;
  HARU_SUPERVISOR_CLIENT_KEY_FILE?: string;
}

const read = (variable: string, file: string | undefined): Buffer | undefined => {
  if (!file) return undefined;
  try {
    return readFileSync(file);
  } catch (err) {
    throw new ConfigError(`${variable}: cannot read ${file} (${(err as NodeJS.ErrnoException).code})`);
  }
};

/**
 * Reads the supervisor CA and client certificate files; undefined when none is set (system CAs, no client
 * certificate). An unreadable file, or a certificate without its key, is a ConfigError naming the variable.
 */
export function loadSupervisorClientTls(env: SupervisorClientTlsEnv): SupervisorClientTls | undefined {
  const ca = read('HARU_SUPERVISOR_CA_FILE', env.HARU_SUPERVISOR_CA_FILE);
  const cert = read('HARU_SUPERVISOR_CLIENT_CERT_FILE', env.HARU_SUPERVISOR_CLIENT_CERT_FILE);
  const key = read('HARU_SUPERVISOR_CLIENT_KEY_FILE', env.HARU_SUPERVISOR_CLIENT_KEY_FILE);
  if (!cert !== !key) {
    throw new ConfigError('HARU_SUPERVISOR_CLIENT_CERT_FILE and HARU_SUPERVISOR_CLIENT_KEY_FILE go together: set both');
  }
  return ca || cert ? { ca, cert, key } : undefined;
}
