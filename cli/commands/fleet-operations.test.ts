import { fleetStatusFixture, promotionFixture } from '../../test/support/fake-haru-api';
import { formatOperations } from './fleet-operations';

const OP1 = '00000000-0000-4000-8000-000000000101';
const OP2 = '00000000-0000-4000-8000-000000000102';
const now = new Date('2030-01-01T02:00:00.000Z');

describe('formatOperations', () => {
  const operations = [
    promotionFixture(OP1, '2030-01-01T01:57:00.000Z', {
      error: { step: 'demoteOldActive', code: 'E', message: 'gone' },
    }),
    promotionFixture(OP2, '2029-12-31T21:00:00.000Z', {
      state: 'failed',
      step: 'probeModels',
      error: { step: 'probeModels', code: 'ProbeFailed', message: 'empty answer' },
    }),
  ];

  it('shows AGE instead of a timestamp, and a promotion that left the old active as it was honestly', () => {
    const [header, first, second] = formatOperations(fleetStatusFixture(), operations, {
      wide: false,
      now,
    }).split('\n');
    expect(header).toMatch(/^AGE +KIND +MOVE +STATE +STEP +OPERATION +ERROR$/);
    expect(first).toMatch(
      /^3m +promote +a → b +succeeded \(not demoted\) +demoteOldActive +\S+ +demoteOldActive: E: gone$/,
    );
    expect(second).toMatch(/^5h +promote +a → b +failed +probeModels +\S+ +probeModels: ProbeFailed: empty answer$/);
    expect(first).not.toContain('2030-');
  });

  it('adds the times, who asked and why with -o wide', () => {
    const [header, first] = formatOperations(fleetStatusFixture(), operations, { wide: true, now }).split('\n');
    expect(header).toMatch(/ERROR +CREATED +FINISHED +REQUESTED BY +REASON$/);
    expect(first).toMatch(/2030-01-01T01:57:00\.000Z +2030-01-01T01:57:00\.000Z +api +drill$/);
  });
});
