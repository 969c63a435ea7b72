import net from 'node:net';
import { createAnswerBook, type Heard } from './answer-book';

const answered = (atMs: number): Heard => ({
  outcome: { kind: 'answered', status: { models: [] } as never },
  at: new Date(atMs),
});

/** A request the test ends by hand. */
function pending() {
  let end!: (heard: Heard) => void;
  const asked = new Promise<Heard>((resolve) => (end = resolve));
  return { asked, end };
}

describe('answer book', () => {
  const signal = new AbortController().signal;

  it('returns an answer that came within the wait, and null for one that did not', async () => {
    const book = createAnswerBook();
    expect(await book.within(Promise.resolve(answered(1)), 50, signal)).toEqual(answered(1));
    const silent = pending();
    expect(await book.within(silent.asked, 20, signal)).toBeNull();
  });

  it('hears an answer that arrived while the loop was blocked past the wait', async () => {
    const book = createAnswerBook();
    const server = net.createServer();
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const accepted = new Promise<net.Socket>((resolve) => server.once('connection', resolve));
    const client = net.connect((server.address() as net.AddressInfo).port, '127.0.0.1');
    try {
      const serverSide = await accepted;
      // The answer is in the client's socket before the wait starts, but only the loop's I/O phase reads it.
      const asked = new Promise<Heard>((resolve) => client.once('data', () => resolve(answered(3))));
      serverSide.write('status');
      const waiting = book.within(asked, 10, signal);
      const until = Date.now() + 50; // the loop blocked past the wait: the deadline's timer is due first
      while (Date.now() < until);
      expect(await waiting).toEqual(answered(3));
    } finally {
      client.destroy();
      await new Promise((resolve) => server.close(resolve));
    }
  });

  it("keeps a late answer for the next round, unless the domain's own newer answer was used first", async () => {
    const book = createAnswerBook();
    const first = pending();
    book.keepLate('d', first.asked);
    first.end(answered(100));
    await first.asked;
    await Promise.resolve();
    expect(book.takeLate('d')).toEqual(answered(100));
    expect(book.takeLate('d')).toBeNull();

    const older = pending();
    book.keepLate('d', older.asked);
    book.heardNow('d', answered(300));
    older.end(answered(200)); // sent before, answered after the round that used 300
    await older.asked;
    await Promise.resolve();
    expect(book.takeLate('d')).toBeNull();
  });

  it('keeps one request under way per domain, until it ends', async () => {
    const book = createAnswerBook();
    const { asked, end } = pending();
    expect(book.asking('d', signal, asked)).toBe(asked);
    expect(book.inFlight('d', signal)).toBe(asked);
    expect(book.inFlight('other', signal)).toBeUndefined();
    // Asked under another caller's signal (a look's beside the watch's): not shared, since that caller may abort it.
    expect(book.inFlight('d', new AbortController().signal)).toBeUndefined();
    end(answered(1));
    await asked;
    await Promise.resolve();
    expect(book.inFlight('d', signal)).toBeUndefined();
  });

  it('remembers the last eight answer times', () => {
    const book = createAnswerBook();
    for (let ms = 1; ms <= 10; ms += 1) book.tookMs('d', ms);
    expect(book.recentMs('d')).toEqual([3, 4, 5, 6, 7, 8, 9, 10]);
    expect(book.recentMs('other')).toEqual([]);
  });

  it('rejects when the watch is aborted', async () => {
    const book = createAnswerBook();
    const abort = new AbortController();
    const waiting = book.within(pending().asked, 10, abort.signal);
    abort.abort(new Error('watch ended'));
    await expect(waiting).rejects.toThrow('watch ended');
  });
});
