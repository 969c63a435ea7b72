import { ClientGone } from './client-gone';

describe('ClientGone', () => {
  it('calls each listener once, in order, when aborted, and none that was removed or added after', () => {
    const gone = new ClientGone();
    const calls: string[] = [];
    const removed = () => calls.push('removed');
    gone.addEventListener('abort', () => calls.push('a'));
    gone.addEventListener('abort', removed);
    gone.addEventListener('abort', () => calls.push('b'), { once: true });
    gone.removeEventListener('abort', removed);
    expect(gone.aborted).toBe(false);
    gone.abort();
    gone.abort();
    gone.addEventListener('abort', () => calls.push('late'));
    expect(gone.aborted).toBe(true);
    expect(calls).toEqual(['a', 'b']);
  });
});
