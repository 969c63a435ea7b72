import type { FleetSnapshot } from '../../schemas/entities';
import { call, type Harness, startHarness, twoDomainLayout } from './support/harness';
import { type FakeUpstream, startFakeUpstream } from './support/upstream';

const model = 'test-model';

/** The proxy sends traffic only where the snapshot says it can be served, and says at once when no move will come. */
describe('routing only to eligible models', () => {
  let east: FakeUpstream;
  let west: FakeUpstream;
  let h: Harness;

  beforeAll(async () => {
    east = await startFakeUpstream('east');
    west = await startFakeUpstream('west');
    // A long hold budget: an answer that comes at once proves the request was not held.
    h = await startHarness({ config: { HARU_CHAT_HOLD_MS: 60_000 } });
  });
  afterAll(async () => {
    await h?.close();
    await east?.close();
    await west?.close();
  });
  beforeEach(() => {
    east.seen.length = 0;
  });

  const domain = (fleet: FleetSnapshot, slug: string) => fleet.domains.find((d) => d.slug === slug)!;
  const inferenceSlot = (fleet: FleetSnapshot, slug: string) =>
    domain(fleet, slug).slots.find((s) => s.kind === 'inference')!;
  const ask = (fleet: FleetSnapshot) =>
    call(`${h.url}/v1/chat/completions`, { body: { model, messages: [] }, headers: { 'x-haru-fleet': fleet.slug } });
  const seedFleet = (autoFailover: boolean) =>
    h.seed(twoDomainLayout({ eastUrl: east.url, westUrl: west.url, autoFailover }));

  it('answers 503 domain_unavailable at once for a failed active with auto-failover off, never sending it the request', async () => {
    const fleet = await seedFleet(false);
    await h.store.domains.transition(domain(fleet, 'east').id, 'failed');
    const res = await ask(fleet);
    expect(res.status).toBe(503);
    expect(res.body.error.code).toBe('domain_unavailable');
    expect(res.body.error.message).toMatch(/domain east is failed; auto-failover is off/);
    // Policy defaults: 3 missed polls at 500 ms plus the 10 s training stop grace, not the 60 s hold budget.
    expect(res.headers.get('retry-after')).toBe('12');
    expect(east.seen).toHaveLength(0);

    const models = await call(`${h.url}/v1/models`, { headers: { 'x-haru-fleet': fleet.slug } });
    expect(models.body.data).toEqual([]);
    const intent = await call(`${h.url}/v1/fleets/${fleet.slug}/route-intent`);
    expect(intent.body).toMatchObject({
      fleetId: fleet.id,
      fleetSlug: fleet.slug,
      revision: fleet.routeRevision,
      models: [],
      active: {
        domainSlug: 'east',
        eligible: false,
        weight: 0,
        models: [{ name: model, servingUrl: east.url, eligible: false }],
      },
      standbys: [
        {
          domainSlug: 'west',
          eligible: false,
          weight: 0,
          models: [{ name: model, servingUrl: west.url, eligible: false }],
        },
      ],
    });
  });

  it('answers at once, naming the pause, when auto-failover is paused and the active refuses connections', async () => {
    const fleet = await h.seed(
      twoDomainLayout({ eastUrl: 'http://127.0.0.1:9', westUrl: west.url, autoFailover: true }),
    );
    await h.store.fleets.setAutoFailoverPause(fleet.id, { paused: true, by: 'ops', reason: 'maintenance' });
    const res = await ask(fleet);
    expect(res.status).toBe(502);
    expect(res.body.error.code).toBe('upstream_unreachable');
    expect(res.body.error.message).toMatch(/auto-failover is paused \(by ops: maintenance\)/);
    expect(res.headers.get('retry-after')).toBe('12');
    expect(west.seen).toHaveLength(0);
  });

  it('never sends a request to a sleeping model of the active, and route intent marks it ineligible', async () => {
    const fleet = await seedFleet(false);
    await h.store.slots.transition(inferenceSlot(fleet, 'east').id, 'sleeping');
    const res = await ask(fleet);
    expect(res.status).toBe(503);
    expect(res.body.error.message).toMatch(/model "test-model" on domain east is sleeping/);
    expect(east.seen).toHaveLength(0);
    const intent = await call(`${h.url}/v1/fleets/${fleet.slug}/route-intent`);
    expect(intent.body.active).toMatchObject({ eligible: false, weight: 0 });
  });

  it('lists a serving active as eligible with weight 100 and its model in /v1/models', async () => {
    const fleet = await seedFleet(false);
    await h.store.slots.transition(inferenceSlot(fleet, 'east').id, 'serving');
    const intent = await call(`${h.url}/v1/fleets/${fleet.slug}/route-intent`);
    expect(intent.body.active).toEqual({
      domainId: domain(fleet, 'east').id,
      domainSlug: 'east',
      endpointUrl: east.url,
      eligible: true,
      weight: 100,
      models: [{ name: model, servingUrl: east.url, eligible: true }],
    });
    expect(intent.body.models).toEqual([{ name: model, servingUrl: east.url }]);
    const models = await call(`${h.url}/v1/models`, { headers: { 'x-haru-fleet': fleet.slug } });
    expect(models.body.data.map((m: { id: string }) => m.id)).toEqual([model]);
    expect((await ask(fleet)).status).toBe(200);
  });
});
