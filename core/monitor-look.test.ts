import { formatAge, monitorLook, monitorStaleAfterMs, polledDomain } from './monitor-look';

const NOW = new Date('2026-12-01T12:00:00.000Z');
const ago = (ms: number) => new Date(NOW.getTime() - ms).toISOString();

describe('monitorLook', () => {
  const staleAfterMs = monitorStaleAfterMs({ heartbeatStaleMs: 3_000 });

  it('allows one checkpoint plus the heartbeat staleness', () => {
    expect(staleAfterMs).toBe(63_000);
  });

  it('is fresh within the bound and stale past it', () => {
    expect(monitorLook(ago(63_000), NOW, staleAfterMs)).toEqual({
      checkedAt: ago(63_000),
      ageMs: 63_000,
      isStale: false,
      staleAfterMs,
    });
    expect(monitorLook(ago(63_001), NOW, staleAfterMs).isStale).toBe(true);
  });

  it('calls a monitor that gave no look stale', () => {
    expect(monitorLook(null, NOW, staleAfterMs)).toMatchObject({ ageMs: null, isStale: true });
  });
});

describe('polledDomain', () => {
  const stored = {
    id: '30000000-0000-4000-8000-00000000000a',
    slug: 'east',
    state: 'ready' as const,
    isActive: true,
    consecutiveFailures: 0,
    lastError: null,
  };

  it('adds the age since the domain was last heard, null for a domain never heard, and whether it is stale', () => {
    expect(polledDomain({ ...stored, lastSeenAt: ago(1_500) }, 5_000, NOW)).toMatchObject({
      lastSeenAgeMs: 1_500,
      isStale: false,
    });
    expect(polledDomain({ ...stored, lastSeenAt: ago(166_000) }, 5_000, NOW)).toMatchObject({
      lastSeenAgeMs: 166_000,
      isStale: true,
    });
    expect(polledDomain({ ...stored, lastSeenAt: null }, 5_000, NOW)).toMatchObject({
      lastSeenAgeMs: null,
      isStale: true,
    });
  });
});

describe('formatAge', () => {
  it.each([
    [null, 'never'],
    [850, '850ms'],
    [12_340, '12.3s'],
    [245_000, '4m05s'],
    [7_620_000, '2h07m'],
  ])('%p ms reads %p', (ms, text) => {
    expect(formatAge(ms)).toBe(text);
  });
});
