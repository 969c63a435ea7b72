import { detectActiveFailure } from './failover-detection';
import { ago, domain, NOW, policy } from './fleet-fixtures';

const p = policy({ heartbeatStaleMs: 5_000, failureThreshold: 3, degradedGraceMs: 30_000 });

describe('detectActiveFailure', () => {
  it('finds nothing wrong with a ready active that answers', () => {
    expect(detectActiveFailure(domain(), p, NOW, true)).toBeNull();
  });

  it('fails an active that missed failureThreshold consecutive polls', () => {
    expect(detectActiveFailure(domain({ consecutiveFailures: 3 }), p, NOW, true)?.reason).toBe('consecutive_failures');
  });

  it('does not fail an active one poll short of the threshold', () => {
    expect(detectActiveFailure(domain({ consecutiveFailures: 2 }), p, NOW, true)).toBeNull();
  });

  it('fails an active whose heartbeat went stale past heartbeatStaleMs with a failed poll since', () => {
    expect(detectActiveFailure(domain({ lastSeenAt: ago(5_001), consecutiveFailures: 1 }), p, NOW, true)?.reason).toBe(
      'stale',
    );
    expect(detectActiveFailure(domain({ lastSeenAt: ago(5_000), consecutiveFailures: 1 }), p, NOW, true)).toBeNull();
  });

  it('holds silence against the host only when a poll that counted failed since it was last heard', () => {
    // Long unheard, yet no counted poll failed: the watcher lagged, saw nothing, or did not poll. Its problem.
    expect(detectActiveFailure(domain({ lastSeenAt: ago(60_000), consecutiveFailures: 0 }), p, NOW, true)).toBeNull();
  });

  it('fails an active degraded past degradedGraceMs while a viable standby exists', () => {
    const d = domain({ state: 'degraded', stateChangedAt: ago(30_000) });
    expect(detectActiveFailure(d, p, NOW, true)?.reason).toBe('degraded_grace');
  });

  it('keeps a degraded active within its grace', () => {
    const d = domain({ state: 'degraded', stateChangedAt: ago(29_999) });
    expect(detectActiveFailure(d, p, NOW, true)).toBeNull();
  });

  it('keeps a degraded active past its grace when no standby could take over', () => {
    const d = domain({ state: 'degraded', stateChangedAt: ago(120_000) });
    expect(detectActiveFailure(d, p, NOW, false)).toBeNull();
  });

  it('reports an active the store already marked failed', () => {
    expect(detectActiveFailure(domain({ state: 'failed' }), p, NOW, false)?.reason).toBe('already_failed');
  });

  it.each(['stopping', 'stopped'] as const)('treats a %s active as gone', (state) => {
    expect(detectActiveFailure(domain({ state }), p, NOW, true)?.reason).toBe('stopped');
  });

  it('reports a fleet without an active domain', () => {
    expect(detectActiveFailure(null, p, NOW, true)?.reason).toBe('no_active');
  });

  it('prefers the consecutive-failure reason over staleness and names the counts in its message', () => {
    const f = detectActiveFailure(
      domain({ slug: 'east', consecutiveFailures: 4, lastSeenAt: ago(9_000) }),
      p,
      NOW,
      true,
    );
    expect(f).toEqual({
      reason: 'consecutive_failures',
      message: 'active domain east failed 4 consecutive polls (threshold 3)',
    });
  });

  it("ends its message with the last poll's error, so the event says what failed", () => {
    const f = detectActiveFailure(
      domain({ slug: 'east', consecutiveFailures: 3, lastError: 'model m: engine wedged: 2 running, 0 waiting' }),
      p,
      NOW,
      true,
    );
    expect(f?.message).toBe(
      'active domain east failed 3 consecutive polls (threshold 3): model m: engine wedged: 2 running, 0 waiting',
    );
  });

  it('does not fail a provisioning active that is still within its heartbeat window', () => {
    expect(detectActiveFailure(domain({ state: 'provisioning' }), p, NOW, true)).toBeNull();
  });
});
