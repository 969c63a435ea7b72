import { createHealthSignal } from './health-signal';

describe('passive health signal', () => {
  it('sends one checkNow per fleet per debounce window and never throws on a failed signal', async () => {
    let clock = 0;
    const sent: string[] = [];
    const signal = createHealthSignal({
      checkNow: async (fleetId) => {
        sent.push(fleetId);
        if (fleetId === 'b') throw new Error('temporal down');
      },
      debounceMs: 1_000,
      now: () => new Date(clock),
    });
    expect(signal.report('a')).toBe(true);
    expect(signal.report('a')).toBe(false);
    expect(signal.report('b')).toBe(true);
    clock += 999;
    expect(signal.report('a')).toBe(false);
    clock += 1;
    expect(signal.report('a')).toBe(true);
    await Promise.resolve();
    expect(sent).toEqual(['a', 'b', 'a']);
  });

  it('announces a relayed answer as proof of life once per domain per window, and never throws', async () => {
    let clock = 0;
    const announced: [string, number][] = [];
    const signal = createHealthSignal({
      checkNow: async () => {},
      debounceMs: 1_000,
      announceServed: async (domainId, at) => {
        announced.push([domainId, at.getTime()]);
        if (domainId === 'y') throw new Error('database down');
      },
      servedDebounceMs: 250,
      now: () => new Date(clock),
    });
    expect(signal.served('x')).toBe(true);
    expect(signal.served('x')).toBe(false);
    expect(signal.served('y')).toBe(true);
    clock += 250;
    expect(signal.served('x')).toBe(true);
    await Promise.resolve();
    expect(announced).toEqual([
      ['x', 0],
      ['y', 0],
      ['x', 250],
    ]);
    expect(createHealthSignal({ checkNow: async () => {}, debounceMs: 1 }).served('x')).toBe(false);
  });
});
