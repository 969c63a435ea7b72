/**
 * The GPU host's gateway (deploy/nginx/haru-gpu-host.conf) run by the real nginx in front of a real simulated
 * domain, over TLS with a certificate from a throwaway CA: inference with the key and the supervisor's API
 * pass; inference without it, vLLM's admin endpoints and plain HTTP do not. The shipped file is used as it is, with only its addresses, ports and
 * paths swapped for the test's (each swap checked, so the file cannot drift from what is tested).
 */
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import os from 'node:os';
import path from 'node:path';
import { Agent, request } from 'undici';
import { createSupervisorClient } from '../../activities/supervisor-client';
import { INFERENCE_ENDPOINTS, upstreamUrl } from '../../core/serving-url';
import { fleetLayoutSchema } from '../../schemas/layout';
import { type SimDomain, startSimDomain } from '../../sim/domain';
import { eventually } from '../support/eventually';
import { freePort } from '../support/ports';
import { writeNginxMain } from '../support/nginx';
import { describeWithTools, NGINX, OPENSSL } from '../support/tools';

const ROOT = path.resolve(__dirname, '../..');
/** The shipped config without its comments (which name the same paths). */
const SHIPPED = readFileSync(path.join(ROOT, 'deploy/nginx/haru-gpu-host.conf'), 'utf8').replace(/^\s*#.*\n/gm, '');
const TOKEN = 'gateway-test-token';
/** The key Haru's proxy sends to the models through the gateway (a model's `upstreamAuth`), made as documented. */
const INFERENCE_KEY = randomBytes(32).toString('hex');
// Real processes (a simulated domain, nginx, the launcher and its servers) start and stop: generous on a
// loaded machine.
jest.setTimeout(120_000);

/** Replaces `from` (which must occur exactly `times` times) in the shipped config. */
function swap(text: string, from: string, to: string, times = 1): string {
  const found = text.split(from).length - 1;
  if (found !== times)
    throw new Error(`deploy/nginx/haru-gpu-host.conf has "${from}" ${found} times, expected ${times}`);
  return text.split(from).join(to);
}

/** A CA and a server certificate for localhost/127.0.0.1 signed by it, made by the real openssl. */
function makeCertificates(dir: string): { ca: string; cert: string; key: string } {
  const openssl = (...args: string[]) => execFileSync('openssl', args, { cwd: dir, stdio: 'pipe' });
  const ec = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes'];
  openssl('req', '-x509', ...ec, '-keyout', 'ca.key', '-out', 'ca.pem', '-days', '2', '-subj', '/CN=Haru test CA');
  openssl('req', ...ec, '-keyout', 'server.key', '-out', 'server.csr', '-subj', '/CN=localhost');
  writeFileSync(path.join(dir, 'san.ext'), 'subjectAltName=DNS:localhost,IP:127.0.0.1\n');
  openssl(
    ...['x509', '-req', '-in', 'server.csr', '-CA', 'ca.pem', '-CAkey', 'ca.key', '-CAcreateserial'],
    ...['-out', 'server.pem', '-days', '2', '-extfile', 'san.ext'],
  );
  return { ca: path.join(dir, 'ca.pem'), cert: path.join(dir, 'server.pem'), key: path.join(dir, 'server.key') };
}

describeWithTools('nginx gateway of a static GPU host', [NGINX, OPENSSL], () => {
  let dir: string;
  let domain: SimDomain | undefined;
  let nginx: ChildProcess | undefined;
  let nginxExited: Promise<unknown>;
  let https: Agent;
  let caPem: Buffer;
  let base: string;
  let httpBase: string;
  const models = { alpha: 0, beta: 0 };

  beforeAll(async () => {
    dir = mkdtempSync(path.join(os.tmpdir(), 'haru-gateway-'));
    const [supervisorPort, httpsPort, httpPort, alphaPort, betaPort] = await Promise.all(
      Array.from({ length: 5 }, () => freePort()),
    );
    Object.assign(models, { alpha: alphaPort!, beta: betaPort! });
    const layout = fleetLayoutSchema.parse({
      fleet: { slug: 'gateway', activeDomain: 'host' },
      domains: [
        {
          slug: 'host',
          supervisorUrl: `http://127.0.0.1:${supervisorPort}`,
          slots: [
            {
              kind: 'inference',
              gpuIndex: 0,
              models: Object.entries(models).map(([name, port]) => ({ name, servingUrl: `http://127.0.0.1:${port}` })),
            },
          ],
        },
      ],
    });
    domain = await startSimDomain({
      layout,
      domainSlug: 'host',
      stateDir: path.join(dir, 'sim'),
      supervisorToken: TOKEN,
    });

    const certs = makeCertificates(dir);
    const mapFile = path.join(dir, 'models.map');
    writeFileSync(
      mapFile,
      Object.entries(models)
        .map(([name, port]) => `${name} ${port};\n`)
        .join(''),
    );
    let site = SHIPPED;
    site = swap(site, 'listen 443 ssl;', `listen 127.0.0.1:${httpsPort} ssl;`);
    site = swap(site, 'listen 80;', `listen 127.0.0.1:${httpPort};`);
    // IPv6 may be off in a container: the test listens on 127.0.0.1 only.
    site = swap(site, 'listen [::]:443 ssl;', '');
    site = swap(site, 'listen [::]:80;', '');
    site = swap(site, '127.0.0.1:8701', `127.0.0.1:${supervisorPort}`, 2);
    site = swap(site, '/etc/haru/tls/fullchain.pem', certs.cert);
    site = swap(site, '/etc/haru/tls/privkey.pem', certs.key);
    site = swap(site, '/etc/haru/nginx/models.map', mapFile);
    const keysFile = path.join(dir, 'inference-keys.map');
    writeFileSync(keysFile, `"Bearer ${INFERENCE_KEY}" 1;\n`);
    site = swap(site, '/etc/haru/nginx/inference-keys.map', keysFile);
    writeFileSync(path.join(dir, 'site.conf'), site);
    // nginx's own main file, with every path it writes under the temp dir: no root needed.
    const { args } = writeNginxMain(dir, `include ${path.join(dir, 'site.conf')};`);
    execFileSync('nginx', ['-t', '-q', ...args], { stdio: 'pipe' });
    nginx = spawn('nginx', args, { stdio: 'ignore' });
    nginxExited = new Promise((resolve) => nginx!.once('exit', resolve));

    caPem = readFileSync(certs.ca);
    https = new Agent({ connect: { ca: caPem } });
    base = `https://localhost:${httpsPort}`;
    httpBase = `http://127.0.0.1:${httpPort}`;
    await eventually('nginx to answer over TLS', async () => {
      const res = await request(`${base}/supervisor/healthz`, { dispatcher: https });
      await res.body.dump();
      return res.statusCode === 200;
    });
  });

  afterAll(async () => {
    if (nginx && nginx.exitCode === null && nginx.signalCode === null) {
      nginx.kill('SIGTERM');
      await nginxExited;
    }
    await domain?.stop();
    await https?.close();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  const call = async (url: string, opts: { method?: 'GET' | 'POST'; body?: unknown; token?: string } = {}) => {
    const res = await request(url, {
      dispatcher: https,
      method: opts.method ?? 'GET',
      headers: {
        ...(opts.body !== undefined ? { 'content-type': 'application/json' } : {}),
        ...(opts.token ? { authorization: `Bearer ${opts.token}` } : {}),
      },
      body: opts.body !== undefined ? JSON.stringify(opts.body) : undefined,
    });
    return { status: res.statusCode, headers: res.headers, text: await res.body.text() };
  };
  const chat = (model: string, extra: object = {}) => ({
    model,
    messages: [{ role: 'user', content: 'hello' }],
    max_tokens: 4,
    ...extra,
  });

  it('serves a chat completion through a servingUrl of the documented shape, built the way Haru’s proxy builds it', async () => {
    for (const name of Object.keys(models)) {
      const url = upstreamUrl(`${base}/models/${name}/v1`, 'chat/completions');
      expect(url).toBe(`${base}/models/${name}/v1/chat/completions`);
      const res = await call(url, { method: 'POST', body: chat(name), token: INFERENCE_KEY });
      expect(res.status).toBe(200);
      const json = JSON.parse(res.text) as { model: string; choices: unknown[] };
      // The map sent each name to its own server.
      expect(json.model).toBe(name);
      expect(json.choices.length).toBeGreaterThan(0);
    }
  });

  it('streams a completion (server-sent events pass through unbuffered) and forwards every inference path', async () => {
    const res = await call(`${base}/models/alpha/v1/chat/completions`, {
      method: 'POST',
      body: chat('alpha', { stream: true }),
      token: INFERENCE_KEY,
    });
    expect(res.status).toBe(200);
    expect(String(res.headers['content-type'])).toMatch(/^text\/event-stream/);
    expect(res.text).toContain('data: [DONE]');
    // Every endpoint Haru's proxy forwards reaches vLLM (whatever vLLM then answers), not the gateway's 404.
    for (const endpoint of INFERENCE_ENDPOINTS) {
      const reached = await call(`${base}/models/alpha/v1/${endpoint}`, {
        method: 'POST',
        body: {},
        token: INFERENCE_KEY,
      });
      // nginx's own refusals are HTML; vLLM answers JSON (here a 400 for the empty body).
      expect([endpoint, reached.headers['content-type']]).toEqual([endpoint, expect.stringMatching(/json/)]);
    }
  });

  it('refuses inference without a key of its map: none, a wrong one, the supervisor’s token, another scheme', async () => {
    const url = `${base}/models/alpha/v1/chat/completions`;
    for (const token of [undefined, 'wrong', TOKEN, `${INFERENCE_KEY}x`, INFERENCE_KEY.slice(0, -1)])
      expect([token, (await call(url, { method: 'POST', body: chat('alpha'), token })).status]).toEqual([token, 401]);
    const basic = await request(url, {
      dispatcher: https,
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Basic ${INFERENCE_KEY}` },
      body: JSON.stringify(chat('alpha')),
    });
    await basic.body.dump();
    expect(basic.statusCode).toBe(401);
    // The key passes; a model the host does not serve is 404 only to a caller with the key.
    expect((await call(url, { method: 'POST', body: chat('alpha'), token: INFERENCE_KEY })).status).toBe(200);
    const nobody = `${base}/models/nobody/v1/chat/completions`;
    expect((await call(nobody, { method: 'POST', body: chat('nobody') })).status).toBe(401);
    expect((await call(nobody, { method: 'POST', body: chat('nobody'), token: INFERENCE_KEY })).status).toBe(404);
  });

  it('reaches the supervisor’s API with its token, through Haru’s own supervisor client, and refuses it without', async () => {
    const client = createSupervisorClient({ token: TOKEN, tls: { ca: caPem } });
    const status = await client.status({ slug: 'gpu-host', supervisorUrl: `${base}/supervisor` });
    expect(status.models.map((m) => m.name).sort()).toEqual(['alpha', 'beta']);
    expect((await call(`${base}/supervisor/v1/status`)).status).toBe(401);
    expect((await call(`${base}/supervisor/v1/status`, { token: 'wrong' })).status).toBe(401);
  });

  it('refuses vLLM’s admin endpoints and everything else that is not inference or the supervisor’s API', async () => {
    const admin = ['/sleep', '/wake_up', '/is_sleeping', '/collective_rpc', '/reset_prefix_cache', '/server_info'];
    const other = ['/metrics', '/health', '/version', '/v1/models', '/v1/load_lora_adapter', '/tokenize', '/'];
    const paths = [
      ...[...admin, ...other].flatMap((p) => [`/models/alpha${p}`, p]),
      '/models/alpha/v1/../sleep',
      '/models/alpha/v1/%2e%2e/sleep',
      '/models/alpha/v1/chat/completions/../../../sleep?level=1',
      '/supervisor/metrics',
      '/supervisor/',
    ];
    for (const p of paths) {
      const res = await call(`${base}${p}`, { method: 'POST', body: {}, token: TOKEN });
      expect([p, res.status]).toEqual([p, 404]);
    }
    // Nothing went through: the engine is still awake, as vLLM itself says on loopback.
    const direct = await request(`http://127.0.0.1:${models.alpha}/is_sleeping`);
    expect(await direct.body.json()).toEqual({ is_sleeping: false });
  });

  it('serves nothing over plain HTTP: the HTTP port redirects to HTTPS, the TLS port refuses plain requests', async () => {
    const redirect = await request(`${httpBase}/models/alpha/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(chat('alpha')),
    });
    await redirect.body.dump();
    expect(redirect.statusCode).toBe(301);
    expect(redirect.headers.location).toBe('https://127.0.0.1/models/alpha/v1/chat/completions');
    const plain = await request(`http://127.0.0.1:${new URL(base).port}/supervisor/healthz`);
    expect(plain.statusCode).toBe(400);
    expect(await plain.body.text()).toContain('plain HTTP request was sent to HTTPS port');
  });
});
