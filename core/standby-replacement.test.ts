import type { ReplaceFailedStandbyPolicy } from '../schemas/policy';
import { ago, domain, fleet, ID, NOW, operation } from './fleet-fixtures';
import type { DomainView, FleetView } from './fleet-view';
import {
  emptyReplacementState,
  hasReplacementState,
  planStandbyReplacements,
  type ReplacementState,
} from './standby-replacement';

const ON: ReplaceFailedStandbyPolicy = { enabled: true, graceMs: 60_000 };
const WATCH_STARTED = ago(10 * 60_000);

/** Active `a` (ready) and standby `b` (skypilot), `b` as given. */
const withStandby = (b: Partial<DomainView>, over: Partial<FleetView> = {}): FleetView =>
  fleet({
    domains: [domain({ provider: 'skypilot' }), domain({ id: ID.b, slug: 'b', provider: 'skypilot', ...b })],
    ...over,
  });

const failedB = (sinceMs: number, over: Partial<DomainView> = {}) =>
  withStandby({ state: 'failed', stateChangedAt: ago(sinceMs), lastError: 'ECONNREFUSED', ...over });

const plan = (
  f: FleetView,
  state: ReplacementState = emptyReplacementState(),
  settings: ReplaceFailedStandbyPolicy | undefined = ON,
  watchStartedAt = WATCH_STARTED,
) => planStandbyReplacements(f, settings, NOW, watchStartedAt, state);

describe('planStandbyReplacements: sightings and the grace', () => {
  it('tears a managed standby down once it has been seen failed for the grace', () => {
    const { actions, state } = plan(failedB(61_000));
    expect(actions).toEqual([
      {
        kind: 'teardown',
        domainId: ID.b,
        slug: 'b',
        failedSince: ago(61_000),
        reason: expect.stringContaining('standby b failed since') as string,
      },
    ]);
    expect(state.inFlight[ID.b]).toEqual({ domainId: ID.b, phase: 'teardown', startedAt: NOW.toISOString() });
  });

  it('waits while the grace has not passed, remembering when it first saw the failure', () => {
    const { actions, state } = plan(failedB(59_000));
    expect(actions).toEqual([]);
    expect(state.failedSince).toEqual({ [ID.b]: ago(59_000) });
    // A later look keeps the first sighting, so the grace ends on time.
    const later = planStandbyReplacements(failedB(59_000), ON, new Date(NOW.getTime() + 1_000), WATCH_STARTED, state);
    expect(later.actions.map((a) => a.kind)).toEqual(['teardown']);
  });

  it('counts from the watch start, not from a failure time before the monitor was looking', () => {
    // Failed an hour ago by the row, but the watch that saw it began 30 s ago: 30 s seen, not an hour.
    const { actions, state } = plan(failedB(3_600_000), emptyReplacementState(), ON, ago(30_000));
    expect(actions).toEqual([]);
    expect(state.failedSince[ID.b]).toBe(ago(30_000));
  });

  it('forgets a sighting when the standby is no longer failed (it recovered)', () => {
    const first = plan(failedB(10_000)).state;
    expect(plan(withStandby({ state: 'ready' }), first).state.failedSince).toEqual({});
  });

  it('never replaces the active, a static standby, one in an operation, or anything when off', () => {
    const activeFailed = fleet({
      domains: [
        domain({ provider: 'skypilot', state: 'failed', stateChangedAt: ago(600_000) }),
        domain({ id: ID.b, slug: 'b', provider: 'skypilot' }),
      ],
    });
    expect(plan(activeFailed)).toEqual({ state: emptyReplacementState(), actions: [] });
    expect(plan(failedB(600_000, { provider: 'static' })).actions).toEqual([]);
    expect(plan(failedB(600_000, { provider: undefined })).actions).toEqual([]);
    expect(plan(failedB(600_000), undefined, { enabled: false, graceMs: 1 }).actions).toEqual([]);
    // A policy stored before the option existed has no `replaceFailedStandby` at all.
    expect(planStandbyReplacements(failedB(600_000), undefined, NOW, WATCH_STARTED, emptyReplacementState())).toEqual({
      state: { failedSince: { [ID.b]: WATCH_STARTED }, inFlight: {} },
      actions: [],
    });
    const inOp = failedB(600_000, {});
    expect(plan({ ...inOp, inFlightOperation: operation({ targetDomainId: ID.b }) }).actions).toEqual([]);
  });

  it('replaces a skyserve standby the same way', () => {
    expect(plan(failedB(61_000, { provider: 'skyserve' })).actions.map((a) => a.kind)).toEqual(['teardown']);
  });
});

