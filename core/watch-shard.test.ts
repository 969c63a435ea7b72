import { ago, domain, fleet, ID, NOW, operation, policy } from './fleet-fixtures';
import { dueDigest, firstSignalBase, handOnTarget, signalHoldoffMs, signalReason } from './watch-shard';

const p = policy({ heartbeatIntervalMs: 500, heartbeatStaleMs: 5_000, failureThreshold: 3, degradedGraceMs: 30_000 });
const deadActive = domain({ consecutiveFailures: 3, lastSeenAt: ago(2_000) });
const standbyAtRest = domain({
  id: ID.b,
  slug: 'b',
  slots: [
    { kind: 'inference', gpuIndex: 0, state: 'sleeping' },
    { kind: 'training', gpuIndex: 0, state: 'training' },
  ],
});

describe('dueDigest', () => {
  it('is null while nothing is due', () => {
    expect(dueDigest(fleet({ domains: [domain(), standbyAtRest] }), p, NOW, false)).toBeNull();
  });

  it('names a failover by its reason, the marking, the standby it would promote and a release', () => {
    expect(dueDigest(fleet({ domains: [deadActive, standbyAtRest] }), p, NOW, false)).toBe(
      `failover:consecutive_failures:mark:${ID.b}:-`,
    );
    // Paused: still due (the active is marked), with no standby to promote: another digest.
    expect(dueDigest(fleet({ domains: [deadActive, standbyAtRest] }), p, NOW, true)).toBe(
      'failover:consecutive_failures:mark:-:-',
    );
  });

  it('is null for a failed active already marked while an operation is in flight', () => {
    const marked = domain({ ...deadActive, state: 'failed' });
    expect(dueDigest(fleet({ domains: [marked, standbyAtRest], inFlightOperation: operation() }), p, NOW, false)).toBe(
      null,
    );
  });

  it('names a pending operation old enough to start, and every host repair', () => {
    const pending = operation({ state: 'pending', createdAt: ago(60_000) });
    expect(dueDigest(fleet({ domains: [domain(), standbyAtRest], inFlightOperation: pending }), p, NOW, false)).toBe(
      `start:${ID.op}`,
    );
    const awakeStandby = domain({
      ...standbyAtRest,
      slots: [
        { kind: 'inference', gpuIndex: 0, state: 'serving' },
        { kind: 'training', gpuIndex: 0, state: 'idle' },
      ],
    });
    const trainingActive = domain({ slots: [{ kind: 'training', gpuIndex: 0, state: 'training' }] });
    expect(dueDigest(fleet({ domains: [trainingActive, awakeStandby] }), p, NOW, false)).toBe(
      `stopActiveTraining:${ID.a} restoreStandby:${ID.b}`,
    );
  });
});

describe('signalReason', () => {
  const HOLDOFF = 12_500;
  const CHECKPOINT = 60_000;
  const at = NOW.getTime();

  it('signals a new digest at once, and the same one again only after the hold-off', () => {
    const last = { digest: 'failover:a', atMs: at - 1_000 };
    expect(signalReason(last, 'failover:b', at, HOLDOFF, CHECKPOINT)).toBe('decision_due');
    expect(signalReason(last, 'failover:a', at, HOLDOFF, CHECKPOINT)).toBeNull();
    expect(signalReason(last, 'failover:a', at + HOLDOFF - 1_000, HOLDOFF, CHECKPOINT)).toBe('decision_due');
  });

  it('signals the checkpoint when nothing was signalled for a checkpoint, due or not', () => {
    expect(signalReason({ digest: null, atMs: at - CHECKPOINT + 1 }, null, at, HOLDOFF, CHECKPOINT)).toBeNull();
    expect(signalReason({ digest: null, atMs: at - CHECKPOINT }, null, at, HOLDOFF, CHECKPOINT)).toBe('checkpoint');
  });

  it('holds off with the monitor’s repair retry: five seconds at least, else 25 polls', () => {
    expect(signalHoldoffMs(policy({ heartbeatIntervalMs: 100 }))).toBe(5_000);
    expect(signalHoldoffMs(policy({ heartbeatIntervalMs: 500 }))).toBe(12_500);
  });
});

describe('firstSignalBase', () => {
  it('dates a newly seen fleet’s last signal within the checkpoint before now, the same for the same fleet', () => {
    const base = firstSignalBase(ID.a, 1_000_000, 60_000);
    expect(base.digest).toBeNull();
    expect(base.atMs).toBeGreaterThan(1_000_000 - 60_000);
    expect(base.atMs).toBeLessThanOrEqual(1_000_000);
    expect(firstSignalBase(ID.a, 1_000_000, 60_000)).toEqual(base);
  });

  it('spreads fleets over the checkpoint', () => {
    const ids = Array.from({ length: 200 }, (_, i) => `00000000-0000-4000-8000-${String(i).padStart(12, '0')}`);
    const offsets = ids.map((id) => 1_000_000 - firstSignalBase(id, 1_000_000, 60_000).atMs);
    const quarters = [0, 1, 2, 3].map((q) => offsets.filter((o) => Math.floor(o / 15_000) === q).length);
    for (const n of quarters) expect(n).toBeGreaterThan(25);
  });
});

describe('handOnTarget', () => {
  const at = (...held: number[]) => held.map((n, i) => ({ held: n, ownQueue: `w${i}` }));

  it('hands a shard on above the share, to the worker holding least while it is below its share', () => {
    expect(handOnTarget(8, at(0), 8)).toEqual({ held: 0, ownQueue: 'w0' }); // share 4 of 8 between two
    expect(handOnTarget(5, at(3), 8)?.ownQueue).toBe('w0');
    expect(handOnTarget(4, at(3, 1), 8)?.ownQueue).toBe('w1'); // share 3 among three
  });

  it('keeps its shards at its share, or where no other worker could take one', () => {
    expect(handOnTarget(4, at(4), 8)).toBeNull();
    expect(handOnTarget(3, at(3, 2), 8)).toBeNull(); // 3 + 3 + 2: everyone at or under ceil(8 / 3)
    expect(handOnTarget(8, at(), 8)).toBeNull(); // alone
    expect(handOnTarget(6, at(4), 8)).toBeNull(); // the other at its share (a shard in between workers)
  });
});
