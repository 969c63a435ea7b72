import { startEventLoopLag } from './event-loop-lag';

/** Holds the event loop for `ms`, as a starved or busy process would. */
const block = (ms: number) => {
  const until = performance.now() + ms;
  while (performance.now() < until);
};
const tick = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

// A window where the loop ran freely may still see a scheduler hiccup on a loaded machine: the bounds tell a
// stall of 400 ms from none, not one figure from another.
describe('event loop lag', () => {
  it('sees no stall in a window where the loop ran freely', async () => {
    const lag = startEventLoopLag();
    const since = performance.now();
    await tick(100);
    expect(lag.maxSince(since)).toBeLessThan(150);
    lag.stop();
  });

  it('reports a stall inside the window once the sampler has run after it', async () => {
    const lag = startEventLoopLag();
    await tick(30);
    const since = performance.now();
    block(400);
    await tick(50);
    expect(lag.maxSince(since)).toBeGreaterThanOrEqual(350);
    lag.stop();
  });

  it('reports a stall still under way when asked before the sampler could run', () => {
    const lag = startEventLoopLag();
    const since = performance.now();
    block(400);
    expect(lag.maxSince(since)).toBeGreaterThanOrEqual(350);
    lag.stop();
  });

  it('forgets a stall that ended before the window began', async () => {
    const lag = startEventLoopLag();
    await tick(30);
    block(400);
    await tick(50);
    const since = performance.now();
    await tick(50);
    expect(lag.maxSince(since)).toBeLessThan(150);
    lag.stop();
  });
});