describe('planStandbyReplacements: a replacement in flight', () => {
  const started = (phase: 'teardown' | 'provision', msAgo = 5_000): ReplacementState => ({
    failedSince: {},
    inFlight: { [ID.b]: { domainId: ID.b, phase, startedAt: ago(msAgo) } },
  });

  it('starts nothing twice: one replacement per domain while its teardown has not begun or runs', () => {
    const state: ReplacementState = { ...started('teardown'), failedSince: { [ID.b]: ago(120_000) } };
    expect(plan(failedB(120_000), state).actions).toEqual([]);
    expect(plan(withStandby({ state: 'stopping', stateChangedAt: ago(1_000) }), state).actions).toEqual([]);
  });

  it('provisions once the teardown left the domain stopped, and is done when it is ready', () => {
    const next = plan(withStandby({ state: 'stopped', stateChangedAt: ago(1_000) }), started('teardown'));
    expect(next.actions).toEqual([{ kind: 'provision', domainId: ID.b, slug: 'b' }]);
    expect(next.state.inFlight[ID.b]?.phase).toBe('provision');
    expect(plan(withStandby({ state: 'provisioning', stateChangedAt: ago(500) }), next.state).actions).toEqual([]);
    const done = plan(withStandby({ state: 'ready', stateChangedAt: ago(100) }), next.state);
    expect(done).toEqual({ state: emptyReplacementState(), actions: [] });
  });

  it('drops a replacement whose standby answered again before its teardown began (the teardown refuses it)', () => {
    const recovered = plan(withStandby({ state: 'ready', stateChangedAt: ago(1_000) }), started('teardown'));
    expect(recovered).toEqual({ state: emptyReplacementState(), actions: [] });
  });

  it('finishes a replacement under way even after the option was turned off', () => {
    const next = plan(withStandby({ state: 'stopped', stateChangedAt: ago(1_000) }), started('teardown'), {
      enabled: false,
      graceMs: 60_000,
    });
    expect(next.actions.map((a) => a.kind)).toEqual(['provision']);
  });

  it('drops a phase that failed and sees the domain failed from then on: replaced again after another grace', () => {
    const failedProvision = failedB(2_000);
    const after = plan(failedProvision, started('provision', 10_000));
    expect(after.actions).toEqual([]);
    expect(after.state).toEqual({ failedSince: { [ID.b]: ago(2_000) }, inFlight: {} });
    const graceLater = planStandbyReplacements(
      failedProvision,
      ON,
      new Date(NOW.getTime() + 60_000),
      WATCH_STARTED,
      after.state,
    );
    expect(graceLater.actions.map((a) => a.kind)).toEqual(['teardown']);
  });

  it('starts a phase again when its workflow never moved the domain within the grace', () => {
    const stuck = plan(failedB(600_000), { ...started('teardown', 61_000), failedSince: { [ID.b]: ago(600_000) } });
    expect(stuck.actions.map((a) => a.kind)).toEqual(['teardown']);
    expect(stuck.state.inFlight[ID.b]?.startedAt).toBe(NOW.toISOString());
    const stuckProvision = plan(
      withStandby({ state: 'stopped', stateChangedAt: ago(600_000) }),
      started('provision', 61_000),
    );
    expect(stuckProvision.actions).toEqual([{ kind: 'provision', domainId: ID.b, slug: 'b' }]);
  });

  it('lets go of a domain that became the active or is gone, without acting on it', () => {
    const promoted = fleet({
      activeDomainId: ID.b,
      domains: [domain({ provider: 'skypilot' }), domain({ id: ID.b, slug: 'b', provider: 'skypilot' })],
    });
    expect(plan(promoted, started('teardown'))).toEqual({ state: emptyReplacementState(), actions: [] });
    expect(plan(fleet({ domains: [domain()] }), started('provision'))).toEqual({
      state: emptyReplacementState(),
      actions: [],
    });
  });
});

describe('hasReplacementState (what continue-as-new carries on)', () => {
  it('is false for the empty state, so a monitor that never saw a failed standby carries nothing', () => {
    expect(hasReplacementState(emptyReplacementState())).toBe(false);
  });

  it('is true for a sighting alone, even with the option off: the grace already watched is kept', () => {
    const seen = plan(failedB(1_000), emptyReplacementState(), { enabled: false, graceMs: 60_000 });
    expect(seen.state.inFlight).toEqual({});
    expect(hasReplacementState(seen.state)).toBe(true);
  });

  it('is true for a replacement under way alone', () => {
    const state: ReplacementState = {
      failedSince: {},
      inFlight: { [ID.b]: { domainId: ID.b, phase: 'provision', startedAt: ago(5_000) } },
    };
    expect(hasReplacementState(state)).toBe(true);
  });
});
