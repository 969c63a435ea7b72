import { defaultFleetPolicy } from '../schemas/policy';
import { detectActiveFailure } from '../workflows/logic/failover-detection';
import type { FleetView } from '../workflows/logic/fleet-view';
import { heardSince } from './fleet-monitor';

const domain = (over: Partial<FleetView['domains'][number]>): FleetView['domains'][number] => ({
  id: '00000000-0000-4000-8000-000000000001',
  slug: 'west',
  state: 'ready',
  stateChangedAt: '2026-01-01T00:00:00.000Z',
  lastSeenAt: '2026-01-01T00:00:00.000Z',
  consecutiveFailures: 1,
  lastError: 'timed out',
  modelNames: ['m'],
  trainingGpus: [],
  ...over,
});
const fleet = (d: FleetView['domains'][number]): FleetView => ({
  id: '00000000-0000-4000-8000-0000000000f1',
  slug: 'f',
  activeDomainId: d.id,
  routeRevision: 3,
  domains: [d],
  inFlightOperation: null,
});

describe('heardSince (staleness counts only the time the monitor has been watching)', () => {
  const policy = defaultFleetPolicy();
  const watchStart = Date.parse('2026-01-01T01:00:00.000Z');
  const now = new Date(watchStart + 600);

  it('does not call a healthy active stale because the control plane was down for an hour', () => {
    const view = fleet(domain({}));
    expect(detectActiveFailure(view.domains[0]!, policy, now, true)?.reason).toBe('stale');
    const watched = heardSince(view, watchStart);
    expect(watched.domains[0]!.lastSeenAt).toBe('2026-01-01T01:00:00.000Z');
    expect(detectActiveFailure(watched.domains[0]!, policy, now, true)).toBeNull();
  });

  it('still finds a domain stale once it stays silent past the bound while watched', () => {
    const watched = heardSince(fleet(domain({ lastSeenAt: null })), watchStart);
    const later = new Date(watchStart + policy.heartbeatStaleMs + 1);
    expect(detectActiveFailure(watched.domains[0]!, policy, later, true)?.reason).toBe('stale');
  });

  it('keeps heartbeats newer than the watch as they are', () => {
    const recent = domain({ lastSeenAt: '2026-01-01T01:00:00.300Z' });
    expect(heardSince(fleet(recent), watchStart).domains[0]).toBe(recent);
  });
});
