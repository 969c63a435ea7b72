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

describe('Deadline.bound', () => {
  const never = () => new Promise<string>(() => undefined);

  it('rejects with the timeout the moment it fires, though the work never settles', async () => {
    const deadline = startDeadline(20);
    await expect(deadline.bound(never())).rejects.toMatchObject({ name: 'AbortError' });
    expect(deadline.isTimedOut()).toBe(true);
    deadline.clear();
  });

  it("rejects with the caller's reason when the caller aborts first", async () => {
    const caller = new AbortController();
    const deadline = startDeadline(60_000, caller.signal);
    const bounded = deadline.bound(never());
    const reason = new Error('cancelled');
    caller.abort(reason);
    await expect(bounded).rejects.toBe(reason);
    deadline.clear();
  });

  it('passes the work through when it settles in time, value or error', async () => {
    const deadline = startDeadline(60_000);
    await expect(deadline.bound(Promise.resolve('answer'))).resolves.toBe('answer');
    const err = new Error('refused');
    await expect(deadline.bound(Promise.reject(err))).rejects.toBe(err);
    deadline.clear();
  });

  it('hands a value that arrives after the deadline to release, and drops a late rejection', async () => {
    const deadline = startDeadline(10);
    let answer!: (value: string) => void;
    const released: string[] = [];
    const late = deadline.bound(new Promise<string>((resolve) => (answer = resolve)), (v) => released.push(v));
    await expect(late).rejects.toMatchObject({ name: 'AbortError' });
    answer('late answer');
    await new Promise((resolve) => setImmediate(resolve));
    expect(released).toEqual(['late answer']);
    // A late failure must not surface as an unhandled rejection.
    const failing = deadline.bound(Promise.reject(new Error('late failure')));
    await expect(failing).rejects.toMatchObject({ name: 'AbortError' });
    deadline.clear();
  });
});
