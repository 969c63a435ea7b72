/**
 * Scoped API keys against a real API: for every operation of the served OpenAPI document, a key holding
 * exactly the scope the operation declares gets past auth, and every key whose scopes do not grant it gets
 * 403 `forbidden` naming the scope. A /v1 operation without a declared scope fails here. Then the fleet limit
 * of a key, the requester recorded on operations and pauses, and the key's name in the access log.
 */
import { tokenDigest } from '../../lib/bearer-auth';
import { SCOPES, type Scope, grants } from '../../api/auth/scopes';
import type { ApiKey } from '../../api/auth/api-key';
import { call, type Harness, startHarness, twoDomainLayout } from './support/harness';
import { type FakeUpstream, startFakeUpstream } from './support/upstream';
import type { Logger } from '../../lib/logger';
import { eventually } from '../support/eventually';

/** One key per scope, holding that scope alone: `<scope>-key`, its secret `<scope>-secret-0123456789`. */
const secretOf = (name: string) => `${name}-secret-0123456789`;
const key = (name: string, scopes: Scope[], fleets?: string[]): ApiKey => ({
  name,
  digest: tokenDigest(secretOf(name)),
  scopes,
  ...(fleets ? { fleets } : {}),
});
const SCOPE_KEYS = SCOPES.map((scope) => key(`${scope}-key`, [scope]));

interface DocumentedOperation {
  method: string;
  path: string;
  scope: Scope | undefined;
  security: unknown[];
}

