import { ago, domain, fleet, ID, NOW, operation, policy } from './fleet-fixtures';
import { coolingDownIds, decideMonitorAction, operationToStart } from './monitor-decision';
import { dueDigest } from './watch-shard';

const p = policy({ heartbeatStaleMs: 5_000, failureThreshold: 3, degradedGraceMs: 30_000 });
const running = { isAutoFailoverPaused: false };
const deadActive = domain({ consecutiveFailures: 3, lastSeenAt: ago(2_000) });

describe('decideMonitorAction', () => {
  it('does nothing while the active is healthy', () => {
    expect(decideMonitorAction(fleet(), p, NOW, running)).toEqual({ kind: 'none', failure: null, blockedBy: null });
  });

  it('marks a failing active failed and promotes the best standby', () => {
    const f = fleet({ domains: [deadActive, domain({ id: ID.b, slug: 'b' })] });
    expect(decideMonitorAction(f, p, NOW, running)).toMatchObject({
      kind: 'failover',
      activeDomainId: ID.a,
      shouldMarkActiveFailed: true,
      promoteDomainId: ID.b,
      blockedBy: null,
      failure: { reason: 'consecutive_failures' },
    });
  });

  it('holds when the active is failed by silence alone and every other domain is as silent: the watcher is blind', () => {
    const silent = domain({ lastSeenAt: ago(6_000), consecutiveFailures: 1 });
    const f = fleet({ domains: [silent, domain({ id: ID.b, slug: 'b', lastSeenAt: ago(6_000) })] });
    expect(decideMonitorAction(f, p, NOW, running)).toEqual({
      kind: 'none',
      failure: expect.objectContaining({ reason: 'stale' }),
      blockedBy: 'watcher_blind',
    });
    expect(dueDigest(f, p, NOW, false)).toBeNull();
  });

  it('fails over a silent active while another domain answers: a dying region, not a blind watcher', () => {
    const f = fleet({
      domains: [domain({ lastSeenAt: ago(6_000), consecutiveFailures: 1 }), domain({ id: ID.b, slug: 'b' })],
    });
    expect(decideMonitorAction(f, p, NOW, running)).toMatchObject({
      kind: 'failover',
      shouldMarkActiveFailed: true,
      promoteDomainId: ID.b,
      failure: { reason: 'stale' },
    });
  });

  it('never holds failed polls, the hosts own evidence, whatever the other domains show', () => {
    const f = fleet({ domains: [deadActive, domain({ id: ID.b, slug: 'b', lastSeenAt: ago(6_000) })] });
    expect(decideMonitorAction(f, p, NOW, running)).toMatchObject({
      kind: 'failover',
      shouldMarkActiveFailed: true,
      failure: { reason: 'consecutive_failures' },
    });
  });

  it('promotes the freshest of several ready standbys', () => {
    const f = fleet({
      domains: [
        deadActive,
        domain({ id: ID.b, slug: 'b', lastSeenAt: ago(800) }),
        domain({ id: ID.c, slug: 'c', lastSeenAt: ago(200) }),
      ],
    });
    const d = decideMonitorAction(f, p, NOW, running);
    expect(d.kind === 'failover' && d.promoteDomainId).toBe(ID.c);
  });

  it('promotes away from an active that stayed degraded past its grace', () => {
    const f = fleet({ domains: [domain({ state: 'degraded', stateChangedAt: ago(31_000) }), domain({ id: ID.b })] });
    expect(decideMonitorAction(f, p, NOW, running)).toMatchObject({
      kind: 'failover',
      shouldMarkActiveFailed: true,
      promoteDomainId: ID.b,
      failure: { reason: 'degraded_grace' },
    });
  });

  it('only marks the active failed while auto-failover is paused', () => {
    const f = fleet({ domains: [deadActive, domain({ id: ID.b })] });
    expect(decideMonitorAction(f, p, NOW, { isAutoFailoverPaused: true })).toMatchObject({
      kind: 'failover',
      shouldMarkActiveFailed: true,
      promoteDomainId: null,
      blockedBy: 'paused',
    });
  });

  it('only marks the active failed when the policy turns auto-failover off', () => {
    const f = fleet({ domains: [deadActive, domain({ id: ID.b })] });
    expect(decideMonitorAction(f, policy({ ...p, autoFailover: false }), NOW, running)).toMatchObject({
      kind: 'failover',
      promoteDomainId: null,
      blockedBy: 'auto_failover_off',
    });
  });

  it('does not start a second promotion while an operation is in flight', () => {
    const f = fleet({ domains: [deadActive, domain({ id: ID.b })], inFlightOperation: operation() });
    expect(decideMonitorAction(f, p, NOW, running)).toMatchObject({
      kind: 'failover',
      promoteDomainId: null,
      blockedBy: 'operation_in_flight',
    });
  });

  it('asks a committed promotion that only demotes the old active to end when its target, the active, fails', () => {
    const committed = operation({ targetDomainId: ID.a, routingCommitted: true });
    const f = fleet({ domains: [deadActive, domain({ id: ID.b, slug: 'b' })], inFlightOperation: committed });
    expect(decideMonitorAction(f, p, NOW, running)).toMatchObject({
      kind: 'failover',
      shouldMarkActiveFailed: true,
      promoteDomainId: null,
      blockedBy: 'operation_in_flight',
      releaseOperationId: ID.op,
    });
    // Asked once; then the failed active is left as it is until the operation ends.
    const marked = fleet({
      domains: [domain({ ...deadActive, state: 'failed' }), domain({ id: ID.b, slug: 'b' })],
      inFlightOperation: committed,
    });
    expect(decideMonitorAction(marked, p, NOW, { ...running, releasedOperationIds: [ID.op] })).toMatchObject({
      kind: 'none',
      blockedBy: 'operation_in_flight',
    });
    // Its shard, which does not know what the monitor asked, still calls it due: the monitor applies its memory.
    expect(dueDigest(marked, p, NOW, false)).toBe(`failover:already_failed:marked:-:${ID.op}`);
    // Not released: an operation before its commit, or while paused.
    const before = fleet({ domains: [deadActive, domain({ id: ID.b, slug: 'b' })], inFlightOperation: operation() });
    expect(decideMonitorAction(before, p, NOW, running)).toMatchObject({ releaseOperationId: null });
    expect(decideMonitorAction(f, p, NOW, { isAutoFailoverPaused: true })).toMatchObject({ releaseOperationId: null });
  });

  it('skips a standby that is cooling down and promotes the next best', () => {
    const f = fleet({
      domains: [
        deadActive,
        domain({ id: ID.b, slug: 'b', lastSeenAt: ago(100) }),
        domain({ id: ID.c, slug: 'c', lastSeenAt: ago(900) }),
      ],
    });
    const d = decideMonitorAction(f, p, NOW, { isAutoFailoverPaused: false, coolingDownIds: [ID.b] });
    expect(d).toMatchObject({ kind: 'failover', promoteDomainId: ID.c, blockedBy: null });
  });

  it('blocks the failover while every viable standby is cooling down', () => {
    const f = fleet({ domains: [domain({ state: 'failed' }), domain({ id: ID.b })] });
    expect(decideMonitorAction(f, p, NOW, { isAutoFailoverPaused: false, coolingDownIds: [ID.b] })).toMatchObject({
      kind: 'none',
      blockedBy: 'cooling_down',
    });
  });

  it('is not due when the active is already marked failed and the failover is blocked', () => {
    const f = fleet({ domains: [domain({ state: 'failed' }), domain({ id: ID.b })] });
    expect(decideMonitorAction(f, p, NOW, { isAutoFailoverPaused: true })).toEqual({
      kind: 'none',
      failure: { reason: 'already_failed', message: 'active domain a is failed' },
      blockedBy: 'paused',
    });
  });

  it('promotes away from an active already marked failed once resumed', () => {
    const f = fleet({ domains: [domain({ state: 'failed' }), domain({ id: ID.b })] });
    expect(decideMonitorAction(f, p, NOW, running)).toMatchObject({
      kind: 'failover',
      shouldMarkActiveFailed: false,
      promoteDomainId: ID.b,
    });
  });

  it('marks a stale active failed even with no standby to go to', () => {
    const f = fleet({
      domains: [domain({ lastSeenAt: ago(9_000), consecutiveFailures: 1 }), domain({ id: ID.b, state: 'failed' })],
    });
    expect(decideMonitorAction(f, p, NOW, running)).toMatchObject({
      kind: 'failover',
      shouldMarkActiveFailed: true,
      promoteDomainId: null,
      blockedBy: 'no_viable_standby',
    });
  });

  it('promotes a standby for a fleet without an active, marking nothing', () => {
    const f = fleet({ activeDomainId: null, domains: [domain({ id: ID.b })] });
    expect(decideMonitorAction(f, p, NOW, running)).toMatchObject({
      kind: 'failover',
      activeDomainId: null,
      shouldMarkActiveFailed: false,
      promoteDomainId: ID.b,
      failure: { reason: 'no_active' },
    });
  });

  it('does not mark a stopped active failed but does promote away from it', () => {
    const f = fleet({ domains: [domain({ state: 'stopped' }), domain({ id: ID.b })] });
    expect(decideMonitorAction(f, p, NOW, running)).toMatchObject({
      kind: 'failover',
      shouldMarkActiveFailed: false,
      promoteDomainId: ID.b,
    });
  });
});

