import { domain, fleet, ID, operation, policy } from './fleet-fixtures';
import { summarizeHealth } from './fleet-health';
import { hostRepairRetryMs, hostRepairsDue } from './host-repair';
import { NOW } from './fleet-fixtures';

type Slots = NonNullable<ReturnType<typeof domain>['slots']>;
const atRest: Slots = [
  { kind: 'inference', gpuIndex: 0, state: 'sleeping' },
  { kind: 'training', gpuIndex: 0, state: 'training' },
];
const serving: Slots = [
  { kind: 'inference', gpuIndex: 0, state: 'serving' },
  { kind: 'training', gpuIndex: 0, state: 'idle' },
];
const withSlots = (active: Slots, standby: Slots, over = {}) =>
  fleet({ domains: [domain({ slots: active }), domain({ id: ID.b, slug: 'b', slots: standby })], ...over });

describe('hostRepairsDue', () => {
  it('asks for nothing when the active serves and the standby is at rest', () => {
    expect(hostRepairsDue(withSlots(serving, atRest))).toEqual([]);
  });

  it('restores a standby with a model awake or its training idle', () => {
    expect(hostRepairsDue(withSlots(serving, serving))).toEqual([
      {
        kind: 'restoreStandby',
        domainId: ID.b,
        problem: 'models awake on the standby (GPU 0); training not running on the standby (GPU 0)',
      },
    ]);
    const idleOnly: Slots = [atRest[0]!, { kind: 'training', gpuIndex: 0, state: 'idle' }];
    expect(hostRepairsDue(withSlots(serving, idleOnly))[0]?.problem).toBe(
      'training not running on the standby (GPU 0)',
    );
  });

  it('stops training found running on the active', () => {
    const trainingActive: Slots = [serving[0]!, { kind: 'training', gpuIndex: 0, state: 'training' }];
    expect(hostRepairsDue(withSlots(trainingActive, atRest))).toEqual([
      { kind: 'stopActiveTraining', domainId: ID.a, problem: 'training on the active (GPU 0)' },
    ]);
  });

  it('leaves hosts alone while an operation is in flight, when failed, held, or judged from a view without slots', () => {
    expect(hostRepairsDue(withSlots(serving, serving, { inFlightOperation: operation() }))).toEqual([]);
    expect(hostRepairsDue(withSlots(serving, serving), [ID.b])).toEqual([]);
    const failed = fleet({
      domains: [domain({ slots: serving }), domain({ id: ID.b, slug: 'b', state: 'failed', slots: serving })],
    });
    expect(hostRepairsDue(failed)).toEqual([]);
    expect(hostRepairsDue(fleet())).toEqual([]);
  });

  it('is flagged in the health query under a reason per repair', () => {
    const trainingActive: Slots = [serving[0]!, { kind: 'training', gpuIndex: 0, state: 'training' }];
    const health = summarizeHealth(withSlots(trainingActive, serving), policy(), NOW, { isAutoFailoverPaused: false });
    expect(health.domains.map((d) => d.reasons)).toEqual([['training_on_active'], ['standby_not_at_rest']]);
  });

  it('waits at least 5 s, or 25 polls, between two repairs of one domain', () => {
    expect(hostRepairRetryMs(policy({ heartbeatIntervalMs: 200 }))).toBe(5_000);
    expect(hostRepairRetryMs(policy({ heartbeatIntervalMs: 2_000 }))).toBe(50_000);
  });
});
