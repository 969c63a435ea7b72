import { sightingSchema } from '../schemas/status';
import { ago, NOW } from './fleet-fixtures';
import { heardAgeMs, sightingOf } from './sighting';

describe('heardAgeMs', () => {
  it('is the time since the watcher last heard the domain, null when never, zero when from the future', () => {
    expect(heardAgeMs(ago(166_000), NOW)).toBe(166_000);
    expect(heardAgeMs(null, NOW)).toBeNull();
    expect(heardAgeMs(new Date(NOW.getTime() + 500).toISOString(), NOW)).toBe(0);
  });
});

describe('sightingOf', () => {
  it("shows a domain heard within the stale limit with its host's report as current", () => {
    const s = sightingOf({ state: 'ready', lastSeenAt: ago(4_000) }, 5_000, NOW);
    expect(sightingSchema.parse(s)).toEqual({
      lastSeenAt: ago(4_000),
      ageMs: 4_000,
      isStale: false,
      isReportCurrent: true,
    });
  });

  it('shows a host silent past the stale limit, or never heard, as stale: its last report is not its state now', () => {
    expect(sightingOf({ state: 'ready', lastSeenAt: ago(166_000) }, 5_000, NOW)).toMatchObject({
      ageMs: 166_000,
      isStale: true,
      isReportCurrent: false,
    });
    expect(sightingOf({ state: 'provisioning', lastSeenAt: null }, 5_000, NOW)).toMatchObject({
      ageMs: null,
      isStale: true,
      isReportCurrent: false,
    });
  });

  it("does not show a failed domain's last report as current, however recently it was heard", () => {
    expect(sightingOf({ state: 'failed', lastSeenAt: ago(100) }, 5_000, NOW)).toMatchObject({
      isStale: false,
      isReportCurrent: false,
    });
  });
});
