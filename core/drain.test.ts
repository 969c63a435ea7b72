import { describeInFlight, judgeDrain, sleepModeAfterDrain } from './drain';

describe('judgeDrain', () => {
  const m = (name: string, runningRequests: number | null, waitingRequests?: number | null) => ({
    name,
    runningRequests,
    waitingRequests,
  });

  it('is drained only when nothing runs and nothing waits', () => {
    expect(judgeDrain([m('a', 0, 0), m('b', 0, 0)])).toEqual({
      isDrained: true,
      runningRequests: 0,
      waitingRequests: 0,
      inFlight: [],
      unknown: [],
    });
  });

  it('counts waiting requests as in flight', () => {
    const look = judgeDrain([m('a', 0, 3), m('b', 0, 0)]);
    expect(look.isDrained).toBe(false);
    expect(look).toMatchObject({
      runningRequests: 0,
      waitingRequests: 3,
      inFlight: [{ model: 'a', running: 0, waiting: 3 }],
    });
  });

  it('sums running and waiting over the models and lists each busy one', () => {
    const look = judgeDrain([m('a', 2, 5), m('b', 1, 0), m('c', 0, 0)]);
    expect(look).toMatchObject({ isDrained: false, runningRequests: 3, waitingRequests: 5 });
    expect(describeInFlight(look.inFlight)).toBe('a: 2 running, 5 waiting; b: 1 running, 0 waiting');
  });

  it('an unknown count is busy', () => {
    const look = judgeDrain([m('a', null, null), m('b', 4, null)]);
    expect(look).toMatchObject({ isDrained: false, runningRequests: 4, unknown: ['a', 'b'] });
    expect(describeInFlight(look.inFlight)).toBe('a: unknown; b: unknown (4 running)');
  });

  it('a supervisor that reports no waiting count drains on its running count', () => {
    expect(judgeDrain([m('a', 0)]).isDrained).toBe(true);
    expect(judgeDrain([m('a', 1)]).isDrained).toBe(false);
  });
});

describe('sleepModeAfterDrain', () => {
  it('waits when the drain left nothing in flight, aborts when its budget ran out', () => {
    expect(sleepModeAfterDrain({ isDrained: true })).toBe('wait');
    expect(sleepModeAfterDrain({ isDrained: false })).toBe('abort');
  });
});
