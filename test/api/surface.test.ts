import type { Express } from 'express';
import { ROUTE_DOCS, openApiPath } from '../../api/openapi';
import { call, type Harness, startHarness, twoDomainLayout } from './support/harness';
import { type FakeUpstream, startFakeUpstream } from './support/upstream';

interface Layer {
  route?: { path: string; methods: Record<string, boolean> };
  handle?: { stack?: Layer[] };
}

/** Every (method, path) the Express app routes, read from its router. */
function expressRoutes(app: Express): string[] {
  const out: string[] = [];
  const walk = (stack: Layer[]) => {
    for (const layer of stack) {
      if (layer.route) {
        for (const [method, on] of Object.entries(layer.route.methods))
          if (on) out.push(`${method} ${layer.route.path}`);
      } else if (layer.handle?.stack) walk(layer.handle.stack);
    }
  };
  walk((app as unknown as { router: { stack: Layer[] } }).router.stack);
  return out.sort();
}

describe('API surface: auth, OpenAPI and metrics', () => {
  const token = 'test-token-0123456789';
  let upstream: FakeUpstream;
  let h: Harness;
  let fleetSlug: string;
  beforeAll(async () => {
    upstream = await startFakeUpstream('east');
    h = await startHarness({ config: { HARU_API_TOKEN: token } });
    fleetSlug = (await h.seed(twoDomainLayout({ eastUrl: upstream.url, westUrl: upstream.url }))).slug;
  });
  afterAll(async () => {
    await h?.close();
    await upstream?.close();
  });

  const concrete = (path: string) =>
    path.replace(':fleet', fleetSlug).replace(':operation', '00000000-0000-4000-8000-000000000000');
  const bodyFor = (path: string) =>
    path.includes('/v1/chat') || path.includes('/v1/completions') || path.includes('/v1/embeddings')
      ? { model: 'test-model', messages: [], input: 'x', prompt: 'x' }
      : path.endsWith('/promote') || path.endsWith('/demote')
        ? { targetDomainId: 'west' }
        : {};

  it('documents exactly the routes the router serves', () => {
    const documented = ROUTE_DOCS.map((d) => `${d.method} ${d.path}`).sort();
    expect(expressRoutes(h.api.router)).toEqual(documented);
  });

  it.each(ROUTE_DOCS.filter((d) => d.scope).map((d) => [d.method.toUpperCase(), d.path] as const))(
    'requires the bearer token on %s %s',
    async (method, path) => {
      const url = `${h.url}${concrete(path)}`;
      const body = method === 'POST' ? bodyFor(path) : undefined;
      const headers = { 'x-haru-fleet': fleetSlug };
      const none = await call(url, { method, body, headers });
      expect(none.status).toBe(401);
      expect(none.body).toEqual({ error: { code: 'unauthorized', message: 'missing bearer token' } });
      // The fleet page also asks a browser for the key as HTTP Basic's password (it runs no script).
      expect(none.headers.get('www-authenticate')).toBe(
        path.startsWith('/ui') ? 'Basic realm="haru", charset="UTF-8", Bearer' : 'Bearer',
      );
      const wrong = await call(url, { method, body, headers, token: `${token}x` });
      expect(wrong.status).toBe(401);
      const right = await call(url, { method, body, headers, token });
      expect(right.status).not.toBe(401);
    },
  );

  it('leaves /healthz, /readyz, /openapi.json and /metrics open, and guards unknown /v1 paths', async () => {
    for (const path of ['/healthz', '/readyz', '/openapi.json', '/metrics']) {
      expect((await call(`${h.url}${path}`)).status).toBe(200);
    }
    expect((await call(`${h.url}/v1/no-such-route`)).status).toBe(401);
    const unknown = await call(`${h.url}/v1/no-such-route`, { token });
    expect(unknown.status).toBe(404);
    expect(unknown.body.error.code).toBe('not_found');
  });

  it('serves an OpenAPI 3.1 document with a schema-backed operation for every route', async () => {
    const { status, body } = await call(`${h.url}/openapi.json`);
    expect(status).toBe(200);
    expect(body.openapi).toBe('3.1.0');
    for (const doc of ROUTE_DOCS) {
      const op = body.paths[openApiPath(doc.path)]?.[doc.method];
      expect(op).toBeDefined();
      expect(op.security).toEqual(doc.scope ? [{ bearer: [doc.scope] }] : []);
      expect(op['x-haru-scope']).toBe(doc.scope ?? undefined);
      const ok = op.responses['200'] ?? op.responses['202'];
      expect(ok.content).toBeDefined();
      if (doc.body) expect(op.requestBody.content['application/json'].schema).toHaveProperty('type', 'object');
      if (doc.scope) {
        expect(op.responses['401'].content['application/json'].schema.properties.error).toBeDefined();
        expect(op.responses['403'].content['application/json'].schema.properties.error).toBeDefined();
      }
    }
    const promote = body.paths['/v1/fleets/{fleet}/promote'].post;
    expect(Object.keys(promote.responses).sort()).toEqual(
      expect.arrayContaining(['200', '202', '400', '404', '409', '413', '422', '503']),
    );
    expect(promote.requestBody.content['application/json'].schema.additionalProperties).toBe(false);
  });

  it('exposes request counts by route pattern, proxy latency and the route revision per fleet', async () => {
    await call(`${h.url}/v1/chat/completions`, {
      body: { model: 'test-model', messages: [] },
      headers: { 'x-haru-fleet': fleetSlug },
      token,
    });
    await call(`${h.url}/v1/fleets/${fleetSlug}`, { token });
    const res = await fetch(`${h.url}/metrics`);
    const text = await res.text();
    expect(res.headers.get('content-type')).toMatch(/text\/plain/);
    expect(text).toMatch(/haru_api_requests_total\{route="\/v1\/chat\/completions",method="POST",status="200"\} \d+/);
    expect(text).toMatch(/haru_api_requests_total\{route="\/v1\/fleets\/:fleet",method="GET",status="200"\} \d+/);
    expect(text).toMatch(/haru_proxy_upstream_ttfb_seconds_count\{endpoint="chat\/completions"\} \d+/);
    expect(text).toMatch(/haru_proxy_request_duration_seconds_count\{endpoint="chat\/completions",outcome="ok"\} \d+/);
    expect(text).toMatch(new RegExp(`haru_route_revision\\{fleet="${fleetSlug}"\\} \\d+`));
    expect(text).toContain('haru_proxy_held_requests');
    // HaruRouteStale reads its rate: at 0 from the fleet's first routing load, before any stale answer.
    expect(text).toContain(`haru_proxy_stale_routing_total{fleet="${fleetSlug}"} 0\n`);
  });
});
