import { assessDomain, isStale, silenceMs } from './domain-health';
import { ago, domain, NOW, policy } from './fleet-fixtures';

describe('assessDomain', () => {
  const p = policy({ heartbeatStaleMs: 5_000, failureThreshold: 3 });

  it('calls a ready domain with a fresh heartbeat healthy', () => {
    expect(assessDomain(domain(), p, NOW)).toMatchObject({ status: 'healthy', reasons: [], isStale: false });
  });

  it('calls a degraded domain degraded', () => {
    expect(assessDomain(domain({ state: 'degraded' }), p, NOW)).toMatchObject({
      status: 'degraded',
      reasons: ['state_degraded'],
    });
  });

  it('fails a domain that missed failureThreshold consecutive polls', () => {
    expect(assessDomain(domain({ consecutiveFailures: 3 }), p, NOW)).toMatchObject({
      status: 'failed',
      reasons: ['consecutive_failures'],
    });
  });

  it('keeps a domain one poll short of the threshold healthy', () => {
    expect(assessDomain(domain({ consecutiveFailures: 2 }), p, NOW).status).toBe('healthy');
  });

  it('fails a domain whose last successful poll is older than heartbeatStaleMs, with a failed poll since', () => {
    expect(assessDomain(domain({ lastSeenAt: ago(5_001), consecutiveFailures: 1 }), p, NOW)).toMatchObject({
      status: 'failed',
      reasons: ['stale'],
      isStale: true,
      heardAgeMs: 5_001,
    });
  });

  it('keeps a stale domain no failed poll speaks against in its status, as unpolled (the watcher lagged)', () => {
    expect(assessDomain(domain({ lastSeenAt: ago(60_000), consecutiveFailures: 0 }), p, NOW)).toMatchObject({
      status: 'healthy',
      reasons: ['unpolled'],
      isStale: true,
      heardAgeMs: 60_000,
    });
    expect(assessDomain(domain({ state: 'degraded', lastSeenAt: ago(60_000) }), p, NOW)).toMatchObject({
      status: 'degraded',
      reasons: ['state_degraded', 'unpolled'],
    });
  });

  it('does not call a heartbeat exactly heartbeatStaleMs old stale', () => {
    expect(isStale(domain({ lastSeenAt: ago(5_000) }), p, NOW)).toBe(false);
  });

  it('measures a never-seen domain from its last state change', () => {
    const fresh = domain({ lastSeenAt: null, stateChangedAt: ago(1_000) });
    const old = domain({ lastSeenAt: null, stateChangedAt: ago(10_000) });
    expect(silenceMs(fresh, NOW)).toBe(1_000);
    expect(assessDomain(fresh, p, NOW).heardAgeMs).toBeNull();
    expect(assessDomain(fresh, p, NOW).status).toBe('healthy');
    expect(assessDomain({ ...old, consecutiveFailures: 1 }, p, NOW).status).toBe('failed');
  });

  it('reports a domain the store marked failed as failed even with a fresh heartbeat', () => {
    expect(assessDomain(domain({ state: 'failed' }), p, NOW)).toMatchObject({
      status: 'failed',
      reasons: ['state_failed'],
    });
  });

  it('lists every reason that applies', () => {
    const d = domain({ state: 'failed', consecutiveFailures: 9, lastSeenAt: ago(60_000) });
    expect(assessDomain(d, p, NOW).reasons).toEqual(['state_failed', 'consecutive_failures', 'stale']);
  });

  it.each(['provisioning', 'stopping', 'stopped'] as const)('calls a %s domain unavailable', (state) => {
    const a = assessDomain(domain({ state, lastSeenAt: ago(60_000) }), p, NOW);
    expect(a.status).toBe('unavailable');
    expect(a.reasons[0]).toBe(`state_${state}`);
  });

  it('reads a heartbeat from the future (clock skew) as zero age', () => {
    expect(silenceMs(domain({ lastSeenAt: new Date(NOW.getTime() + 500).toISOString() }), NOW)).toBe(0);
  });

  it('holds against a domain only the silence since its watch began, and shows the age since it was heard', () => {
    const heardLongBefore = domain({ lastSeenAt: ago(166_000), watchedFrom: ago(297) });
    expect(silenceMs(heardLongBefore, NOW)).toBe(297);
    expect(assessDomain(heardLongBefore, p, NOW)).toMatchObject({ status: 'healthy', heardAgeMs: 166_000 });
    const heardWhileWatched = domain({ lastSeenAt: ago(100), watchedFrom: ago(297) });
    expect(silenceMs(heardWhileWatched, NOW)).toBe(100);
  });
});
