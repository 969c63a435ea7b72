import type { FleetLayoutInput } from '../schemas/layout';
import { testLayout } from './fixtures';
import { applyLayout, LayoutApplyRefusedError, LayoutValidationError } from './layout-apply';
import { createTestDatabase, type TestDatabase } from './testing';

let t: TestDatabase;
let n = 0;
beforeAll(async () => {
  t = await createTestDatabase();
});
afterAll(() => t?.drop());

const nextSlug = () => `layout-${(n += 1)}`;
const snapshot = async (slug: string) => (await t.store.fleets.snapshot(slug))!;

/** Every row the layout owns, for "nothing changed" assertions. */
async function dump(slug: string) {
  const snap = await t.store.fleets.snapshot(slug);
  return { snap, events: snap ? await t.store.events.list(snap.id) : [] };
}

describe('applyLayout', () => {
  it('creates a fleet with its domains and slots, then re-applies as a no-op', async () => {
    const slug = nextSlug();
    const first = await applyLayout(t.store, testLayout({ fleet: slug }));
    expect(first.created).toEqual([
      `fleet ${slug}`,
      `domain ${slug}/east`,
      `slot ${slug}/east/gpu0/inference`,
      `slot ${slug}/east/gpu0/training`,
      `domain ${slug}/west`,
      `slot ${slug}/west/gpu0/inference`,
      `slot ${slug}/west/gpu0/training`,
    ]);
    const before = await dump(slug);
    expect(before.events.map((e) => e.type)).toEqual(['layout.applied']);
    const again = await applyLayout(t.database, testLayout({ fleet: slug }));
    expect(again).toMatchObject({ created: [], updated: [], pruned: [], left: [], notes: [] });
    expect(again.unchanged).toHaveLength(7);
    expect(await dump(slug)).toEqual(before);
  });

  it('updates policy, display names, URLs, placement and slot contents on re-apply, keeping observed state', async () => {
    const slug = nextSlug();
    await applyLayout(t.store, testLayout({ fleet: slug }));
    const west = (await snapshot(slug)).domains.find((d) => d.slug === 'west')!;
    await t.store.domains.transition(west.id, 'ready');
    const changed = testLayout({ fleet: slug, policy: { autoFailover: false, failureThreshold: 5 } });
    changed.fleet.displayName = 'Renamed fleet';
    const w = changed.domains[1]!;
    w.displayName = 'West (moved)';
    w.supervisorUrl = 'https://west.example.com:8701';
    w.placement = { cloud: 'aws', region: 'us-west-2' };
    w.slots[0] = {
      kind: 'inference',
      gpuIndex: 0,
      sleepLevel: 2,
      models: [{ name: 'm-shared', servingUrl: 'https://west.example.com/v1' }],
    };
    const report = await applyLayout(t.store, changed);
    expect(report.updated).toEqual([`fleet ${slug}`, `domain ${slug}/west`, `slot ${slug}/west/gpu0/inference`]);
    expect(report.created).toEqual([]);
    const after = await snapshot(slug);
    expect(after).toMatchObject({ displayName: 'Renamed fleet', policy: { autoFailover: false, failureThreshold: 5 } });
    const westAfter = after.domains.find((d) => d.slug === 'west')!;
    expect(westAfter).toMatchObject({
      displayName: 'West (moved)',
      supervisorUrl: 'https://west.example.com:8701',
      placement: { cloud: 'aws', region: 'us-west-2' },
      state: 'ready',
    });
    expect(westAfter.slots[0]).toMatchObject({
      sleepLevel: 2,
      models: [{ servingUrl: 'https://west.example.com/v1' }],
    });
  });

  it("stores a domain's supervisor settings, updates them on re-apply, and warns about plain HTTP off loopback", async () => {
    const slug = nextSlug();
    const layout = testLayout({ fleet: slug });
    layout.domains[0]!.supervisor = { tokenEnv: 'HARU_SECRET_EAST_TOKEN' };
    const first = await applyLayout(t.store, layout);
    expect(first.notes).toEqual([]);
    const east = () => snapshot(slug).then((s) => s.domains.find((d) => d.slug === 'east')!);
    expect((await east()).supervisor).toEqual({ tokenEnv: 'HARU_SECRET_EAST_TOKEN' });

    layout.domains[0]!.supervisorUrl = 'http://10.0.0.5:8701';
    layout.domains[0]!.supervisor = { tokenFile: '/etc/haru/secrets/east', insecure: true };
    layout.domains[1]!.supervisorUrl = 'http://10.0.1.5:8701';
    const second = await applyLayout(t.store, layout);
    expect(second.updated).toEqual([`domain ${slug}/east`, `domain ${slug}/west`]);
    expect((await east()).supervisor).toEqual({ tokenFile: '/etc/haru/secrets/east', insecure: true });
    expect(second.notes).toEqual([
      expect.stringMatching(new RegExp(`^WARNING: domain ${slug}/east reaches its supervisor over plain HTTP`)),
      expect.stringMatching(new RegExp(`^domain ${slug}/west: the worker will refuse its plain-HTTP supervisor`)),
    ]);
  });

  it('never moves the routing pointer of an existing fleet, and says so', async () => {
    const slug = nextSlug();
    await applyLayout(t.store, testLayout({ fleet: slug }));
    const fleet = await snapshot(slug);
    const west = fleet.domains.find((d) => d.slug === 'west')!.id;
    const report = await applyLayout(t.store, testLayout({ fleet: slug, active: 'west' }));
    expect(report.notes).toEqual([expect.stringContaining('routing pointer moves only by promotion')]);
    expect(await snapshot(slug)).toMatchObject({ activeDomainId: fleet.activeDomainId, routeRevision: 0 });
    expect(fleet.activeDomainId).not.toBe(west);
  });

  it('leaves domains and slots missing from the layout unless asked to prune', async () => {
    const slug = nextSlug();
    await applyLayout(t.store, testLayout({ fleet: slug, domains: ['east', 'west', 'north'] }));
    const smaller = testLayout({ fleet: slug, domains: ['east', 'west'] });
    smaller.domains[1]!.slots = [smaller.domains[1]!.slots[0]!];
    const kept = await applyLayout(t.store, smaller);
    expect(kept.left).toEqual([`slot ${slug}/west/gpu0/training`, `domain ${slug}/north`]);
    expect((await snapshot(slug)).domains).toHaveLength(3);
    const pruned = await applyLayout(t.store, smaller, { prune: true });
    expect(pruned.pruned).toEqual([`slot ${slug}/west/gpu0/training`, `domain ${slug}/north`]);
    const after = await snapshot(slug);
    expect(after.domains.map((d) => [d.slug, d.slots.length])).toEqual([
      ['east', 2],
      ['west', 1],
    ]);
  });

  it('refuses to prune the active domain and writes nothing, not even the other changes', async () => {
    const slug = nextSlug();
    await applyLayout(t.store, testLayout({ fleet: slug }));
    const before = await dump(slug);
    // The layout drops east, the active domain, and changes the policy in the same apply.
    const withoutActive = testLayout({ fleet: slug, domains: ['west'], policy: { autoFailover: false } });
    const err = await applyLayout(t.store, withoutActive, { prune: true }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(LayoutApplyRefusedError);
    expect((err as LayoutApplyRefusedError).reasons).toEqual([
      `cannot prune domain ${slug}/east: it is the fleet's active domain`,
    ]);
    expect(await dump(slug)).toEqual(before);
  });

  it('refuses to prune a domain or slot an in-flight operation uses', async () => {
    const slug = nextSlug();
    await applyLayout(t.store, testLayout({ fleet: slug, domains: ['east', 'west', 'north'] }));
    const fleet = await snapshot(slug);
    const north = fleet.domains.find((d) => d.slug === 'north')!.id;
    await t.store.operations.create({
      fleetId: fleet.id,
      kind: 'demote',
      targetDomainId: north,
      reason: 'x',
      requestedBy: 'jest',
    });
    const before = await dump(slug);
    await expect(applyLayout(t.store, testLayout({ fleet: slug }), { prune: true })).rejects.toThrow(
      `cannot prune domain ${slug}/north: an in-flight operation uses it`,
    );
    const layout = testLayout({ fleet: slug, domains: ['east', 'west', 'north'] });
    layout.domains[2]!.slots = [layout.domains[2]!.slots[0]!];
    await expect(applyLayout(t.store, layout, { prune: true })).rejects.toThrow(
      `cannot prune slot ${slug}/north/gpu0/training: an in-flight operation uses its domain`,
    );
    expect(await dump(slug)).toEqual(before);
  });

  it('rejects an invalid layout with every problem and its JSON path, writing nothing', async () => {
    const slug = nextSlug();
    const bad = testLayout({ fleet: slug }) as FleetLayoutInput & { extra?: unknown };
    bad.domains[1]!.slug = 'east';
    bad.domains[0]!.supervisorUrl = 'file:///etc/passwd';
    bad.extra = true;
    const err = await applyLayout(t.store, bad).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(LayoutValidationError);
    expect((err as LayoutValidationError).problems.map((p) => p.path).sort()).toEqual(
      ['$.domains[0].supervisorUrl', '$.domains[1].slug', '$.extra'].sort(),
    );
    expect(await t.store.fleets.snapshot(slug)).toBeNull();
  });

  it('creates a fleet once when several applies of a new layout race', async () => {
    const slug = nextSlug();
    const reports = await Promise.all(
      Array.from({ length: 4 }, () => applyLayout(t.store, testLayout({ fleet: slug }))),
    );
    expect(reports.filter((r) => r.created.includes(`fleet ${slug}`))).toHaveLength(1);
    expect(new Set(reports.map((r) => r.fleetId)).size).toBe(1);
    expect((await snapshot(slug)).domains).toHaveLength(2);
  });
});
