import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { eventually } from './eventually';
import type { TestPki } from './pki';
import { freePort } from './ports';

/**
 * The TLS terminator in front of the Temporal dev server. HAProxy (Debian `haproxy`), not stunnel: the
 * SDK's Rust core insists on ALPN `h2`, which stunnel cannot negotiate (`H2NotNegotiated`).
 */
export const TLS_TERMINATOR_BIN = 'haproxy';

/** Whether the terminator is installed (`apt-get install -y haproxy`). */
export const hasTlsTerminator = (): boolean => spawnSync(TLS_TERMINATOR_BIN, ['-v']).status === 0;

export interface TlsTerminator {
  /** host:port serving TLS only (server certificate of the test PKI). */
  tlsAddress: string;
  /** host:port serving TLS that also requires a client certificate signed by the test CA. */
  mtlsAddress: string;
  stop(): Promise<void>;
}

const accepts = (port: number) =>
  new Promise<boolean>((resolve) => {
    const socket = net.connect(port, '127.0.0.1');
    socket.once('connect', () => resolve(true));
    socket.once('error', () => resolve(false));
    socket.setTimeout(1_000, () => resolve(false));
  }).then((ok) => ok);

/** Starts HAProxy with a TLS and an mTLS front, both forwarding raw TCP to `backend` (host:port). */
export async function startTlsTerminator(pki: TestPki, backend: string): Promise<TlsTerminator> {
  const [tlsPort, mtlsPort] = [await freePort(), await freePort()];
  const bundle = path.join(pki.dir, 'server.bundle.pem');
  writeFileSync(bundle, readFileSync(pki.server.cert, 'utf8') + readFileSync(pki.server.key, 'utf8'));
  const config = path.join(pki.dir, 'haproxy.cfg');
  writeFileSync(
    config,
    [
      'defaults',
      '  mode tcp',
      '  timeout connect 5s',
      '  timeout client 1h',
      '  timeout server 1h',
      'frontend tls',
      `  bind 127.0.0.1:${tlsPort} ssl crt ${bundle} alpn h2`,
      '  default_backend temporal',
      'frontend mtls',
      `  bind 127.0.0.1:${mtlsPort} ssl crt ${bundle} alpn h2 ca-file ${pki.ca} verify required`,
      '  default_backend temporal',
      'backend temporal',
      `  server temporal ${backend}`,
      '',
    ].join('\n'),
  );
  const child: ChildProcess = spawn(TLS_TERMINATOR_BIN, ['-f', config, '-db'], { stdio: ['ignore', 'ignore', 'pipe'] });
  let stderr = '';
  child.stderr?.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  await eventually(`haproxy listening on ${tlsPort} and ${mtlsPort}`, async () => {
    if (child.exitCode !== null) throw new Error(`haproxy exited: ${stderr}`);
    return (await accepts(tlsPort)) && (await accepts(mtlsPort));
  });
  return {
    tlsAddress: `127.0.0.1:${tlsPort}`,
    mtlsAddress: `127.0.0.1:${mtlsPort}`,
    async stop() {
      if (child.exitCode === null) child.kill('SIGTERM');
      await exited;
    },
  };
}
