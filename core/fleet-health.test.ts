import { fleetHealthSchema } from '../schemas/health';
import { ago, domain, fleet, ID, NOW, policy } from './fleet-fixtures';
import { summarizeHealth } from './fleet-health';
import { heardSince } from './watch-window';

const p = policy({ heartbeatStaleMs: 5_000, failureThreshold: 3 });

describe('summarizeHealth', () => {
  it('describes a healthy fleet with its standby ranking', () => {
    const h = summarizeHealth(fleet(), p, NOW, { isAutoFailoverPaused: false });
    expect(fleetHealthSchema.parse(h)).toEqual(h);
    expect(h).toMatchObject({
      fleetId: ID.fleet,
      activeDomainId: ID.a,
      checkedAt: NOW.toISOString(),
      standbyRanking: [ID.b],
      activeFailure: null,
      failoverBlockedBy: null,
      isAutoFailoverPaused: false,
    });
    expect(h.domains.map((d) => [d.slug, d.isActive, d.status, d.isViableStandby])).toEqual([
      ['a', true, 'healthy', false],
      ['b', false, 'healthy', true],
    ]);
  });

  it('says why a failed active is not being replaced', () => {
    const f = fleet({
      domains: [domain({ lastSeenAt: ago(8_000), consecutiveFailures: 1 }), domain({ id: ID.b, slug: 'b' })],
    });
    const h = summarizeHealth(f, p, NOW, { isAutoFailoverPaused: true });
    expect(h.activeFailure?.reason).toBe('stale');
    expect(h.failoverBlockedBy).toBe('paused');
    expect(h.domains[0]).toMatchObject({ status: 'failed', reasons: ['stale'], heartbeatAgeMs: 8_000 });
  });

  it("gives a host's age since the watcher last heard it, not since the look that found it silent began", () => {
    // East was last heard 166 s ago; the look that produced this view began 297 ms ago.
    const silentEast = domain({ lastSeenAt: ago(166_000), consecutiveFailures: 3, lastError: 'timed out' });
    const looked = heardSince(fleet({ domains: [silentEast, domain({ id: ID.b, slug: 'b' })] }), NOW.getTime() - 297);
    const east = summarizeHealth(looked, p, NOW, { isAutoFailoverPaused: false }).domains[0]!;
    expect(east).toMatchObject({ lastSeenAt: ago(166_000), heartbeatAgeMs: 166_000, status: 'failed' });
  });

  it('gives a never-heard domain no age', () => {
    const never = fleet({ domains: [domain({ lastSeenAt: null, stateChangedAt: ago(1_000) })] });
    expect(summarizeHealth(never, p, NOW, { isAutoFailoverPaused: false }).domains[0]).toMatchObject({
      lastSeenAt: null,
      heartbeatAgeMs: null,
    });
  });
});
