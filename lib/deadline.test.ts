import { startDeadline } from './deadline';

describe('startDeadline', () => {
  it('aborts at its timeout and says so', async () => {
    const deadline = startDeadline(20);
    await new Promise((resolve) => deadline.signal.addEventListener('abort', resolve, { once: true }));
    expect(deadline.isTimedOut()).toBe(true);
    deadline.clear();
  });

  it("aborts with the caller's reason when the caller aborts first, not as a timeout", () => {
    const caller = new AbortController();
    const deadline = startDeadline(60_000, caller.signal);
    const reason = new Error('cancelled');
    caller.abort(reason);
    expect(deadline.signal.aborted).toBe(true);
    expect(deadline.signal.reason).toBe(reason);
    expect(deadline.isTimedOut()).toBe(false);
    deadline.clear();
  });

  it('is aborted at once for a caller already aborted', () => {
    const caller = new AbortController();
    caller.abort(new Error('gone'));
    const deadline = startDeadline(60_000, caller.signal);
    expect(deadline.signal.aborted).toBe(true);
    deadline.clear();
  });

  it('never fires once cleared, and lets go of the caller', async () => {
    const caller = new AbortController();
    const deadline = startDeadline(10, caller.signal);
    deadline.clear();
    caller.abort();
    await new Promise((resolve) => setTimeout(resolve, 30));
    expect(deadline.signal.aborted).toBe(false);
    expect(deadline.isTimedOut()).toBe(false);
  });
});
