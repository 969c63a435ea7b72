import { defaultFleetPolicy } from '../schemas/policy';
import { detectActiveFailure } from './failover-detection';
import type { FleetView } from './fleet-view';
import {
  continuityAfterWatch,
  countedFrom,
  degradedSince,
  heardSince,
  openWatchWindow,
  watchedFleet,
  watchingSinceMs,
} from './watch-window';

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
    expect(watched.domains[0]!.watchedFrom).toBe('2026-01-01T01:00:00.000Z');
    expect(detectActiveFailure(watched.domains[0]!, policy, now, true)).toBeNull();
  });

  it('leaves when the domain was heard as it was: the age shown is the age since it was heard', () => {
    const watched = heardSince(fleet(domain({})), watchStart);
    expect(watched.domains[0]!.lastSeenAt).toBe('2026-01-01T00:00:00.000Z');
  });

  it('still finds a domain stale once it stays silent past the bound while watched', () => {
    const watched = heardSince(fleet(domain({ lastSeenAt: null })), watchStart);
    const later = new Date(watchStart + policy.heartbeatStaleMs + 1);
    expect(detectActiveFailure(watched.domains[0]!, policy, later, true)?.reason).toBe('stale');
  });

  it('keeps heartbeats newer than the watch as they are, and counts silence from them', () => {
    const recent = domain({ lastSeenAt: '2026-01-01T01:00:00.300Z' });
    const watched = heardSince(fleet(recent), watchStart).domains[0]!;
    expect(watched.lastSeenAt).toBe(recent.lastSeenAt);
    const later = new Date(Date.parse(recent.lastSeenAt!) + policy.heartbeatStaleMs + 1);
    expect(detectActiveFailure(watched, policy, later, true)?.reason).toBe('stale');
  });
});

describe('degradedSince (the degraded grace counts only the time the monitor has been watching)', () => {
  const policy = defaultFleetPolicy();
  const watchStart = Date.parse('2026-01-01T01:00:00.000Z');
  const degraded = domain({ state: 'degraded', lastSeenAt: '2026-01-01T01:00:00.200Z', consecutiveFailures: 0 });

  it('does not fail over an active degraded since before a control-plane outage on the first look after it', () => {
    const now = new Date(watchStart + 600);
    const view = fleet(degraded);
    expect(detectActiveFailure(view.domains[0]!, policy, now, true)?.reason).toBe('degraded_grace');
    const watched = degradedSince(view, watchStart);
    expect(watched.domains[0]!.stateChangedAt).toBe('2026-01-01T01:00:00.000Z');
    expect(detectActiveFailure(watched.domains[0]!, policy, now, true)).toBeNull();
  });

  it('fails it over once it stays degraded for the grace while watched', () => {
    const later = new Date(watchStart + policy.degradedGraceMs);
    // Still answering polls all along (only its models are unwell).
    const answering = { ...degraded, lastSeenAt: new Date(later.getTime() - 100).toISOString() };
    const watched = degradedSince(fleet(answering), watchStart);
    expect(detectActiveFailure(watched.domains[0]!, policy, later, true)?.reason).toBe('degraded_grace');
  });

  it('leaves domains that are not degraded, or degraded since the watch began, as they are', () => {
    const ready = domain({});
    const recent = domain({ state: 'degraded', stateChangedAt: '2026-01-01T01:00:00.300Z' });
    expect(degradedSince(fleet(ready), watchStart).domains[0]).toBe(ready);
    expect(degradedSince(fleet(recent), watchStart).domains[0]).toBe(recent);
  });
});

