import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { FailureType } from '../schemas/failures';
import type { SupervisorAccess } from '../schemas/layout';
import { startSilentHost } from '../test/support/local-server';
import { freePort } from '../test/support/ports';
import { createSupervisorAccess, type SupervisorTarget } from './supervisor-access';
import { SupervisorCallError } from './supervisor-call-error';
import { createSupervisorClient, retryAfterMs } from './supervisor-client';

type Handler = (req: http.IncomingMessage, body: string, res: http.ServerResponse) => void;

let handler: Handler = (_req, _body, res) => res.end();
let server: http.Server;
let host: SupervisorTarget;

beforeAll(async () => {
  server = http.createServer((req, res) => {
    let body = '';
    req.on('data', (c: Buffer) => (body += c.toString()));
    req.on('end', () => handler(req, body, res));
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  host = { slug: 'east', supervisorUrl: `http://127.0.0.1:${(server.address() as AddressInfo).port}/` };
});
afterAll(async () => {
  server.closeAllConnections();
  await new Promise((r) => server.close(r));
});

const client = (token?: string, defaultTimeoutMs?: number) => createSupervisorClient({ token, defaultTimeoutMs });
const json = (res: http.ServerResponse, status: number, value: unknown, headers: Record<string, string> = {}) =>
  res.writeHead(status, { 'content-type': 'application/json', ...headers }).end(JSON.stringify(value));
const statusBody = { models: [], training: [], at: '2030-01-01T00:00:00.000Z' };

async function failure(p: Promise<unknown>): Promise<SupervisorCallError> {
  const err = await p.then(
    () => null,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(SupervisorCallError);
  return err as SupervisorCallError;
}

describe('supervisor client', () => {
  it('sends the bearer token and returns the parsed status', async () => {
    let seen: http.IncomingHttpHeaders = {};
    handler = (req, _b, res) => {
      seen = req.headers;
      json(res, 200, { ...statusBody, extra: 'ignored' });
    };
    expect(await client('s3cret').status(host)).toEqual(statusBody);
    expect(seen.authorization).toBe('Bearer s3cret');
  });

  it('posts the JSON body to the right path', async () => {
    let seen = { url: '', method: '', body: '' };
    handler = (req, body, res) => {
      seen = { url: req.url!, method: req.method!, body };
      json(res, 202, { accepted: true, gpuIndexes: [1] });
    };
    expect(await client().stopTraining(host, { gpuIndex: 1, graceMs: 500 })).toEqual({
      accepted: true,
      gpuIndexes: [1],
      errors: [],
    });
    expect(seen).toEqual({ url: '/v1/training/stop', method: 'POST', body: '{"gpuIndex":1,"graceMs":500}' });
  });

  it.each([401, 403])('turns %i into non-retryable Unauthorized', async (status) => {
    handler = (_req, _b, res) => json(res, status, { error: { code: 'unauthorized', message: 'bad token' } });
    const f = await failure(client('wrong').status(host));
    expect(f).toMatchObject({ type: FailureType.Unauthorized, isRetryable: false });
    expect(f.message).toContain(`HTTP ${status} (unauthorized: bad token)`);
  });

  it('turns a 503 into retryable SupervisorUnreachable, honouring Retry-After', async () => {
    handler = (_req, _b, res) =>
      json(res, 503, { error: { code: 'internal_error', message: 'busy' } }, { 'retry-after': '2' });
    const f = await failure(client().status(host));
    expect(f).toMatchObject({ type: FailureType.SupervisorUnreachable, isRetryable: true, retryAfterMs: 2_000 });
  });

  it('turns another 4xx into non-retryable InvalidTarget with the envelope message', async () => {
    handler = (_req, _b, res) =>
      json(res, 404, { error: { code: 'not_found', message: 'no inference slot on GPU 7' } });
    const f = await failure(client().wake(host, { gpuIndex: 7 }));
    expect(f).toMatchObject({ type: FailureType.InvalidTarget, isRetryable: false });
    expect(f.message).toContain('no inference slot on GPU 7');
  });

  it('turns a schema-invalid body into non-retryable InvalidResponse, never a ZodError', async () => {
    handler = (_req, _b, res) => json(res, 200, { models: 'nope' });
    const f = await failure(client().status(host));
    expect(f).toMatchObject({ type: FailureType.InvalidResponse, isRetryable: false });
    expect(f.message).toContain('unexpected response (models:');
  });

  it('turns a non-JSON body into InvalidResponse', async () => {
    handler = (_req, _b, res) => res.writeHead(200).end('<html>');
    expect((await failure(client().status(host))).type).toBe(FailureType.InvalidResponse);
  });

  it('turns a refused connection into retryable SupervisorUnreachable', async () => {
    const f = await failure(client().status({ slug: 'east', supervisorUrl: `http://127.0.0.1:${await freePort()}/` }));
    expect(f).toMatchObject({ type: FailureType.SupervisorUnreachable, isRetryable: true });
    expect(f.message).toContain('ECONNREFUSED');
  });

  it('times out a request that gets no answer', async () => {
    handler = () => undefined; // never answers
    const f = await failure(client(undefined, 100).status(host));
    expect(f).toMatchObject({ type: FailureType.SupervisorUnreachable });
    expect(f.message).toContain('timed out after 100 ms');
  });

  it('ends at its timeout against a host that drops packets, while the connect is still pending', async () => {
    const silent = await startSilentHost();
    try {
      const started = performance.now();
      const f = await failure(client(undefined, 300).status({ slug: 'east', supervisorUrl: silent.url }));
      const tookMs = performance.now() - started;
      expect(f).toMatchObject({ type: FailureType.SupervisorUnreachable, isRetryable: true });
      expect(f.message).toContain('timed out after 300 ms');
      // What is under test is that the message is true: the call's own deadline ended it, not the dispatcher's
      // connect timeout (5 s) long after the message's 300 ms.
      expect(tookMs).toBeLessThan(5_000);
    } finally {
      await silent.close();
    }
  });

  it("throws the signal's reason when the caller aborts mid-request", async () => {
    handler = () => undefined;
    const controller = new AbortController();
    const call = client().status(host, { signal: controller.signal });
    const reason = new Error('cancelled by the caller');
    setImmediate(() => controller.abort(reason));
    await expect(call).rejects.toBe(reason);
  });
});

describe("a domain's supervisor settings", () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'haru-access-'));
  const seenAuth = () => {
    let seen: string | undefined;
    handler = (req, _b, res) => {
      seen = req.headers.authorization;
      json(res, 200, statusBody);
    };
    return () => seen;
  };
  const withAccess = (supervisor: SupervisorAccess) => ({ ...host, supervisor });
  // The worker's environment: its secrets directory is this test's.
  const fleetWide = (env: Record<string, string> = {}, warn = jest.fn()) =>
    createSupervisorClient({
      access: createSupervisorAccess({ token: 'fleet', env: { HARU_SECRETS_DIR: dir, ...env }, warn }),
    });

  it("sends the token from the domain's tokenEnv or tokenFile (trimmed), else the fleet-wide one", async () => {
    const seen = seenAuth();
    const file = path.join(dir, 'east.token');
    writeFileSync(file, 'from-file\n', { mode: 0o600 });
    const c = fleetWide({ HARU_SECRET_EAST_TOKEN: 'from-env' });
    await c.status(host);
    expect(seen()).toBe('Bearer fleet');
    await c.status(withAccess({ tokenEnv: 'HARU_SECRET_EAST_TOKEN' }));
    expect(seen()).toBe('Bearer from-env');
    await c.status(withAccess({ tokenFile: file }));
    expect(seen()).toBe('Bearer from-file');
    writeFileSync(file, 'rotated\n'); // read at each call: a rotated file needs no restart
    await c.status(withAccess({ tokenFile: file }));
    expect(seen()).toBe('Bearer rotated');
  });

  it('fails non-retryably, naming the domain and the field, when its token source is unset or unreadable', async () => {
    const c = fleetWide();
    expect(await failure(c.status(withAccess({ tokenEnv: 'HARU_SECRET_EAST_TOKEN' })))).toMatchObject({
      type: FailureType.SupervisorMisconfigured,
      isRetryable: false,
      message: 'domain east: supervisor.tokenEnv: HARU_SECRET_EAST_TOKEN is not set',
    });
    const f = await failure(c.status(withAccess({ tokenFile: path.join(dir, 'none') })));
    expect(f.message).toMatch(/^domain east: supervisor\.tokenFile: cannot read .*none \(ENOENT\)$/);
  });

  it('refuses, before reading it, a token source a layout stored before the allow-list names outside it', async () => {
    const seen = seenAuth();
    const apiTokenFile = path.join(os.tmpdir(), `haru-api-token-${process.pid}`);
    writeFileSync(apiTokenFile, 'the-api-token\n', { mode: 0o600 });
    try {
      const c = fleetWide({ HARU_API_TOKEN: 'the-api-token' });
      const byEnv = await failure(c.status(withAccess({ tokenEnv: 'HARU_API_TOKEN' })));
      expect(byEnv).toMatchObject({ type: FailureType.SupervisorMisconfigured, isRetryable: false });
      expect(byEnv.message).toMatch(/^domain east: supervisor\.tokenEnv: HARU_API_TOKEN must start with HARU_SECRET_/);
      const byFile = await failure(c.status(withAccess({ tokenFile: apiTokenFile })));
      expect(byFile).toMatchObject({ type: FailureType.SupervisorMisconfigured, isRetryable: false });
      expect(byFile.message).toContain(`domain east: supervisor.tokenFile: ${apiTokenFile} must be a file in ${dir}`);
      expect(seen()).toBeUndefined(); // nothing was sent
    } finally {
      rmSync(apiTokenFile, { force: true });
    }
  });

  it('refuses plain HTTP to a supervisor off loopback before connecting, unless the domain says insecure', async () => {
    const remote = { slug: 'west', supervisorUrl: 'http://192.0.2.10:8701' };
    const f = await failure(fleetWide().status(remote));
    expect(f).toMatchObject({ type: FailureType.SupervisorMisconfigured, isRetryable: false });
    expect(f.message).toContain('domain west: supervisor http://192.0.2.10:8701 is plain HTTP to a host off loopback');
    expect(f.message).toContain('"insecure": true');
    const seen = seenAuth();
    await fleetWide().status({ ...host, supervisorUrl: host.supervisorUrl.replace('127.0.0.1', 'localhost') });
    expect(seen()).toBe('Bearer fleet'); // loopback stays allowed
  });

  const external = Object.values(os.networkInterfaces())
    .flat()
    .find((a) => a && a.family === 'IPv4' && !a.internal)?.address;
  (external ? it : it.skip)(
    `reaches a plain-HTTP supervisor off loopback with insecure: true, warning once${external ? '' : ' (skipped: this machine has no non-loopback IPv4 address)'}`,
    async () => {
      const remote = http.createServer((_req, res) => json(res, 200, statusBody));
      await new Promise<void>((r) => remote.listen(0, external, () => r()));
      try {
        const warn = jest.fn();
        const c = fleetWide({}, warn);
        const target = {
          slug: 'west',
          supervisorUrl: `http://${external}:${(remote.address() as AddressInfo).port}`,
          supervisor: { insecure: true },
        };
        await expect(c.status(target)).resolves.toEqual(statusBody);
        await c.status(target);
        expect(warn).toHaveBeenCalledTimes(1);
        expect(warn.mock.calls[0]![1]).toEqual({ domain: 'west', supervisorUrl: target.supervisorUrl });
      } finally {
        remote.closeAllConnections();
        await new Promise((r) => remote.close(r));
      }
    },
  );
});

describe('retryAfterMs', () => {
  it('reads seconds and HTTP dates, and ignores garbage', () => {
    const now = new Date('2030-01-01T00:00:00Z');
    expect(retryAfterMs('1.5', now)).toBe(1_500);
    expect(retryAfterMs('Tue, 01 Jan 2030 00:00:03 GMT', now)).toBe(3_000);
    expect(retryAfterMs('soon', now)).toBeUndefined();
    expect(retryAfterMs(null, now)).toBeUndefined();
  });
});
