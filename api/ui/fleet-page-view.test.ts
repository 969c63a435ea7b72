import { domainSnapshot } from '../../core/fleet-fixtures';
import type { FleetHealth } from '../../schemas/health';
import { ago, ID, NOW, pageInput, progress, promotion, snapshot, step } from '../../test/support/fleet-page-fixtures';
import { fleetPage, fleetSummary } from './fleet-page-view';

const monitor = (overrides: Partial<FleetHealth> = {}): FleetHealth => ({
  fleetId: ID.fleet,
  fleetSlug: 'prod',
  activeDomainId: ID.a,
  routeRevision: 3,
  autoFailover: true,
  isAutoFailoverPaused: false,
  checkedAt: ago(2_000),
  domains: [],
  standbyRanking: [ID.b],
  activeFailure: null,
  failoverBlockedBy: null,
  inFlightOperationId: null,
  ...overrides,
});
const texts = (input = pageInput()) => fleetPage(input).warnings.map((w) => `${w.level}: ${w.text}`);
/** `a` failed and silent, `b` the active: the fleet after a failover, with no standby left. */
const failedOver = () =>
  snapshot({
    activeDomainId: ID.b,
    routeRevision: 4,
    domains: [
      domainSnapshot('a', { state: 'failed', isActive: false, lastSeenAt: ago(40_000) }),
      domainSnapshot('b', { isActive: true, lastSeenAt: ago(500) }),
    ],
  });

describe('fleetPage warnings', () => {
  it('has none for a healthy fleet with a ready standby, auto-failover on and a monitor that looked just now', () => {
    expect(texts(pageInput({ monitor: monitor() }))).toEqual([]);
  });

  it('says no standby is ready when the only other domain is the failed old active', () => {
    expect(texts(pageInput({ fleet: failedOver(), monitor: monitor() }))).toEqual([
      'critical: No standby ready: auto-failover could not move traffic',
    ]);
  });

  it('says when the active is failed, silent or missing, before anything else', () => {
    const failedActive = snapshot({ domains: [domainSnapshot('a', { state: 'failed' }), domainSnapshot('b')] });
    expect(texts(pageInput({ fleet: failedActive, monitor: monitor() }))[0]).toBe('critical: Active a is failed');
    const silent = snapshot({ domains: [domainSnapshot('a', { lastSeenAt: ago(12_000) }), domainSnapshot('b')] });
    expect(texts(pageInput({ fleet: silent, monitor: monitor() }))[0]).toBe(
      'critical: Active a is silent: last heard 12 s ago',
    );
    expect(texts(pageInput({ fleet: snapshot({ activeDomainId: null }), monitor: monitor() }))[0]).toBe(
      'critical: No active domain: nothing serves this fleet',
    );
  });

  it('says who paused auto-failover, when and why, and when the policy turns it off', () => {
    const paused = snapshot({ autoFailoverPause: { by: 'api:oncall', reason: 'maintenance', at: ago(125_000) } });
    expect(texts(pageInput({ fleet: paused, monitor: monitor() }))).toEqual([
      'warning: Auto-failover paused by api:oncall 2 min 05 s ago: maintenance',
    ]);
    const off = snapshot({ policy: { ...snapshot().policy, autoFailover: false } });
    expect(texts(pageInput({ fleet: off, monitor: monitor() }))).toEqual([
      'warning: Auto-failover is off in the fleet policy: only an operator moves traffic',
    ]);
  });

  it('says when the monitor does not answer or has not looked for longer than it ever should', () => {
    expect(texts(pageInput({ monitor: null }))).toEqual([
      'warning: Monitor not answering: no failover is being decided',
    ]);
    // Stale past one checkpoint (60 s) plus heartbeatStaleMs (5 s).
    expect(texts(pageInput({ monitor: monitor({ checkedAt: ago(66_000) }) }))).toEqual([
      'warning: Monitor last looked 1 min 06 s ago: no failover is being decided',
    ]);
  });
});

describe('fleetPage', () => {
  it('sums up the pointer, auto-failover, the monitor’s look and the held requests', () => {
    const page = fleetPage(pageInput({ monitor: monitor(), held: { count: 3, max: 1_000 } }));
    expect(page).toMatchObject({
      slug: 'prod',
      active: 'a',
      routeRevision: 3,
      at: NOW.toISOString(),
      autoFailover: { text: 'on', tone: 'ok' },
      monitor: { text: 'looked 2 s ago; active healthy', tone: 'ok' },
      held: '3 of at most 1000 (this API process)',
    });
    const failing = monitor({
      activeFailure: { reason: 'stale', message: 'no poll for 6 s' },
      failoverBlockedBy: 'paused',
    });
    expect(fleetPage(pageInput({ monitor: failing })).monitor).toEqual({
      text: 'looked 2 s ago; active failed (stale: no poll for 6 s); failover blocked by paused',
      tone: 'bad',
    });
    expect(fleetPage(pageInput()).monitor).toEqual({ text: 'no answer', tone: 'bad' });
  });

  it('lists the newest operations with their steps and holds out the last failed one with its error', () => {
    const failed = promotion({
      id: 'op-failed',
      state: 'failed',
      createdAt: ago(10_000),
      finishedAt: ago(9_000),
      error: { step: 'probeModels', code: 'ProbeFailed', message: 'llama answered 500' },
    });
    const page = fleetPage(
      pageInput({
        fleet: failedOver(),
        operations: [failed, promotion()],
        progress: new Map([
          ['op-failed', null],
          [ID.op, progress([step({ step: 'stopTraining', startedAt: ago(29_800), finishedAt: ago(28_600) })])],
        ]),
      }),
    );
    expect(page.lastFailed).toMatchObject({ id: 'op-failed', error: 'probeModels: ProbeFailed: llama answered 500' });
    expect(
      page.operations.map((o) => [o.id, o.outcome, o.steps?.map((s) => `${s.name} ${s.duration}`) ?? null]),
    ).toEqual([
      ['op-failed', 'failed', null],
      [ID.op, 'succeeded', ['stopTraining 1.2 s']],
    ]);
    expect(page.domains.map((d) => [d.slug, d.role])).toEqual([
      ['a', 'failed'],
      ['b', 'active'],
    ]);
  });
});

describe('fleetSummary', () => {
  it('names the active and the warnings a glance at the list of fleets needs', () => {
    expect(fleetSummary(failedOver(), NOW)).toEqual({
      slug: 'prod',
      active: 'b',
      warnings: [{ level: 'critical', text: 'No standby ready: auto-failover could not move traffic' }],
    });
  });
});