describe('watchingSinceMs', () => {
  const start = Date.parse('2026-01-01T01:00:00.000Z');
  const carried = { watchingSince: '2026-01-01T00:59:00.000Z', lookedUntil: '2026-01-01T00:59:59.900Z' };
  const GAP = 5_000;

  it('carries the previous watches on when this first attempt follows the last look within the gap', () => {
    expect(watchingSinceMs(carried, 1, start, GAP)).toBe(start - 60_000);
  });

  it('starts again after a gap: the workers were away, the watch waited in the queue or the workflow paused', () => {
    expect(watchingSinceMs(carried, 1, start + 60_000, GAP)).toBe(start + 60_000);
  });

  it('starts again on a retry: its worker died mid-watch', () => {
    expect(watchingSinceMs(carried, 2, start, GAP)).toBe(start);
  });

  it('starts at the watch itself for the first watch, and never counts from the future', () => {
    expect(watchingSinceMs({}, 1, start, GAP)).toBe(start);
    expect(watchingSinceMs({ watchingSince: carried.watchingSince }, 1, start, GAP)).toBe(start);
    expect(watchingSinceMs({ ...carried, watchingSince: '2026-01-01T02:00:00.000Z' }, 1, start, GAP)).toBe(start);
  });
});

describe('countedFrom (one dating rule for every clock the monitor keeps)', () => {
  const since = '2026-01-01T01:00:00.000Z';

  it('dates a time from before the looking began to its start, and keeps a later one', () => {
    expect(countedFrom('2026-01-01T00:00:00.000Z', since)).toBe('2026-01-01T01:00:00.000Z');
    expect(countedFrom('2026-01-01T01:00:00.000Z', since)).toBe('2026-01-01T01:00:00.000Z');
    expect(countedFrom('2026-01-01T01:00:05.000Z', since)).toBe('2026-01-01T01:00:05.000Z');
  });
});

describe('openWatchWindow and watchedFleet', () => {
  const start = Date.parse('2026-01-01T01:00:00.000Z');
  const carried = { watchingSince: '2026-01-01T00:30:00.000Z', lookedUntil: '2026-01-01T00:59:59.000Z' };
  const old = domain({ state: 'degraded', stateChangedAt: '2026-01-01T00:00:00.000Z' });

  it('dates heartbeats to this attempt and degradations to the continuous watching', () => {
    const w = openWatchWindow(carried, 1, start, 5_000);
    expect(w).toEqual({ startedAtMs: start, watchingSinceMs: Date.parse(carried.watchingSince) });
    const seen = watchedFleet(fleet(old), w).domains[0]!;
    expect(seen.watchedFrom).toBe('2026-01-01T01:00:00.000Z');
    expect(seen.lastSeenAt).toBe(old.lastSeenAt);
    expect(seen.stateChangedAt).toBe('2026-01-01T00:30:00.000Z');
  });

  it('dates degradations to this attempt too when it does not follow on', () => {
    const seen = watchedFleet(fleet(old), openWatchWindow(carried, 2, start, 5_000)).domains[0]!;
    expect(seen.stateChangedAt).toBe('2026-01-01T01:00:00.000Z');
  });
});

describe('continuityAfterWatch', () => {
  const carried = { watchingSince: '2026-01-01T00:30:00.000Z', lookedUntil: '2026-01-01T00:59:00.000Z' };
  const now = '2026-01-01T01:00:09.000Z';

  it('takes what a returning watch reported and its own time as the last look', () => {
    const watched = { observedAt: '2026-01-01T01:00:05.000Z', watchingSince: '2026-01-01T01:00:00.000Z' };
    expect(continuityAfterWatch(carried, watched, now)).toEqual({
      watchingSince: '2026-01-01T01:00:00.000Z',
      lookedUntil: '2026-01-01T01:00:05.000Z',
    });
  });

  it('keeps the carried watchingSince when the watch reported none, or was woken without a result', () => {
    expect(continuityAfterWatch(carried, { observedAt: '2026-01-01T01:00:05.000Z' }, now)).toEqual({
      watchingSince: carried.watchingSince,
      lookedUntil: '2026-01-01T01:00:05.000Z',
    });
    expect(continuityAfterWatch(carried, null, now)).toEqual({
      watchingSince: carried.watchingSince,
      lookedUntil: now,
    });
  });
});
