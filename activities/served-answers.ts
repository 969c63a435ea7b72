import { storeInternals, type Store } from '../db/store';
import { SERVED_ANSWER_CHANNEL, servedAnswerPushSchema } from '../schemas/served-answer';

/** The latest served and missed answers the proxies announced per domain, as this worker heard them. */
export interface ServedAnswers {
  /**
   * When this worker last heard that the proxy relayed a successful answer from the domain (ms, this worker's
   * clock); null when not heard of.
   */
  lastServedAnswerAtMs(domainId: string): number | null;
  /**
   * The proxy's last missed answer from the domain when nothing was served since (when, this worker's clock,
   * and why); null when its last word on the domain was a served answer, or it has said nothing.
   */
  missedSinceServed(domainId: string): MissedAnswer | null;
}

/** A request the proxy sent a domain and got no answer for, as this worker heard of it. */
export interface MissedAnswer {
  atMs: number;
  why: string;
}

/**
 * Listens on SERVED_ANSWER_CHANNEL over the store's database, once, on first use, for as long as the database is
 * open (its close ends the listen). A store that is not a real database (a test fake) hears nothing. A
 * listen that fails is retried on a later call: without it the monitor judges on polls alone, as before.
 */
export function createServedAnswers(
  store: Store,
  onError: (err: unknown) => void = () => {},
  now: () => number = Date.now,
): ServedAnswers {
  const servedAt = new Map<string, number>();
  /** Per domain, the last missed answer heard after its last served answer; cleared by the next served one. */
  const missed = new Map<string, MissedAnswer>();
  let listening: Promise<unknown> | null = null;
  function listen() {
    const database = storeInternals(store)?.database;
    if (!database || listening) return;
    listening = database
      .listen(SERVED_ANSWER_CHANNEL, (payload) => {
        let parsed;
        try {
          parsed = servedAnswerPushSchema.safeParse(JSON.parse(payload));
        } catch {
          return; // not JSON: not ours
        }
        if (!parsed.success) return;
        // Dated when this worker heard it, never by the proxy's `at`: the monitor judges it against its own
        // poll times, and two hosts' clocks are never compared (docs/architecture.md §9.2). NOTIFY reaches a
        // listener within milliseconds of the relayed answer, well inside the one-poll-timeout window it is
        // judged in.
        const { domainId, missed: why } = parsed.data;
        if (why === undefined) {
          servedAt.set(domainId, now());
          missed.delete(domainId);
        } else missed.set(domainId, { atMs: now(), why });
      })
      .catch((err: unknown) => {
        listening = null;
        onError(err);
      });
  }
  return {
    lastServedAnswerAtMs(domainId) {
      listen();
      return servedAt.get(domainId) ?? null;
    },
    missedSinceServed(domainId) {
      listen();
      return missed.get(domainId) ?? null;
    },
  };
}