describe('scoped API keys', () => {
  let upstream: FakeUpstream;
  let h: Harness;
  let fleet: { id: string; slug: string };
  let other: { id: string; slug: string };
  const lines: Array<{ msg: string } & Record<string, unknown>> = [];
  const logger: Logger = {
    debug() {},
    info: (msg, fields) => lines.push({ msg, ...fields }),
    warn() {},
    error() {},
  };
  let operations: DocumentedOperation[] = [];

  beforeAll(async () => {
    upstream = await startFakeUpstream('east');
    // The limited key's list names the first fleet by slug; it is seeded below with that slug.
    const layout = twoDomainLayout({ eastUrl: upstream.url, westUrl: upstream.url });
    const limited = key('limited', ['admin', 'inference'], [layout.fleet.slug]);
    h = await startHarness({ config: { apiKeys: [...SCOPE_KEYS, limited] }, logger });
    fleet = await h.seed(layout);
    other = await h.seed(twoDomainLayout({ eastUrl: upstream.url, westUrl: upstream.url }));
    const doc = (await call(`${h.url}/openapi.json`)).body as {
      paths: Record<string, Record<string, { security: unknown[]; 'x-haru-scope'?: Scope }>>;
    };
    operations = Object.entries(doc.paths).flatMap(([path, methods]) =>
      Object.entries(methods).map(([method, op]) => ({
        method: method.toUpperCase(),
        path,
        scope: op['x-haru-scope'],
        security: op.security,
      })),
    );
  });
  afterAll(async () => {
    await h?.close();
    await upstream?.close();
  });

  const concrete = (path: string, fleetRef = fleet.slug) =>
    path
      .replace('{fleet}', fleetRef)
      .replace('{domain}', 'west')
      .replace('{operation}', '00000000-0000-4000-8000-000000000000');
  const isInference = (path: string) => /^\/v1\/(chat\/completions|completions|embeddings|models)$/.test(path);
  const bodyFor = (path: string) =>
    isInference(path)
      ? { model: 'test-model', messages: [], input: 'x', prompt: 'x' }
      : path.endsWith('/promote') || path.endsWith('/demote')
        ? { targetDomainId: 'west' }
        : {};
  const send = (op: { method: string; path: string }, name: string, fleetRef = fleet.slug) =>
    call(`${h.url}${concrete(op.path, fleetRef)}`, {
      method: op.method,
      body: op.method === 'POST' ? bodyFor(op.path) : undefined,
      headers: { 'x-haru-fleet': fleetRef },
      token: secretOf(name),
    });
  const scoped = () => operations.filter((op) => op.scope !== undefined);

  it('reads a scope for every /v1 operation of the document, and the same scope in its security', () => {
    expect(operations.length).toBeGreaterThan(20);
    for (const op of operations.filter((o) => o.path.startsWith('/v1/'))) {
      expect({ op: `${op.method} ${op.path}`, scope: op.scope }).toEqual({
        op: `${op.method} ${op.path}`,
        scope: expect.stringMatching(/^(inference|read|operate|admin)$/),
      });
      expect(op.security).toEqual([{ bearer: [op.scope] }]);
    }
  });

  it('lets a key holding exactly the declared scope through every operation', async () => {
    for (const op of scoped()) {
      const res = await send(op, `${op.scope}-key`);
      const passed = res.status !== 401 && res.status !== 403;
      expect({ op: `${op.method} ${op.path}`, passed, body: passed ? null : res.body }).toEqual({
        op: `${op.method} ${op.path}`,
        passed: true,
        body: null,
      });
    }
  });

  it('answers 403 `forbidden` naming the scope to every key whose scopes do not grant it', async () => {
    let refusals = 0;
    for (const op of scoped()) {
      for (const other of SCOPE_KEYS.filter((k) => !grants(k.scopes, op.scope!))) {
        const res = await send(op, other.name);
        expect({ op: `${op.method} ${op.path}`, key: other.name, status: res.status, body: res.body }).toEqual({
          op: `${op.method} ${op.path}`,
          key: other.name,
          status: 403,
          body: {
            error: { code: 'forbidden', message: expect.stringContaining(`lacks the "${op.scope}" scope`) },
          },
        });
        refusals += 1;
      }
    }
    // Every scope has keys that do not hold it: each operation was refused at least once.
    expect(refusals).toBeGreaterThanOrEqual(scoped().length);
  });

  it('guards the other spellings Express routes to the same handlers as the declared path', async () => {
    const chat = (url: string, name: string) =>
      call(`${h.url}${url}`, {
        body: { model: 'test-model', messages: [] },
        headers: { 'x-haru-fleet': fleet.slug },
        token: secretOf(name),
      });
    for (const spelling of ['/v1/chat/completions/', '/V1/Chat/Completions']) {
      expect((await chat(spelling, 'read-key')).status).toBe(403);
      expect((await chat(spelling, 'inference-key')).status).toBe(200);
    }
    const pause = await call(`${h.url}/v1/fleets/${fleet.slug}/PAUSE/`, { body: {}, token: secretOf('read-key') });
    expect(pause.status).toBe(403);
  });

  it('keeps 401 for a missing or unknown key', async () => {
    const none = await call(`${h.url}/v1/fleets`);
    expect(none.status).toBe(401);
    expect(none.body.error.code).toBe('unauthorized');
    expect((await call(`${h.url}/v1/fleets`, { token: 'no-such-key-0123456789' })).status).toBe(401);
  });

  it('the fleet page needs only `read`, the bearer token or the same key as HTTP Basic’s password', async () => {
    const ui = operations.filter((op) => op.path.startsWith('/ui'));
    expect(ui.map((op) => [op.method, op.path, op.scope])).toEqual([
      ['GET', '/ui', 'read'],
      ['GET', '/ui/fleets/{fleet}', 'read'],
    ]);
    const basic = (secret: string) => ({
      authorization: `Basic ${Buffer.from(`oncall:${secret}`).toString('base64')}`,
    });
    const page = `${h.url}/ui/fleets/${fleet.slug}`;
    expect((await call(page, { headers: basic(secretOf('read-key')) })).status).toBe(200);
    expect((await call(page, { headers: basic(secretOf('inference-key')) })).status).toBe(403);
    const unknown = await call(page, { headers: basic('no-such-key-0123456789') });
    expect(unknown.status).toBe(401);
    expect(unknown.headers.get('www-authenticate')).toContain('Basic realm="haru"');
  });

  describe('a key limited to a fleet', () => {
    it('gets 403 on every operation of another fleet, and passes on its own by slug or UUID', async () => {
      const ofFleet = scoped().filter((op) => op.path.includes('{fleet}') || isInference(op.path));
      expect(ofFleet.length).toBeGreaterThan(15);
      for (const op of ofFleet) {
        const refused = await send(op, 'limited', other.slug);
        expect({ op: `${op.method} ${op.path}`, status: refused.status, code: refused.body?.error?.code }).toEqual({
          op: `${op.method} ${op.path}`,
          status: 403,
          code: 'forbidden',
        });
      }
      for (const op of ofFleet.filter((o) => o.method === 'GET')) {
        expect((await send(op, 'limited', fleet.id)).status).not.toBe(403);
      }
    });

    it('gets 403, not 404, for a fleet that does not exist', async () => {
      const res = await call(`${h.url}/v1/fleets/no-such-fleet`, { token: secretOf('limited') });
      expect(res.status).toBe(403);
      // An unlimited key learns that it does not exist.
      expect((await call(`${h.url}/v1/fleets/no-such-fleet`, { token: secretOf('read-key') })).status).toBe(404);
    });

    it('is proxied to its own fleet only', async () => {
      const chat = (fleetRef: string) =>
        call(`${h.url}/v1/chat/completions`, {
          body: { model: 'test-model', messages: [] },
          headers: { 'x-haru-fleet': fleetRef },
          token: secretOf('limited'),
        });
      expect((await chat(fleet.slug)).status).toBe(200);
      expect((await chat(other.slug)).status).toBe(403);
    });

    it('lists only its own fleets', async () => {
      const listed = (name: string) =>
        call(`${h.url}/v1/fleets`, { token: secretOf(name) }).then((res) =>
          (res.body.fleets as Array<{ slug: string }>).map((f) => f.slug),
        );
      expect(await listed('limited')).toEqual([fleet.slug]);
      expect(await listed('read-key')).toEqual(expect.arrayContaining([fleet.slug, other.slug]));
    });
  });

  it("records the key's name as the requester of an operation and a pause, and in the access log", async () => {
    const target = await h.seed(twoDomainLayout({ eastUrl: upstream.url, westUrl: upstream.url }));
    lines.length = 0;
    const promoted = await call(`${h.url}/v1/fleets/${target.slug}/promote`, {
      body: { targetDomainId: 'west', reason: 'scope test' },
      token: secretOf('operate-key'),
    });
    expect(promoted.status).toBe(202);
    expect(promoted.body.operation.requestedBy).toBe('api:operate-key');
    const stored = await h.store.operations.get(promoted.body.operation.id);
    expect(stored?.requestedBy).toBe('api:operate-key');

    const paused = await call(`${h.url}/v1/fleets/${target.slug}/pause`, {
      body: { reason: 'scope test' },
      token: secretOf('admin-key'),
    });
    expect(paused.body.autoFailoverPause).toMatchObject({ by: 'api:admin-key' });

    const chat = await call(`${h.url}/v1/chat/completions`, {
      body: { model: 'test-model', messages: [] },
      headers: { 'x-haru-fleet': target.slug },
      token: secretOf('inference-key'),
    });
    expect(chat.status).toBe(200);
    // A line is written when the server closes the response, which may come after the client read it.
    const access = (route: string) =>
      eventually(`the access line of ${route}`, () => lines.find((l) => l.msg === 'request' && l.route === route));
    expect(await access('/v1/fleets/:fleet/promote')).toMatchObject({ key: 'operate-key', status: '202' });
    expect(await access('/v1/fleets/:fleet/pause')).toMatchObject({ key: 'admin-key', status: '200' });
    expect(await access('/v1/chat/completions')).toMatchObject({ key: 'inference-key', status: '200' });
  });
});
