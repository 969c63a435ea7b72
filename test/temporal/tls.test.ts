/**
 * The worker and the API reach Temporal only through a real TLS terminator (HAProxy with certificates made
 * here by openssl) in front of the run's dev server: TLS with a private CA, mTLS with a client certificate,
 * and the bad settings that must stop them at start naming the setting.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { composeApi } from '../../api/compose';
import { loadApiConfig } from '../../api/config';
import { silentLogger } from '../../lib/logger';
import { createTestDatabase, type TestDatabase } from '../../db/testing';
import { ConfigError } from '../../schemas/env';
import { createTestPki, type TestPki } from '../support/pki';
import {
  hasTlsTerminator,
  startTlsTerminator,
  TLS_TERMINATOR_BIN,
  type TlsTerminator,
} from '../support/tls-terminator';
import { startWorkerProcess } from '../support/worker-process';
import { quietRuntime } from '../workflows/support/temporal';

const available = hasTlsTerminator();
if (!available) {
  console.warn(`skipped: ${TLS_TERMINATOR_BIN} is not installed (apt-get install -y haproxy)`);
}
const describeTls = available ? describe : describe.skip;

describeTls('Temporal through TLS', () => {
  let pki: TestPki;
  let front: TlsTerminator;
  let db: TestDatabase;

  beforeAll(async () => {
    quietRuntime();
    pki = createTestPki();
    front = await startTlsTerminator(pki, process.env.TEMPORAL_TEST_ADDRESS!);
    db = await createTestDatabase();
  });
  afterAll(async () => {
    await db?.drop();
    await front?.stop();
  });

  const tlsEnv = () => ({ TEMPORAL_ADDRESS: front.tlsAddress, TEMPORAL_TLS_SERVER_CA_CERT_PATH: pki.ca });
  const mtlsEnv = () => ({
    TEMPORAL_ADDRESS: front.mtlsAddress,
    TEMPORAL_TLS_SERVER_CA_CERT_PATH: pki.ca,
    TEMPORAL_TLS_CLIENT_CERT_PATH: pki.client.cert,
    TEMPORAL_TLS_CLIENT_KEY_PATH: pki.client.key,
  });
  const startWorker = (env: NodeJS.ProcessEnv) =>
    startWorkerProcess({ databaseUrl: db.url, taskQueue: `tls-${Math.random().toString(36).slice(2)}`, env });

  /** The API as `haru api` composes it, from `env`; resolves with its /readyz status (Temporal is pinged). */
  async function apiReadyz(env: NodeJS.ProcessEnv): Promise<{ status: number; body: unknown }> {
    const config = loadApiConfig({ HARU_TASK_QUEUE: 'tls-api', ...env });
    const composed = await composeApi({ database: db.database, config, logger: silentLogger, connectTimeoutMs: 5_000 });
    const server = http.createServer(composed.api.handle);
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    try {
      const { port } = server.address() as AddressInfo;
      const res = await fetch(`http://127.0.0.1:${port}/readyz`);
      return { status: res.status, body: await res.json() };
    } finally {
      await new Promise<void>((resolve) => server.close(() => resolve()));
      await composed.close();
    }
  }

  it('runs the worker through TLS verified against the private CA', async () => {
    const worker = await startWorker(tlsEnv());
    expect(worker.ready).toMatchObject({ temporal: front.tlsAddress });
    await worker.stop();
  }, 120_000);

  it('runs the worker through mTLS with its client certificate', async () => {
    const worker = await startWorker(mtlsEnv());
    expect(worker.ready).toMatchObject({ temporal: front.mtlsAddress });
    await worker.stop();
  }, 120_000);

  it('serves the API with Temporal reachable through TLS and through mTLS', async () => {
    await expect(apiReadyz(tlsEnv())).resolves.toMatchObject({ status: 200 });
    await expect(apiReadyz(mtlsEnv())).resolves.toMatchObject({ status: 200 });
  });

  it('reads the same settings from a profile of the Temporal config file', async () => {
    const file = path.join(pki.dir, 'temporal.toml');
    writeFileSync(
      file,
      [
        '[profile.prod]',
        `address = "${front.mtlsAddress}"`,
        '[profile.prod.tls]',
        `server_ca_cert_path = "${pki.ca}"`,
        `client_cert_path = "${pki.client.cert}"`,
        `client_key_path = "${pki.client.key}"`,
        '',
      ].join('\n'),
    );
    await expect(apiReadyz({ TEMPORAL_CONFIG_FILE: file, TEMPORAL_PROFILE: 'prod' })).resolves.toMatchObject({
      status: 200,
    });
  });

  it('stops the worker at start naming the CA setting when the server is signed by another CA', async () => {
    await expect(startWorker({ ...tlsEnv(), TEMPORAL_TLS_SERVER_CA_CERT_PATH: pki.otherCa })).rejects.toThrow(
      /exited during start-up[\s\S]*not trusted[\s\S]*TEMPORAL_TLS_SERVER_CA_CERT_PATH/,
    );
  }, 120_000);

  it('stops the worker at start naming the client certificate settings when mTLS gets none', async () => {
    const { TEMPORAL_TLS_CLIENT_CERT_PATH: _cert, TEMPORAL_TLS_CLIENT_KEY_PATH: _key, ...withoutCert } = mtlsEnv();
    await expect(startWorker(withoutCert)).rejects.toThrow(
      /exited during start-up[\s\S]*requires a client certificate[\s\S]*TEMPORAL_TLS_CLIENT_CERT_PATH/,
    );
  }, 120_000);

  it('stops the API at start naming the setting (wrong CA, no client certificate, missing file)', async () => {
    const wrongCa = apiReadyz({ ...tlsEnv(), TEMPORAL_TLS_SERVER_CA_CERT_PATH: pki.otherCa });
    await expect(wrongCa).rejects.toThrow(ConfigError);
    await expect(wrongCa).rejects.toThrow(/TEMPORAL_TLS_SERVER_CA_CERT_PATH/);
    const noCert = apiReadyz({ TEMPORAL_ADDRESS: front.mtlsAddress, TEMPORAL_TLS_SERVER_CA_CERT_PATH: pki.ca });
    await expect(noCert).rejects.toThrow(/requires a client certificate.*TEMPORAL_TLS_CLIENT_CERT_PATH/);
    const missing = apiReadyz({ ...tlsEnv(), TEMPORAL_TLS_SERVER_CA_CERT_PATH: path.join(pki.dir, 'nope.pem') });
    await expect(missing).rejects.toThrow(/^TEMPORAL_TLS_SERVER_CA_CERT_PATH: cannot read .*nope\.pem \(ENOENT\)/);
  });

  it('names the server-name setting when the certificate is for another name', async () => {
    await expect(apiReadyz({ ...tlsEnv(), TEMPORAL_TLS_SERVER_NAME: 'temporal.example' })).rejects.toThrow(
      /does not match the name temporal\.example; check TEMPORAL_TLS_SERVER_NAME/,
    );
  });
});
