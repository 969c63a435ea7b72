import { ago, domain, fleet, ID, NOW, policy } from './fleet-fixtures';
import { compareStandbys, rankStandbys, standbyViability } from './standby-ranking';

const p = policy({ heartbeatStaleMs: 5_000, failureThreshold: 3 });
const active = domain({ id: ID.a, slug: 'a', modelNames: ['llama', 'qwen'] });

describe('standbyViability', () => {
  it('accepts a ready standby with a fresh heartbeat that serves every model of the active', () => {
    const b = domain({ id: ID.b, slug: 'b', modelNames: ['llama', 'qwen', 'extra'] });
    expect(standbyViability(b, active, p, NOW)).toEqual({ domainId: ID.b, isViable: true, reasons: [] });
  });

  it('accepts a degraded standby', () => {
    const b = domain({ id: ID.b, state: 'degraded', modelNames: ['llama', 'qwen'] });
    expect(standbyViability(b, active, p, NOW).isViable).toBe(true);
  });

  it('refuses the active itself', () => {
    expect(standbyViability(active, active, p, NOW).reasons).toEqual(['is_active']);
  });

  it.each(['failed', 'provisioning', 'stopping', 'stopped'] as const)('refuses a %s domain', (state) => {
    const b = domain({ id: ID.b, state, modelNames: ['llama', 'qwen'] });
    expect(standbyViability(b, active, p, NOW).reasons).toEqual(['not_ready']);
  });

  it('refuses a stale standby', () => {
    const b = domain({ id: ID.b, lastSeenAt: ago(6_000), modelNames: ['llama', 'qwen'] });
    expect(standbyViability(b, active, p, NOW).reasons).toEqual(['stale']);
  });

  it('refuses a standby that missed failureThreshold polls but accepts one that missed fewer', () => {
    const failing = domain({ id: ID.b, consecutiveFailures: 3, modelNames: ['llama', 'qwen'] });
    const flaky = domain({ id: ID.b, consecutiveFailures: 2, modelNames: ['llama', 'qwen'] });
    expect(standbyViability(failing, active, p, NOW).reasons).toEqual(['consecutive_failures']);
    expect(standbyViability(flaky, active, p, NOW).isViable).toBe(true);
  });

  it('refuses a standby that lacks a model the active serves', () => {
    const b = domain({ id: ID.b, modelNames: ['llama'] });
    expect(standbyViability(b, active, p, NOW).reasons).toEqual(['missing_models']);
  });

  it('refuses a standby with no inference models', () => {
    const b = domain({ id: ID.b, modelNames: [] });
    expect(standbyViability(b, active, p, NOW).reasons).toEqual(['no_inference']);
  });

  it('accepts any serving standby when the fleet has no active', () => {
    expect(standbyViability(domain({ id: ID.b }), null, p, NOW).isViable).toBe(true);
  });
});

describe('rankStandbys', () => {
  it('puts ready before degraded even when the degraded one is fresher', () => {
    const degraded = domain({ id: ID.b, slug: 'b', state: 'degraded', lastSeenAt: ago(10) });
    const ready = domain({ id: ID.c, slug: 'c', state: 'ready', lastSeenAt: ago(900) });
    const ranked = rankStandbys(fleet({ domains: [domain(), degraded, ready] }), p, NOW);
    expect(ranked.map((d) => d.id)).toEqual([ID.c, ID.b]);
  });

  it('puts the freshest heartbeat first among equals', () => {
    const older = domain({ id: ID.b, slug: 'b', lastSeenAt: ago(900) });
    const fresher = domain({ id: ID.c, slug: 'c', lastSeenAt: ago(100) });
    expect(rankStandbys(fleet({ domains: [domain(), older, fresher] }), p, NOW).map((d) => d.id)).toEqual([ID.c, ID.b]);
  });

  it('breaks a tie on slug', () => {
    const z = domain({ id: ID.b, slug: 'zeta', lastSeenAt: ago(100) });
    const al = domain({ id: ID.c, slug: 'alpha', lastSeenAt: ago(100) });
    expect(rankStandbys(fleet({ domains: [domain(), z, al] }), p, NOW).map((d) => d.slug)).toEqual(['alpha', 'zeta']);
  });

  it('leaves out the active and every non-viable domain', () => {
    const dead = domain({ id: ID.b, slug: 'b', state: 'failed' });
    const ok = domain({ id: ID.c, slug: 'c' });
    expect(rankStandbys(fleet({ domains: [domain(), dead, ok] }), p, NOW).map((d) => d.id)).toEqual([ID.c]);
  });

  it('returns nothing when no standby is viable', () => {
    const f = fleet({ domains: [domain(), domain({ id: ID.b, slug: 'b', lastSeenAt: ago(60_000) })] });
    expect(rankStandbys(f, p, NOW)).toEqual([]);
  });

  it('is a total order: comparing a domain with itself is zero', () => {
    const d = domain();
    expect(compareStandbys(d, d)).toBe(0);
  });
});
