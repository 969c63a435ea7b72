/**
 * A TLS handshake with the Temporal frontend before any SDK connection, so that a wrong CA, a wrong server
 * name or a missing client certificate is reported naming the setting to fix. The SDK's own errors name
 * none: the worker's core prints a Rust transport error, the client only "Failed to connect before the
 * deadline".
 */
import tls from 'node:tls';
import { isIP } from 'node:net';
import { ConfigError } from '../schemas/env';
import type { TemporalSettings } from './config';

/** HTTP/2 client preface and an empty SETTINGS frame: a gRPC server answers with its own SETTINGS. */
const H2_PREFACE = Buffer.concat([
  Buffer.from('PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n'),
  Buffer.from([0, 0, 0, 4, 0, 0, 0, 0, 0]),
]);

const CA_CODES = new Set([
  'UNABLE_TO_VERIFY_LEAF_SIGNATURE',
  'UNABLE_TO_GET_ISSUER_CERT',
  'UNABLE_TO_GET_ISSUER_CERT_LOCALLY',
  'SELF_SIGNED_CERT_IN_CHAIN',
  'DEPTH_ZERO_SELF_SIGNED_CERT',
  'CERT_UNTRUSTED',
  'CERT_HAS_EXPIRED',
]);

/** The outcome of the check: `unreachable` is an outage, not a setting, and is left to the SDK to report. */
export type TemporalTlsCheck = { ok: true } | { ok: false; unreachable: true; reason: string };

const splitAddress = (address: string): { host: string; port: number } => {
  const at = address.lastIndexOf(':');
  const host = address.slice(0, at).replace(/^\[(.*)\]$/, '$1');
  return { host, port: Number(address.slice(at + 1)) };
};

/**
 * Shakes hands with the frontend as the SDK would (same CA, server name, client certificate, ALPN h2) and
 * waits for the server's first HTTP/2 frame, which arrives only once a server that requires a client
 * certificate has accepted ours. Throws ConfigError naming the setting when TLS itself is misconfigured;
 * resolves `unreachable` when nothing answers. Does nothing when TLS is off.
 */
export async function checkTemporalTls(settings: TemporalSettings, timeoutMs = 10_000): Promise<TemporalTlsCheck> {
  const opts = settings.connection.tls;
  if (!opts) return { ok: true };
  const conf = opts === true ? {} : opts;
  const origins = settings.tlsOrigins ?? {};
  const { host, port } = splitAddress(settings.address);
  const servername = conf.serverNameOverride ?? (isIP(host) ? undefined : host);
  const where = `Temporal at ${settings.address}`;
  const caSetting = origins.serverCa ?? 'TEMPORAL_TLS_SERVER_CA_CERT_PATH (unset: the system CAs)';
  const result = await new Promise<{ ok: true } | { ok: false; code: string; message: string }>((resolve) => {
    const socket = tls.connect({
      host,
      port,
      servername,
      ca: conf.serverRootCACertificate ? [Buffer.from(conf.serverRootCACertificate)] : undefined,
      cert: conf.clientCertPair ? Buffer.from(conf.clientCertPair.crt) : undefined,
      key: conf.clientCertPair ? Buffer.from(conf.clientCertPair.key) : undefined,
      ALPNProtocols: ['h2'],
      // The server name is checked below with the variable named; Node would only say "altname invalid".
      checkServerIdentity: () => undefined,
    });
    let handshaken = false;
    const finish = (r: { ok: true } | { ok: false; code: string; message: string }) => {
      socket.destroy();
      resolve(r);
    };
    socket.setTimeout(timeoutMs, () =>
      finish({ ok: false, code: 'ETIMEDOUT', message: `no answer in ${timeoutMs} ms` }),
    );
    socket.once('secureConnect', () => {
      handshaken = true;
      const peer = socket.getPeerCertificate();
      const nameError = tls.checkServerIdentity(servername ?? host, peer);
      if (nameError) return finish({ ok: false, code: 'ERR_TLS_CERT_ALTNAME_INVALID', message: nameError.message });
      if (socket.alpnProtocol !== 'h2') {
        return finish({ ok: false, code: 'NO_ALPN_H2', message: 'the TLS endpoint does not offer HTTP/2 (ALPN h2)' });
      }
      socket.write(H2_PREFACE);
    });
    socket.once('data', () => finish({ ok: true }));
    socket.once('error', (err: NodeJS.ErrnoException) =>
      // A reset right after the handshake is a server refusing our client certificate, not an outage.
      finish({
        ok: false,
        code: handshaken && err.code === 'ECONNRESET' ? 'CLOSED' : (err.code ?? ''),
        message: err.message,
      }),
    );
    socket.once('close', () =>
      finish({ ok: false, code: 'CLOSED', message: 'the server closed the connection after the TLS handshake' }),
    );
  });
  if (result.ok) return result;
  const { code, message } = result;
  if (['ECONNREFUSED', 'ENOTFOUND', 'EAI_AGAIN', 'EHOSTUNREACH', 'ETIMEDOUT', 'ECONNRESET'].includes(code)) {
    return { ok: false, unreachable: true, reason: `${code}: ${message}` };
  }
  if (CA_CODES.has(code)) {
    throw new ConfigError(`${where}: the server's certificate is not trusted (${code}); check ${caSetting}`);
  }
  if (code === 'ERR_TLS_CERT_ALTNAME_INVALID') {
    const nameSetting = origins.serverName ?? 'TEMPORAL_TLS_SERVER_NAME (unset: the host of TEMPORAL_ADDRESS)';
    throw new ConfigError(
      `${where}: the server's certificate does not match the name ${servername ?? host}; check ${nameSetting}`,
    );
  }
  const clientCertRejected = /CERTIFICATE_REQUIRED|HANDSHAKE_FAILURE|BAD_CERTIFICATE|UNKNOWN_CA|CLOSED/.test(code);
  if (clientCertRejected && !origins.clientCert) {
    throw new ConfigError(
      `${where} requires a client certificate (${code}); set TEMPORAL_TLS_CLIENT_CERT_PATH and TEMPORAL_TLS_CLIENT_KEY_PATH`,
    );
  }
  if (clientCertRejected) {
    throw new ConfigError(`${where} rejected the client certificate of ${origins.clientCert} (${code})`);
  }
  if (/WRONG_VERSION_NUMBER|PACKET_LENGTH_TOO_LONG/.test(code)) {
    throw new ConfigError(`${where} does not speak TLS (${code}); unset the TLS settings or set TEMPORAL_TLS=false`);
  }
  throw new ConfigError(`${where}: TLS handshake failed (${code || message}); check the TEMPORAL_TLS_* settings`);
}
