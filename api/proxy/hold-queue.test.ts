import { createHoldQueue, isWithinShare } from './hold-queue';

describe('isWithinShare', () => {
  it('lets one fleet alone fill the queue', () => {
    expect(isWithinShare(10, 9, 9, 1)).toBe(true);
    expect(isWithinShare(10, 10, 10, 1)).toBe(false);
  });

  it('gives a fleet that starts holding its place while the first holds more than its share', () => {
    expect(isWithinShare(10, 8, 0, 1)).toBe(true); // a second fleet: share 5, it holds none
    expect(isWithinShare(10, 9, 8, 2)).toBe(false); // the first is over its share of 5: no more
    expect(isWithinShare(10, 9, 1, 2)).toBe(true);
  });

  it('refuses everyone once the queue is full', () => {
    expect(isWithinShare(10, 10, 0, 2)).toBe(false);
  });
});

describe('createHoldQueue', () => {
  it('gives a second failing fleet the places the first may not take past its share, and all back once it leaves', () => {
    const q = createHoldQueue(4);
    expect([q.tryEnter('a'), q.tryEnter('a')].every(Boolean)).toBe(true);
    const b = q.tryEnter('b');
    expect(b).not.toBeNull();
    expect(q.tryEnter('a')).toBeNull(); // a holds its share (2 of 4) while b holds too
    const b2 = q.tryEnter('b');
    expect(b2).not.toBeNull();
    expect([q.held, q.heldBy('a'), q.heldBy('b')]).toEqual([4, 2, 2]);
    b!();
    b2!();
    expect(q.heldBy('b')).toBe(0);
    expect([q.tryEnter('a'), q.tryEnter('a')].every(Boolean)).toBe(true); // alone again: the whole queue
    expect(q.tryEnter('a')).toBeNull();
  });
});