describe('operationToStart', () => {
  it('returns a pending operation older than the grace', () => {
    const op = operation({ state: 'pending', createdAt: ago(3_000) });
    expect(operationToStart(fleet({ inFlightOperation: op }), NOW, 2_000, [])).toEqual(op);
  });

  it('leaves a pending operation younger than the grace to the caller that created it', () => {
    const op = operation({ state: 'pending', createdAt: ago(1_000) });
    expect(operationToStart(fleet({ inFlightOperation: op }), NOW, 2_000, [])).toBeNull();
  });

  it('ignores running operations and operations already tried', () => {
    expect(operationToStart(fleet({ inFlightOperation: operation({ createdAt: ago(9_000) }) }), NOW, 0, [])).toBeNull();
    const op = operation({ state: 'pending', createdAt: ago(9_000) });
    expect(operationToStart(fleet({ inFlightOperation: op }), NOW, 0, [op.id])).toBeNull();
  });

  it('returns null for a fleet with no operation', () => {
    expect(operationToStart(fleet(), NOW, 0, [])).toBeNull();
  });
});

describe('coolingDownIds', () => {
  it('keeps standbys promoted within the cooldown (a minute, or the degraded grace if longer)', () => {
    const recent = [
      { domainId: ID.b, at: ago(59_000) },
      { domainId: ID.c, at: ago(61_000) },
    ];
    expect(coolingDownIds(recent, p, NOW)).toEqual([ID.b]);
    expect(coolingDownIds(recent, policy({ degradedGraceMs: 120_000 }), NOW)).toEqual([ID.b, ID.c]);
  });
});
