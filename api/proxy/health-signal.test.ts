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
});
