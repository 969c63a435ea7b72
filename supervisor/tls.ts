/**
 * The supervisor's HTTPS settings: a certificate and key (HARU_SUPERVISOR_TLS_CERT_FILE, …_KEY_FILE) and,
 * for mTLS, the CA whose client certificates it accepts (HARU_SUPERVISOR_TLS_CLIENT_CA_FILE).
 */
import type { IncomingMessage, RequestListener, ServerResponse } from 'node:http';
import type { ServerOptions } from 'node:https';
import type { TLSSocket } from 'node:tls';
import { ConfigError } from '../schemas/env';
import { ErrorCode, HaruError } from '../schemas/errors';
import { readServerCertificate, type ServerCertificateFiles } from '../lib/server-tls';
import { readConfigFile as read } from './secret-file';

/** The variables read here (validated as optional strings by the supervisor's env schema). */
export interface SupervisorTlsEnv {
  HARU_SUPERVISOR_TLS_CERT_FILE?: string;
  HARU_SUPERVISOR_TLS_KEY_FILE?: string;
  HARU_SUPERVISOR_TLS_CLIENT_CA_FILE?: string;
}

/** The supervisor's certificate and key files, named by their variables. */
export const supervisorCertificateFiles = (cert: string, key: string): ServerCertificateFiles => ({
  cert: { setting: 'HARU_SUPERVISOR_TLS_CERT_FILE', file: cert },
  key: { setting: 'HARU_SUPERVISOR_TLS_KEY_FILE', file: key },
});

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
  return {
    ...readServerCertificate(supervisorCertificateFiles(certFile, keyFile), (m) => new ConfigError(m)),
    // The handshake asks for a client certificate and verifies it, but does not end the connection without one:
    // requireClientCertificate answers such a request 401 with what to set, as nginx's `ssl_verify_client on`
    // answers 400, where an aborted handshake would reach the worker as a bare "other side closed".
    ...(caFile && {
      ca: read('HARU_SUPERVISOR_TLS_CLIENT_CA_FILE', caFile),
      requestCert: true,
      rejectUnauthorized: false,
    }),
  };
}

/**
 * Wraps the app of a supervisor that requires client certificates (mTLS): a request on a connection whose
 * client certificate is missing or not from HARU_SUPERVISOR_TLS_CLIENT_CA_FILE gets 401 `unauthorized` naming the
 * caller's settings, before any route (`/healthz` included) sees it.
 */
export function requireClientCertificate(app: RequestListener): RequestListener {
  return (req: IncomingMessage, res: ServerResponse) => {
    const socket = req.socket as TLSSocket;
    if (socket.authorized) return app(req, res);
    const presented = Object.keys(socket.getPeerCertificate?.() ?? {}).length > 0;
    const message = presented
      ? `the client certificate is not from this supervisor's client CA (${String(socket.authorizationError)}): ` +
        'HARU_SUPERVISOR_CLIENT_CERT_FILE must hold one its HARU_SUPERVISOR_TLS_CLIENT_CA_FILE issued'
      : 'this supervisor requires a client certificate (mTLS) and none was presented: set ' +
        'HARU_SUPERVISOR_CLIENT_CERT_FILE and HARU_SUPERVISOR_CLIENT_KEY_FILE where the caller runs';
    const refusal = new HaruError(ErrorCode.unauthorized, message);
    res.writeHead(refusal.status, { 'content-type': 'application/json', connection: 'close' });
    res.end(JSON.stringify(refusal.toBody()));
  };
}
