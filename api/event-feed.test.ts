import type { HaruEvent } from '../schemas/entities';
import { eventually } from '../test/support/eventually';
import { createEventFeeds, type EventFeedDeps } from './event-feed';

const FLEET = '00000000-0000-4000-8000-000000000001';
const event = (id: number): HaruEvent => ({
  id,
  fleetId: FLEET,
  operationId: null,
  domainId: null,
  type: 'test',
  message: `event ${id}`,
  data: {},
  createdAt: new Date(0).toISOString(),
});

/** A fleet's event log the feeds read, counting the reads. */
function store(pageSize = 100) {
  const log: HaruEvent[] = [];
  const reads: number[] = [];
  const deps: EventFeedDeps = {
    async list(_fleetId, { after, limit }) {
      reads.push(after);
      return log.filter((e) => e.id > after).slice(0, limit);
    },
    pollMs: 5,
    pageSize,
    onReadError: () => undefined,
  };
  return {
    log,
    reads,
    deps,
    append: (n: number) => log.push(...Array.from({ length: n }, (_, i) => event(log.length + i + 1))),
  };
}

const follower = (cursor = 0) => {
  const seen: number[] = [];
  return { seen, follower: { cursor, send: (e: HaruEvent) => seen.push(e.id) } };
};

describe('event feeds', () => {
  it('reads a fleet once a poll for all its followers, and gives each the events after its own cursor', async () => {
    const s = store();
    s.append(3);
    const feeds = createEventFeeds(s.deps);
    const many = Array.from({ length: 50 }, () => follower(0));
    const late = follower(2);
    const leaves = [...many, late].map((f) => feeds.follow(FLEET, f.follower));
    await eventually('the backlog', () => many.every((f) => f.seen.length === 3) && late.seen.length === 1);
    s.append(2);
    await eventually('the new events', () => many.every((f) => f.seen.length === 5));
    const readsSoFar = s.reads.length;
    await eventually('a few more polls', () => s.reads.length >= readsSoFar + 3);
    // Per follower, 51 followers would have read 51 times a poll.
    expect(s.reads.length).toBeLessThan(51);
    expect(many[0]!.seen).toEqual([1, 2, 3, 4, 5]);
    expect(late.seen).toEqual([3, 4, 5]);
    expect(feeds.followerCount()).toBe(51);
    leaves.forEach((leave) => leave());
    expect(feeds.followerCount()).toBe(0);
  });

  it('stops reading when the last follower leaves, and starts again for the next', async () => {
    const s = store();
    const feeds = createEventFeeds(s.deps);
    const leave = feeds.follow(FLEET, follower().follower);
    await eventually('a read', () => s.reads.length > 0);
    leave();
    await eventually('the feed to stop', async () => {
      const before = s.reads.length;
      await new Promise((resolve) => setTimeout(resolve, 20)); // four poll intervals
      return s.reads.length === before;
    });
    const next = follower();
    feeds.follow(FLEET, next.follower);
    s.append(1);
    await eventually('the next follower served', () => next.seen.length === 1);
  });

  it('catches a follower far behind up a page at a time without pausing, and a newcomer is read for at once', async () => {
    const s = store(10);
    s.append(35);
    const feeds = createEventFeeds({ ...s.deps, pollMs: 60_000 });
    const first = follower(0);
    feeds.follow(FLEET, first.follower);
    await eventually('every page', () => first.seen.length === 35);
    expect(first.seen).toEqual(Array.from({ length: 35 }, (_, i) => i + 1));
    const newcomer = follower(30);
    s.append(1);
    feeds.follow(FLEET, newcomer.follower); // the feed sleeps for a minute: the newcomer wakes it
    await eventually('the newcomer served', () => newcomer.seen.length === 6);
  });
});
