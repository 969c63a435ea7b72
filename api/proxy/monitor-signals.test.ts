import { createMonitorSignals } from './monitor-signals';

describe('monitor signals', () => {
  it('sends one checkNow per fleet per debounce window for upstream failures and never throws on a failed signal', async () => {
    let clock = 0;
    const sent: string[] = [];
    const signal = createMonitorSignals({
      checkNow: async (fleetId) => {
        sent.push(fleetId);
        if (fleetId === 'b') throw new Error('temporal down');
      },
      debounceMs: 1_000,
      now: () => new Date(clock),
    });
    expect(signal.upstreamFailed('a', 'a1', 'refused')).toBe(true);
    expect(signal.upstreamFailed('a', 'a1', 'refused')).toBe(false);
    expect(signal.upstreamFailed('b', 'b1', 'refused')).toBe(true);
    clock += 999;
    expect(signal.upstreamFailed('a', 'a1', 'refused')).toBe(false);
    clock += 1;
    expect(signal.upstreamFailed('a', 'a1', 'refused')).toBe(true);
    await Promise.resolve();
    expect(sent).toEqual(['a', 'b', 'a']);
  });

  it('announces a served answer once per domain per window, and never throws', async () => {
    let clock = 0;
    const announced: [string, number][] = [];
    const signal = createMonitorSignals({
      checkNow: async () => {},
      debounceMs: 1_000,
      announceServedAnswer: async (domainId, at) => {
        announced.push([domainId, at.getTime()]);
        if (domainId === 'y') throw new Error('database down');
      },
      servedAnswerDebounceMs: 250,
      now: () => new Date(clock),
    });
    expect(signal.servedAnswer('x')).toBe(true);
    expect(signal.servedAnswer('x')).toBe(false);
    expect(signal.servedAnswer('y')).toBe(true);
    clock += 250;
    expect(signal.servedAnswer('x')).toBe(true);
    await Promise.resolve();
    expect(announced).toEqual([
      ['x', 0],
      ['y', 0],
      ['x', 250],
    ]);
    expect(createMonitorSignals({ checkNow: async () => {}, debounceMs: 1 }).servedAnswer('x')).toBe(false);
  });

  it("announces an upstream failure as the domain's missed answer, once per domain per window, and never throws", async () => {
    let clock = 0;
    const missed: [string, number, string][] = [];
    const signal = createMonitorSignals({
      checkNow: async () => {},
      debounceMs: 1_000,
      announceMissedAnswer: async (domainId, at, why) => {
        missed.push([domainId, at.getTime(), why]);
        if (domainId === 'y') throw new Error('database down');
      },
      servedAnswerDebounceMs: 250,
      now: () => new Date(clock),
    });
    signal.upstreamFailed('f', 'x', 'connect timeout');
    signal.upstreamFailed('f', 'x', 'connect timeout');
    signal.upstreamFailed('f', 'y', 'refused');
    clock += 250;
    signal.upstreamFailed('f', 'x', 'no headers within 60000 ms');
    await Promise.resolve();
    expect(missed).toEqual([
      ['x', 0, 'connect timeout'],
      ['y', 0, 'refused'],
      ['x', 250, 'no headers within 60000 ms'],
    ]);
  });
});
