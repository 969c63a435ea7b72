/**
 * `haru api` over HTTPS (HARU_API_TLS_CERT_FILE, HARU_API_TLS_KEY_FILE), as main.ts starts it, with real
 * certificates: it answers only TLS with the configured certificate, serves a renewed certificate without a
 * restart, and keeps the one in force when a renewal does not load. Bad settings stop the start.
 */
import { X509Certificate } from 'node:crypto';
import { chmodSync, copyFileSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import tls from 'node:tls';
import { Agent, fetch as undiciFetch } from 'undici';
import { type RunningApi, startApi } from '../../api/main';
import { createTestDatabase, type TestDatabase } from '../../db/testing';
import { createTestPki, type TestPki } from '../support/pki';
import { eventually } from '../support/eventually';
import { freePort } from '../support/ports';

jest.setTimeout(60_000);

/** The fingerprint of the certificate the server at `url` presents, verified against `ca`. */
function servedFingerprint(url: string, ca: string): Promise<string> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve, reject) => {
    const socket = tls.connect({ host: hostname, port: Number(port), ca: readFileSync(ca), servername: 'localhost' });
    socket.once('secureConnect', () => {
      resolve(socket.getPeerX509Certificate()!.fingerprint256);
      socket.end();
    });
    socket.once('error', reject);
  });
}
const fingerprintOf = (cert: string) => new X509Certificate(readFileSync(cert)).fingerprint256;

describe('the API over HTTPS', () => {
  let db: TestDatabase;
  let first: TestPki;
  let renewed: TestPki;
  let dir: string;
  let api: RunningApi | undefined;
  const certFile = () => path.join(dir, 'tls.crt');
  const keyFile = () => path.join(dir, 'tls.key');
  const install = (pki: TestPki) => {
    copyFileSync(pki.server.cert, certFile());
    copyFileSync(pki.server.key, keyFile());
  };
  const env = async (extra: Record<string, string> = {}) => ({
    DATABASE_URL: db.url,
    HOST: '127.0.0.1',
    PORT: '0',
    TEMPORAL_ADDRESS: `127.0.0.1:${await freePort()}`,
    HARU_API_TOKEN: 'tls-token',
    HARU_API_TLS_CERT_FILE: certFile(),
    HARU_API_TLS_KEY_FILE: keyFile(),
    LOG_LEVEL: 'warn',
    ...extra,
  });

  beforeAll(async () => {
    db = await createTestDatabase({ max: 2 });
    first = createTestPki();
    renewed = createTestPki();
    dir = mkdtempSync(path.join(os.tmpdir(), 'haru-api-tls-'));
    writeFileSync(keyFile(), '', { mode: 0o600 });
    install(first);
  });
  afterAll(async () => {
    await api?.close();
    await db?.drop();
    for (const d of [dir, first?.dir, renewed?.dir]) if (d) rmSync(d, { recursive: true, force: true });
  });

  it('answers HTTPS with its certificate, not plain HTTP, and serves a renewed certificate without a restart', async () => {
    // The API's log lines (stdout): a reload that failed is said there.
    const written: string[] = [];
    const write = process.stdout.write.bind(process.stdout) as (...args: unknown[]) => boolean;
    jest.spyOn(process.stdout, 'write').mockImplementation(((chunk: string | Uint8Array, ...rest: unknown[]) => {
      written.push(String(chunk));
      return write(chunk, ...rest);
    }) as typeof process.stdout.write);
    api = await startApi(await env());
    expect(api.url).toMatch(/^https:\/\/127\.0\.0\.1:\d+$/);
    const agent = new Agent({ connect: { ca: readFileSync(first.ca), servername: 'localhost' } });
    const res = await undiciFetch(`${api.url}/v1/fleets`, {
      dispatcher: agent,
      headers: { authorization: 'Bearer tls-token' },
    });
    expect(res.status).toBe(200);
    await agent.close();
    expect(await servedFingerprint(api.url, first.ca)).toBe(fingerprintOf(first.server.cert));
    const plain = await fetch(api.url.replace('https:', 'http:') + '/healthz').then(
      (r) => r.status,
      (err: Error) => err.message,
    );
    expect(plain).not.toBe(200);

    // A renewal that does not load (a key of another certificate) leaves the one in force, and says so.
    copyFileSync(renewed.server.key, keyFile());
    await eventually('the failed reload said', () => written.join('').includes('api certificate not reloaded'));
    expect(await servedFingerprint(api.url, first.ca)).toBe(fingerprintOf(first.server.cert));

    // The whole renewal: new connections get the new certificate.
    copyFileSync(renewed.server.cert, certFile());
    await eventually(
      'the renewed certificate',
      async () =>
        (await servedFingerprint(api!.url, renewed.ca).catch(() => null)) === fingerprintOf(renewed.server.cert),
    );
  });

  it('refuses to start with one file of the two, or a key others may read, naming the variable', async () => {
    await expect(startApi({ ...(await env()), HARU_API_TLS_KEY_FILE: '' })).rejects.toThrow(
      'HARU_API_TLS_CERT_FILE and HARU_API_TLS_KEY_FILE go together: set both',
    );
    const readable = path.join(dir, 'readable.key');
    copyFileSync(first.server.key, readable);
    chmodSync(readable, 0o644);
    await expect(startApi({ ...(await env()), HARU_API_TLS_KEY_FILE: readable })).rejects.toThrow(
      /HARU_API_TLS_KEY_FILE/,
    );
  });
});
