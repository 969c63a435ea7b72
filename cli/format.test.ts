import type { OperationProgress, StepProgress } from '../schemas/api';
import { fleetStatusFixture, promotionFixture } from '../test/support/fake-haru-api';
import { formatElapsed, formatFleet, progressChanges, table } from './format';

const step = (over: Partial<StepProgress> & { step: string }): StepProgress => ({
  status: 'pending',
  startedAt: null,
  finishedAt: null,
  attempts: 0,
  lastError: null,
  ...over,
});
const progress = (steps: StepProgress[]): OperationProgress => ({
  operationId: 'op-1',
  kind: 'promote',
  phase: 'running',
  steps,
  abortRequested: false,
});
const now = new Date('2026-01-01T00:00:10.000Z');

describe('progressChanges', () => {
  it('prints only the steps whose status or attempts changed, with their elapsed time', () => {
    const before = progress([
      step({ step: 'stopTraining', status: 'running', startedAt: '2026-01-01T00:00:00.000Z', attempts: 1 }),
      step({ step: 'verifyGpuReleased' }),
    ]);
    const after = progress([
      step({
        step: 'stopTraining',
        status: 'succeeded',
        startedAt: '2026-01-01T00:00:00.000Z',
        finishedAt: '2026-01-01T00:00:01.500Z',
        attempts: 1,
      }),
      step({ step: 'verifyGpuReleased', status: 'running', startedAt: '2026-01-01T00:00:01.500Z', attempts: 1 }),
    ]);
    const lines = progressChanges(before, after, now);
    expect(lines).toHaveLength(2);
    expect(lines[0]).toMatch(/✓ stopTraining\s+succeeded\s+1\.50s/);
    expect(lines[1]).toMatch(/> verifyGpuReleased\s+running\s+8\.50s/);
  });

  it('shows retries with the last error and stays silent when nothing moved', () => {
    const a = progress([
      step({ step: 'wakeModels', status: 'running', startedAt: '2026-01-01T00:00:09.000Z', attempts: 1 }),
    ]);
    const b = progress([
      step({
        step: 'wakeModels',
        status: 'running',
        startedAt: '2026-01-01T00:00:09.000Z',
        attempts: 2,
        lastError: 'model llama-1b still asleep',
      }),
    ]);
    expect(progressChanges(a, a, now)).toEqual([]);
    expect(progressChanges(a, b, now)[0]).toContain('attempt 2; model llama-1b still asleep');
  });

  it('does not print steps that have not started on the first poll', () => {
    expect(progressChanges(null, progress([step({ step: 'commitRouting' })]), now)).toEqual([]);
  });
});

describe('formatting helpers', () => {
  it('formats sub-second and longer durations', () => {
    expect(formatElapsed(850)).toBe('850ms');
    expect(formatElapsed(2_345)).toBe('2.35s');
  });
  it('aligns table columns and renders missing cells as a dash', () => {
    expect(
      table(
        ['A', 'BB'],
        [
          ['x', null],
          ['long', 2],
        ],
      ),
    ).toBe('A     BB\nx     -\nlong  2');
  });
});

describe('formatFleet', () => {
  const at = '2030-01-01T00:00:00.000Z';
  const fleet = fleetStatusFixture({ autoFailoverPause: { by: 'ops', at, reason: 'drill' } });
  const failed = promotionFixture('00000000-0000-4000-8000-000000000101', at, {
    state: 'failed',
    error: { step: 'wakeModels', code: 'WakeTimeout', message: 'still asleep' },
  });
  const now = new Date('2030-01-01T00:05:00.000Z');

  it('says how long ago the pause and the last failure were, beside their times', () => {
    const text = formatFleet(fleet, failed, { now });
    expect(text).toContain(`auto-failover paused by ops at ${at} (5m ago): drill`);
    expect(text).toContain(
      `last failed: promote ${failed.id} at ${at} (5m ago): wakeModels: WakeTimeout: still asleep`,
    );
  });

  it('adds when each domain was last heard and its id with wide, SLOTS staying last', () => {
    const header = formatFleet(fleet, null, { now, wide: true })
      .split('\n')
      .find((l) => l.startsWith('DOMAIN'));
    expect(header).toMatch(/^DOMAIN +ROLE +STATE +PROVIDER +LAST HEARD +LAST HEARD AT +ID +SLOTS$/);
    expect(formatFleet(fleet, null, { now })).not.toContain('LAST HEARD AT');
  });

  it('calls a dead old active failed, never standby', () => {
    const afterFailover = fleetStatusFixture();
    afterFailover.activeDomainId = afterFailover.domains[1]!.id;
    afterFailover.domains[0]!.state = 'failed';
    const rows = formatFleet(afterFailover, null, { now }).split('\n');
    expect(rows.find((l) => l.startsWith('a '))).toMatch(/^a +failed +failed /);
    expect(rows.find((l) => l.startsWith('b '))).toMatch(/^b +active +ready /);
  });
});
