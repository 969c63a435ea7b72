import type { HaruEvent } from '../schemas/entities';

/** A follower of one fleet's events: what it has, and where the feed sends what comes after. */
export interface EventFollower {
  /** The newest event id it has (its cursor). */
  cursor: number;
  send(event: HaruEvent): void;
}

/** What a feed needs: the store's read of a fleet's events after a cursor, oldest first. */
export interface EventFeedDeps {
  list(fleetId: string, opts: { after: number; limit: number }): Promise<HaruEvent[]>;
  pollMs: number;
  /** Most events one read returns: a follower far behind is caught up a page at a time, without a pause. */
  pageSize: number;
  onReadError(fleetId: string, err: unknown): void;
}

/**
 * One store poll per fleet, whatever the number of its followers (`GET /events?follow=1`): each fleet with a
 * follower has one loop that reads the events after the oldest cursor of its followers every `pollMs` and gives
 * each follower those after its own. A loop ends when its fleet's last follower leaves. Three hundred dashboards
 * on one fleet cost one read a poll, not three hundred.
 */
const noop = () => undefined;

export function createEventFeeds(deps: EventFeedDeps) {
  interface Feed {
    followers: Set<EventFollower>;
    wake(): void;
  }
  const feeds = new Map<string, Feed>();

  async function run(fleetId: string, feed: Feed) {
    for (;;) {
      // Ends in the same turn as it finds no follower, so a newcomer never joins a feed that has stopped.
      if (feed.followers.size === 0) {
        if (feeds.get(fleetId) === feed) feeds.delete(fleetId);
        return;
      }
      let isPageFull = false;
      try {
        const after = Math.min(...[...feed.followers].map((f) => f.cursor));
        const events = await deps.list(fleetId, { after, limit: deps.pageSize });
        for (const follower of [...feed.followers]) {
          for (const event of events) {
            if (event.id <= follower.cursor || !feed.followers.has(follower)) continue;
            follower.send(event);
            follower.cursor = event.id;
          }
        }
        isPageFull = events.length === deps.pageSize;
      } catch (err) {
        deps.onReadError(fleetId, err);
      }
      if (isPageFull) continue; // more are waiting: no pause
      await new Promise<void>((resolve) => {
        const timer = setTimeout(done, deps.pollMs);
        function done() {
          clearTimeout(timer);
          feed.wake = noop;
          resolve();
        }
        feed.wake = done;
      });
    }
  }

  return {
    /** Adds `follower` to its fleet's feed (started if none runs); returns how it leaves. */
    follow(fleetId: string, follower: EventFollower): () => void {
      let feed = feeds.get(fleetId);
      if (feed) {
        feed.followers.add(follower);
        feed.wake(); // a newcomer far behind the others is read for at once, not at the next poll
      } else {
        feed = { followers: new Set([follower]), wake: noop };
        feeds.set(fleetId, feed);
        void run(fleetId, feed);
      }
      const { followers } = feed;
      return () => {
        followers.delete(follower);
      };
    },
    /** How many followers all feeds have now. */
    followerCount(): number {
      let n = 0;
      for (const feed of feeds.values()) n += feed.followers.size;
      return n;
    },
  };
}
export type EventFeeds = ReturnType<typeof createEventFeeds>;
