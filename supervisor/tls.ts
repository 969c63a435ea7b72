/**
 * The supervisor's HTTPS settings: a certificate and key (HARU_SUPERVISOR_TLS_CERT_FILE, …_KEY_FILE) and,
 * for mTLS, the CA whose client certificates it accepts (HARU_SUPERVISOR_TLS_CLIENT_CA_FILE).
 */
import type { ServerOptions } from 'node:https';
import { ConfigError } from '../schemas/env';
import { readConfigFile as read, readSecretFile } from './secret-file';

/** The variables read here (validated as optional strings by the supervisor's env schema). */
export interface SupervisorTlsEnv {
  HARU_SUPERVISOR_TLS_CERT_FILE?: string;
  HARU_SUPERVISOR_TLS_KEY_FILE?: string;
  HARU_SUPERVISOR_TLS_CLIENT_CA_FILE?: string;
}

/**
 * The `https.createServer` options, or undefined for plain HTTP (neither file set). A certificate without
 * its key, an unreadable file, or a key file that group or others may read is a ConfigError naming the
 * variable.
 */
export function loadSupervisorTls(env: SupervisorTlsEnv): ServerOptions | undefined {
  const { HARU_SUPERVISOR_TLS_CERT_FILE: certFile, HARU_SUPERVISOR_TLS_KEY_FILE: keyFile } = env;
  const caFile = env.HARU_SUPERVISOR_TLS_CLIENT_CA_FILE;
  if (!certFile && !keyFile) {
    if (caFile)
      throw new ConfigError('HARU_SUPERVISOR_TLS_CLIENT_CA_FILE needs HARU_SUPERVISOR_TLS_CERT_FILE and …_KEY_FILE');
    return undefined;
  }
  if (!certFile || !keyFile) {
    throw new ConfigError('HARU_SUPERVISOR_TLS_CERT_FILE and HARU_SUPERVISOR_TLS_KEY_FILE go together: set both');
  }
  const key = readSecretFile('HARU_SUPERVISOR_TLS_KEY_FILE', keyFile);
  return {
    cert: read('HARU_SUPERVISOR_TLS_CERT_FILE', certFile),
    key,
    ...(caFile && {
      ca: read('HARU_SUPERVISOR_TLS_CLIENT_CA_FILE', caFile),
      requestCert: true,
      rejectUnauthorized: true,
    }),
  };
}
