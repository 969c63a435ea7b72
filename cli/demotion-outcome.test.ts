import { promotionFixture } from '../test/support/fake-haru-api';
import { demotionOutcome, stateCell } from './demotion-outcome';

const OP = '00000000-0000-4000-8000-000000000201';
const unreachable = { step: 'demoteOldActive', code: 'SupervisorUnreachable', message: 'old active unreachable' };

describe('demotionOutcome', () => {
  it("reads a succeeded promotion whose demotion failed as not demoted, from the row's error", () => {
    const op = promotionFixture(OP, '2030-01-01T00:00:00.000Z', { error: unreachable });
    expect(demotionOutcome(op)).toEqual({
      status: 'failed',
      error: 'demoteOldActive: SupervisorUnreachable: old active unreachable',
    });
    expect(stateCell(op)).toBe('succeeded (not demoted)');
  });

  it('reads one without an error as demoted', () => {
    const op = promotionFixture(OP, '2030-01-01T00:00:00.000Z');
    expect(demotionOutcome(op)).toEqual({ status: 'demoted' });
    expect(stateCell(op)).toBe('succeeded');
  });

  it('says nothing of a promotion that never reached its demotion, or of a failed one', () => {
    const skipped = promotionFixture(OP, '2030-01-01T00:00:00.000Z', { step: 'commitRouting' });
    const failed = promotionFixture(OP, '2030-01-01T00:00:00.000Z', { state: 'failed', error: unreachable });
    expect(demotionOutcome(skipped)).toBeNull();
    expect(demotionOutcome(failed)).toBeNull();
    expect(stateCell(failed)).toBe('failed');
  });
});
