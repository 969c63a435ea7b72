import { z } from 'zod';
import { blankable } from '../schemas/env';

const optionalPath = blankable(z.string().trim().min(1).optional());

/**
 * The environment of `haru sim domain`, parsed once by the command (a blank variable counts as unset). The
 * simulated supervisor gets its token and TLS from here, as `haru supervisor` would from its own environment;
 * every other variable is passed on to the processes it starts (PATH, a layout's `supervisor.tokenEnv`).
 */
export const simEnvSchema = z.object({
  /** The supervisor's token when the layout names none for the domain (`supervisor.tokenEnv`/`tokenFile`). */
  HARU_SUPERVISOR_TOKEN: blankable(z.string().trim().min(1).optional()),
  /** A file holding HARU_SUPERVISOR_TOKEN (trimmed); one of the two. */
  HARU_SUPERVISOR_TOKEN_FILE: optionalPath,
  /** HTTPS for the simulated supervisor: its certificate and key (both or neither). */
  HARU_SUPERVISOR_TLS_CERT_FILE: optionalPath,
  HARU_SUPERVISOR_TLS_KEY_FILE: optionalPath,
  /** mTLS: the supervisor requires client certificates from this CA. */
  HARU_SUPERVISOR_TLS_CLIENT_CA_FILE: optionalPath,
  /** The client certificate the simulator's own start-up checks present when the supervisor requires one. */
  HARU_SUPERVISOR_CLIENT_CERT_FILE: optionalPath,
  HARU_SUPERVISOR_CLIENT_KEY_FILE: optionalPath,
});
export type SimEnv = z.infer<typeof simEnvSchema>;

/**
 * A simulated supervisor's HTTPS: its certificate and key and, to require client certificates (mTLS) like the
 * real one, the CA they must come from, with the client certificate the simulator's own start-up checks present.
 */
export interface SimSupervisorTls {
  certFile: string;
  keyFile: string;
  clientCaFile?: string;
  clientCertFile?: string;
  clientKeyFile?: string;
}

/** The TLS settings of `haru sim domain` from its parsed environment; undefined without a certificate. */
export function simSupervisorTls(env: SimEnv): SimSupervisorTls | undefined {
  const certFile = env.HARU_SUPERVISOR_TLS_CERT_FILE;
  const keyFile = env.HARU_SUPERVISOR_TLS_KEY_FILE;
  const clientCaFile = env.HARU_SUPERVISOR_TLS_CLIENT_CA_FILE;
  // Anything half-set is the supervisor's to refuse at start, naming the variable: pass it on as given.
  if (!certFile && !keyFile && !clientCaFile) return undefined;
  return {
    certFile: certFile ?? '',
    keyFile: keyFile ?? '',
    clientCaFile,
    clientCertFile: env.HARU_SUPERVISOR_CLIENT_CERT_FILE,
    clientKeyFile: env.HARU_SUPERVISOR_CLIENT_KEY_FILE,
  };
}
