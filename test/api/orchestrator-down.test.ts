import { call, type Harness, startHarness, twoDomainLayout } from './support/harness';
import { freePort } from '../support/ports';
import { type FakeUpstream, startFakeUpstream } from './support/upstream';

/** Temporal unreachable: control routes that need it answer 503; chat and reads keep working. */
describe('with Temporal unreachable', () => {
  let upstream: FakeUpstream;
  let h: Harness;
  beforeAll(async () => {
    upstream = await startFakeUpstream('east');
    h = await startHarness({
      temporalAddress: `127.0.0.1:${await freePort()}`,
      config: { HARU_TEMPORAL_TIMEOUT_MS: 1_000 },
    });
  });
  afterAll(async () => {
    await h?.close();
    await upstream?.close();
  });

  it('answers 503 orchestrator_unavailable on promote, reconcile, abort and readyz, and keeps serving chat', async () => {
    const fleet = await h.seed(twoDomainLayout({ eastUrl: upstream.url, westUrl: upstream.url }));
    const promote = await call(`${h.url}/v1/fleets/${fleet.slug}/promote`, { body: { targetDomainId: 'west' } });
    expect(promote.status).toBe(503);
    expect(promote.body.error.code).toBe('orchestrator_unavailable');
    // The row went in first; the monitor starts it once Temporal is back (docs/architecture.md §4.1).
    const [pending] = await h.store.operations.list(fleet.id);
    expect(pending).toMatchObject({ state: 'pending', kind: 'promote' });

    const reconcile = await call(`${h.url}/v1/fleets/${fleet.slug}/reconcile`, { body: {} });
    expect(reconcile.status).toBe(503);
    expect(reconcile.body.error.code).toBe('orchestrator_unavailable');
    const abort = await call(`${h.url}/v1/fleets/${fleet.slug}/operations/${pending!.id}/abort`, { body: {} });
    expect(abort.status).toBe(503);
    const ready = await call(`${h.url}/readyz`);
    expect(ready.status).toBe(503);
    expect(ready.body.error.code).toBe('orchestrator_unavailable');

    const detail = await call(`${h.url}/v1/fleets/${fleet.slug}/operations/${pending!.id}`);
    expect(detail).toMatchObject({ status: 200, body: { id: pending!.id, progress: null } });
    const chat = await call(`${h.url}/v1/chat/completions`, {
      body: { model: 'test-model', messages: [] },
      headers: { 'x-haru-fleet': fleet.slug },
    });
    expect(chat.status).toBe(200);
    expect(chat.body.choices[0].message.content).toBe('east:ok');
  });
});
