import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { createApp } from '../../api/app';
import { silentLogger } from '../../lib/logger';
import { createDatabase } from '../../db/client';
import { createStore } from '../../db/store';
import { call, type Harness, moveRoute, startHarness, twoDomainLayout } from './support/harness';
import { startTcpProxy, type TcpProxy } from './support/tcp-proxy';
import { answerAs, type FakeUpstream, startFakeUpstream } from './support/upstream';
import { waitUntil } from './support/wait';

const model = 'test-model';
const ask = (url: string, fleet: string) =>
  call(`${url}/v1/chat/completions`, { body: { model, messages: [] }, headers: { 'x-haru-fleet': fleet } });
const servedBy = (res: { body: { choices?: { message: { content: string } }[] } }) =>
  res.body.choices?.[0]?.message.content.split(':')[0];

/** The outage tests' snapshot (and sleep-answer) cache TTL. */
const SNAPSHOT_TTL_MS = 50;

describe('routing cache', () => {
  let east: FakeUpstream;
  let west: FakeUpstream;
  beforeAll(async () => {
    east = await startFakeUpstream('east');
    west = await startFakeUpstream('west');
  });
  afterAll(async () => {
    await east?.close();
    await west?.close();
  });

  describe('route revision push', () => {
    let h: Harness;
    beforeAll(async () => {
      // An hour-long TTL: only the LISTEN push can make the proxy notice a move during this test.
      h = await startHarness({ config: { HARU_SNAPSHOT_CACHE_TTL_MS: 3_600_000 } });
    });
    afterAll(async () => {
      await h?.close();
    });

    it('moves traffic on every API process as soon as commitRouting notifies, without waiting for the TTL', async () => {
      const fleet = await h.seed(twoDomainLayout({ eastUrl: east.url, westUrl: west.url }));
      // A second API process (replica) over its own database connection.
      const replicaDb = await createDatabase({ databaseUrl: h.db.url, max: 2 });
      const replica = createApp({
        store: createStore(replicaDb),
        database: replicaDb,
        orchestrator: h.orchestrator,
        config: h.config,
        logger: silentLogger,
      });
      await replica.start();
      const server = http.createServer(replica.handle);
      await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
      const replicaUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
      try {
        expect(servedBy(await ask(h.url, fleet.slug))).toBe('east');
        expect(servedBy(await ask(replicaUrl, fleet.slug))).toBe('east');
        const revision = await moveRoute(h.store, fleet, 'west');
        for (const url of [h.url, replicaUrl]) {
          const res = await waitUntil('traffic on west', async () => {
            const r = await ask(url, fleet.slug);
            return servedBy(r) === 'west' ? r : null;
          });
          expect(res.headers.get('x-haru-route-revision')).toBe(String(revision));
          expect(res.headers.get('x-haru-domain')).toBe('west');
        }
      } finally {
        server.closeAllConnections();
        await new Promise<void>((resolve) => server.close(() => resolve()));
        await replica.close();
        await replicaDb.close();
      }
    });

    it('answers route-intent with the active domain, its model URLs and the revision', async () => {
      const fleet = await h.seed(twoDomainLayout({ eastUrl: east.url, westUrl: west.url }));
      const res = await call(`${h.url}/v1/fleets/${fleet.slug}/route-intent`);
      expect(res.status).toBe(200);
      expect(res.body).toMatchObject({
        fleetId: fleet.id,
        fleetSlug: fleet.slug,
        revision: fleet.routeRevision,
        activeDomain: { slug: 'east' },
        models: [{ name: model, servingUrl: east.url }],
        failover: { inFlight: false, operationId: null },
      });
      const revision = await moveRoute(h.store, fleet, 'west');
      const moved = await call(`${h.url}/v1/fleets/${fleet.id}/route-intent`);
      expect(moved.body).toMatchObject({ revision, activeDomain: { slug: 'west' } });
    });
  });

  describe('store outage', () => {
    let relay: TcpProxy;
    let h: Harness;
    beforeAll(async () => {
      const pg = new URL(process.env.HARU_TEST_DATABASE_URL || 'postgres://postgres@127.0.0.1:5432/postgres');
      relay = await startTcpProxy(pg.hostname, Number(pg.port || 5432));
      h = await startHarness({
        viaPort: relay.port,
        config: { HARU_SNAPSHOT_CACHE_TTL_MS: SNAPSHOT_TTL_MS, HARU_STORE_TIMEOUT_MS: 200 },
      });
    });
    afterAll(async () => {
      relay?.restore();
      await h?.close();
      await relay?.close();
    });

    it('serves the last known routing marked x-haru-routing: stale, and 503 for a fleet it never saw', async () => {
      const fleet = await h.seed(twoDomainLayout({ eastUrl: east.url, westUrl: west.url }));
      const unseen = await h.seed(twoDomainLayout({ eastUrl: east.url, westUrl: west.url }));
      const fresh = await ask(h.url, fleet.slug);
      expect(servedBy(fresh)).toBe('east');
      expect(fresh.headers.get('x-haru-routing')).toBeNull();

      relay.blackhole();
      const stale = await waitUntil('a stale-routed answer', async () => {
        const r = await ask(h.url, fleet.slug);
        return r.headers.get('x-haru-routing') === 'stale' ? r : null;
      });
      expect(stale.status).toBe(200);
      expect(servedBy(stale)).toBe('east');
      const intent = await call(`${h.url}/v1/fleets/${fleet.slug}/route-intent`);
      expect(intent.status).toBe(200);
      expect(intent.headers.get('x-haru-routing')).toBe('stale');
      expect(intent.body.activeDomain.slug).toBe('east');

      const never = await ask(h.url, unseen.slug);
      expect(never.status).toBe(503);
      expect(never.body.error.code).toBe('state_store_unavailable');

      relay.restore();
      const back = await waitUntil('fresh routing after the store is back', async () => {
        const r = await ask(h.url, fleet.slug);
        return r.status === 200 && r.headers.get('x-haru-routing') === null ? r : null;
      });
      expect(servedBy(back)).toBe('east');
    });

    it('holds a request whose stale route points at a domain now asleep, and serves it once the store shows the move', async () => {
      let eastAsleep = false;
      east.handle(answerAs('east', { asleep: () => eastAsleep }));
      try {
        const fleet = await h.seed(twoDomainLayout({ eastUrl: east.url, westUrl: west.url }));
        expect(servedBy(await ask(h.url, fleet.slug))).toBe('east');
        relay.blackhole();
        await waitUntil('a stale-routed answer', async () => {
          const r = await ask(h.url, fleet.slug);
          return r.headers.get('x-haru-routing') === 'stale' ? r : null;
        });
        // Unseen by this replica: the route moves to west and east is put to sleep.
        await moveRoute(h.db.store, fleet, 'west');
        eastAsleep = true;
        // The proxy keeps a server's sleep answer one snapshot TTL: the awake one the stale answer above read
        // must have expired (time is the condition here).
        await new Promise((resolve) => setTimeout(resolve, 2 * SNAPSHOT_TTL_MS));
        east.seen.length = 0;
        const held = await h.api.metrics.heldRequests.get();
        const before = held.values[0]?.value ?? 0;
        const pending = ask(h.url, fleet.slug);
        await waitUntil(
          'the request to be held',
          async () => ((await h.api.metrics.heldRequests.get()).values[0]?.value ?? 0) > before,
        );
        relay.restore();
        const answer = await pending;
        expect(answer.status).toBe(200);
        expect(servedBy(answer)).toBe('west');
        expect(east.seen.filter((s) => s.path === '/v1/chat/completions')).toHaveLength(0);
      } finally {
        relay.restore();
        east.handle(answerAs('east'));
      }
    });
  });
});
