/**
 * A real supervisor serving HTTPS with certificates from a test CA, and requiring client certificates
 * (mTLS), called by the worker's supervisor client; and the key-file and pairing rules that stop it at start.
 */
import { chmodSync, copyFileSync, readFileSync } from 'node:fs';
import { Agent, fetch as undiciFetch } from 'undici';
import path from 'node:path';
import { createSupervisorAccess, type SupervisorTarget } from '../../clients/supervisor-access';
import { createSupervisorClient } from '../../activities/supervisor-client';
import { loadSupervisorClientTls } from '../../clients/supervisor-tls';
import { ConfigError } from '../../schemas/env';
import { FailureType } from '../../schemas/failures';
import type { SupervisorAccess } from '../../schemas/layout';
import { type RunningSupervisor, startSupervisor } from '../../supervisor/main';
import { createTestPki, type TestPki } from '../support/pki';

const CONFIG = JSON.stringify({ inference: [{ gpuIndex: 0, models: [{ name: 'm', port: 1 }] }] });
const TOKEN = 'tls-test-token';

describe('supervisor over HTTPS', () => {
  let pki: TestPki;
  const running: RunningSupervisor[] = [];
  beforeAll(() => {
    pki = createTestPki();
    chmodSync(pki.server.key, 0o600);
  });
  afterAll(async () => {
    await Promise.all(running.map((s) => s.shutdown(0)));
  });

  const start = async (env: NodeJS.ProcessEnv) => {
    const supervisor = await startSupervisor(
      {
        HARU_SUPERVISOR_CONFIG: CONFIG,
        HARU_SUPERVISOR_TOKEN: TOKEN,
        HARU_SUPERVISOR_HOST: '127.0.0.1',
        PORT: '0',
        HARU_SUPERVISOR_TLS_CERT_FILE: pki.server.cert,
        HARU_SUPERVISOR_TLS_KEY_FILE: pki.server.key,
        ...env,
      },
      { write: () => undefined, warn: () => undefined },
    );
    running.push(supervisor);
    return `https://localhost:${supervisor.port}`;
  };
  const east = (supervisorUrl: string, supervisor?: SupervisorAccess): SupervisorTarget => ({
    slug: 'east',
    supervisorUrl,
    supervisor,
  });
  const client = (env: Parameters<typeof loadSupervisorClientTls>[0]) =>
    createSupervisorClient({ token: TOKEN, tls: loadSupervisorClientTls(env), defaultTimeoutMs: 5_000 });

  it('serves HTTPS that the worker verifies against the CA in HARU_SUPERVISOR_CA_FILE', async () => {
    const url = await start({});
    await expect(client({ HARU_SUPERVISOR_CA_FILE: pki.ca }).status(east(url))).resolves.toHaveProperty('models');
    // A wrong CA names the setting the certificate was checked against.
    await expect(client({ HARU_SUPERVISOR_CA_FILE: pki.otherCa }).status(east(url))).rejects.toThrow(
      /certificate.*; the certificate was checked against HARU_SUPERVISOR_CA_FILE \(else the system CAs\) under the name the host of https:\/\/localhost/i,
    );
    await expect(client({}).status(east(url.replace('https:', 'http:')))).rejects.toThrow();
  });

  it("verifies a domain's supervisor against the CA its layout names, over the fleet-wide one", async () => {
    const url = await start({});
    // The fleet-wide CA is the wrong one: only the domain's own caFile lets the handshake pass.
    const fleet = createSupervisorClient({
      access: createSupervisorAccess({
        token: TOKEN,
        tls: loadSupervisorClientTls({ HARU_SUPERVISOR_CA_FILE: pki.otherCa }),
      }),
      defaultTimeoutMs: 5_000,
    });
    await expect(fleet.status(east(url, { caFile: pki.ca }))).resolves.toHaveProperty('models');
    await expect(fleet.status(east(url))).rejects.toThrow(/certificate/i);
    await expect(fleet.status(east(url, { caFile: pki.otherCa }))).rejects.toThrow(
      /checked against domain east: supervisor\.caFile \(.*other-ca\.pem\)/,
    );
    const missing = await fleet.status(east(url, { caFile: '/nope.pem' })).catch((err: unknown) => err);
    expect(missing).toMatchObject({
      type: FailureType.SupervisorMisconfigured,
      nonRetryable: true,
      message: 'domain east: supervisor.caFile: cannot read /nope.pem (ENOENT)',
    });
  });

  it("verifies the certificate under the domain's serverName, whatever address it is reached at", async () => {
    // The test certificate names localhost and 127.0.0.1; reached at 127.0.0.1, the name checked is serverName's.
    const url = (await start({})).replace('localhost', '127.0.0.1');
    const fleet = createSupervisorClient({
      access: createSupervisorAccess({
        token: TOKEN,
        tls: loadSupervisorClientTls({ HARU_SUPERVISOR_CA_FILE: pki.ca }),
      }),
      defaultTimeoutMs: 5_000,
    });
    await expect(fleet.status(east(url, { serverName: 'localhost' }))).resolves.toHaveProperty('models');
    await expect(fleet.status(east(url, { serverName: 'west.gpu.example.com' }))).rejects.toThrow(
      /ERR_TLS_CERT_ALTNAME_INVALID.*west\.gpu\.example\.com.*under the name domain east: supervisor\.serverName/,
    );
  });

  it('requires a client certificate from the CA in HARU_SUPERVISOR_TLS_CLIENT_CA_FILE (mTLS)', async () => {
    const url = await start({ HARU_SUPERVISOR_TLS_CLIENT_CA_FILE: pki.ca });
    const withCert = client({
      HARU_SUPERVISOR_CA_FILE: pki.ca,
      HARU_SUPERVISOR_CLIENT_CERT_FILE: pki.client.cert,
      HARU_SUPERVISOR_CLIENT_KEY_FILE: pki.client.key,
    });
    await expect(withCert.status(east(url))).resolves.toHaveProperty('models');
    // Without a client certificate, or with one from another CA, the caller is told what to set, not "socket closed".
    await expect(client({ HARU_SUPERVISOR_CA_FILE: pki.ca }).status(east(url))).rejects.toMatchObject({
      type: FailureType.Unauthorized,
      nonRetryable: true,
      message: expect.stringMatching(
        /requires a client certificate \(mTLS\) and none was presented: set HARU_SUPERVISOR_CLIENT_CERT_FILE/,
      ),
    });
    const foreign = createTestPki();
    const foreignCert = client({
      HARU_SUPERVISOR_CA_FILE: pki.ca,
      HARU_SUPERVISOR_CLIENT_CERT_FILE: foreign.client.cert,
      HARU_SUPERVISOR_CLIENT_KEY_FILE: foreign.client.key,
    });
    await expect(foreignCert.status(east(url))).rejects.toMatchObject({
      type: FailureType.Unauthorized,
      message: expect.stringMatching(/client certificate is not from this supervisor's client CA/),
    });
    // /healthz, open without a token, is behind the client certificate too.
    const trusting = new Agent({ connect: { ca: readFileSync(pki.ca) } });
    const health = await undiciFetch(`${url}/healthz`, { dispatcher: trusting });
    expect(health.status).toBe(401);
    await trusting.close();
  });

  it('refuses at start a key file readable by others, a certificate without its key, a missing file', async () => {
    const loose = path.join(pki.dir, 'loose.key');
    copyFileSync(pki.server.key, loose);
    chmodSync(loose, 0o644);
    const started = start({ HARU_SUPERVISOR_TLS_KEY_FILE: loose });
    await expect(started).rejects.toThrow(ConfigError);
    await expect(started).rejects.toThrow(
      /^HARU_SUPERVISOR_TLS_KEY_FILE: .*loose\.key is open to group or others \(mode 0644\)/,
    );
    await expect(start({ HARU_SUPERVISOR_TLS_KEY_FILE: '' })).rejects.toThrow(/set both/);
    await expect(start({ HARU_SUPERVISOR_TLS_CERT_FILE: '/nope.pem' })).rejects.toThrow(
      /^HARU_SUPERVISOR_TLS_CERT_FILE: cannot read \/nope\.pem \(ENOENT\)/,
    );
    expect(() => loadSupervisorClientTls({ HARU_SUPERVISOR_CA_FILE: '/nope.pem' })).toThrow(
      /^HARU_SUPERVISOR_CA_FILE: cannot read \/nope\.pem/,
    );
  });
});
