import type { PollOutcome } from '../core/poll-verdict';

/** How one status request ended, and when (this worker's clock): a poll is dated when its answer came. */
export interface Heard {
  outcome: PollOutcome;
  at: Date;
}

/** Answer times kept per domain for `answerWaitMs`: the last few, so one slow answer is soon forgotten. */
const KEPT_ANSWERS = 8;

/**
 * What this worker heard from each domain's supervisor between rounds (docs/architecture.md §9.2): how long its
 * recent answers took, and an answer that came after its round had counted the interval silent. A round waits
 * for a domain only `answerWaitMs`; the request runs on, and its late answer is the next round's evidence that
 * the host is alive. No decision here: `judgePoll` weighs what this keeps.
 */
export function createAnswerBook() {
  const recent = new Map<string, number[]>();
  /** Each domain's request under way, and the signal it was asked under (a watch's, or a look's). */
  const asked = new Map<string, { request: Promise<Heard>; signal: AbortSignal }>();
  const late = new Map<string, Heard>();
  /** When each domain's newest answer that a verdict used came (ms): an older one arriving later is not news. */
  const usedAt = new Map<string, number>();

  return {
    /** The domain's recent answer times (ms), oldest first. */
    recentMs: (domainId: string): readonly number[] => recent.get(domainId) ?? [],

    /**
     * The domain's request still under way under `signal`, if any: a round waits on it rather than asking again.
     * One asked under another signal (a look's beside the watch's) is not shared: its caller may abort it.
     */
    inFlight: (domainId: string, signal: AbortSignal): Promise<Heard> | undefined => {
      const entry = asked.get(domainId);
      return entry?.signal === signal ? entry.request : undefined;
    },

    /** Notes `request`, asked under `signal`, as the domain's request under way until it ends; returns it. */
    asking(domainId: string, signal: AbortSignal, request: Promise<Heard>): Promise<Heard> {
      asked.set(domainId, { request, signal });
      const ended = () => {
        if (asked.get(domainId)?.request === request) asked.delete(domainId);
      };
      request.then(ended, ended);
      return request;
    },

    /** Records that one of the domain's answers took `ms`. */
    tookMs(domainId: string, ms: number) {
      const times = recent.get(domainId) ?? [];
      times.push(ms);
      if (times.length > KEPT_ANSWERS) times.shift();
      recent.set(domainId, times);
    },

    /**
     * The request's end if it comes within `waitMs`, else null. When the wait's timer fires, ready sockets are
     * read first (one turn of the loop: libuv runs due timers before it polls for I/O), so an answer that came
     * while this worker's loop stalled is heard, not counted as silence. Rejects when `signal` aborts.
     */
    async within(asked: Promise<Heard>, waitMs: number, signal: AbortSignal): Promise<Heard | null> {
      let ended: Heard | null = null;
      // A request of an earlier watch rejects when that watch ends: no answer, and the next round asks anew.
      const settled = asked.then(
        (heard) => (ended = heard),
        () => undefined,
      );
      let timer: NodeJS.Timeout | undefined;
      const waited = new Promise<void>((resolve) => {
        timer = setTimeout(() => setImmediate(resolve), waitMs);
      });
      try {
        await Promise.race([settled, waited]);
      } finally {
        clearTimeout(timer);
      }
      if (signal.aborted) throw signal.reason;
      return ended;
    },

    /** A verdict used `heard`, the domain's own answer in its wait: any late answer kept is older news. */
    heardNow(domainId: string, heard: Heard) {
      late.delete(domainId);
      if (heard.outcome.kind === 'answered') usedAt.set(domainId, heard.at.getTime());
    },

    /** Keeps the request's answer, if one comes after its wait and is newer than any a verdict used. */
    keepLate(domainId: string, asked: Promise<Heard>) {
      asked.then(
        (heard) => {
          if (heard.outcome.kind !== 'answered' || heard.at.getTime() <= (usedAt.get(domainId) ?? 0)) return;
          const kept = late.get(domainId);
          if (!kept || kept.at < heard.at) late.set(domainId, heard);
        },
        () => undefined, // aborted: the watch ended
      );
    },

    /** The late answer kept for the domain, if any, now used by a verdict. */
    takeLate(domainId: string): Heard | null {
      const heard = late.get(domainId) ?? null;
      late.delete(domainId);
      if (heard) usedAt.set(domainId, heard.at.getTime());
      return heard;
    },
  };
}
export type AnswerBook = ReturnType<typeof createAnswerBook>;
