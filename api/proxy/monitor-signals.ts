import type { Logger } from '../../lib/logger';

/**
 * What the proxy tells the fleet monitor from the traffic it carries: an upstream failure (the active refused,
 * reset or timed out) asks the monitor to re-check now, debounced per fleet so a burst of failed requests
 * sends one signal, and is announced as the domain's missed answer; a served answer (a 2xx relayed from a
 * domain) is evidence the domain is alive. Each domain's answers, served or missed, are announced at most once
 * per `servedAnswerDebounceMs`.
 */
export interface MonitorSignals {
  /**
   * The proxy got no answer from `domainId` (`why`). Fire and forget; never throws. Returns true when the
   * `checkNow` signal was sent (not debounced).
   */
  upstreamFailed(fleetId: string, domainId: string, why: string): boolean;
  /** A successful answer relayed from `domainId`. Fire and forget; never throws. Returns true when announced. */
  servedAnswer(domainId: string): boolean;
}

/**
 * Least time between two `checkNow` signals for one fleet: a burst of failed requests costs the monitor one
 * extra poll, and the monitor's own cadence (500 ms) covers anything sooner.
 */
export const CHECK_NOW_DEBOUNCE_MS = 1_000;

export function createMonitorSignals(opts: {
  checkNow: (fleetId: string) => Promise<void>;
  /** Default CHECK_NOW_DEBOUNCE_MS. */
  debounceMs?: number;
  /** Publishes a served answer (the store's `announceServedAnswer`); absent: served answers are not announced. */
  announceServedAnswer?: (domainId: string, at: Date) => Promise<void>;
  /** Publishes a missed answer (the store's `announceMissedAnswer`); absent: missed answers are not announced. */
  announceMissedAnswer?: (domainId: string, at: Date, why: string) => Promise<void>;
  servedAnswerDebounceMs?: number;
  now?: () => Date;
  logger?: Logger;
}): MonitorSignals {
  const now = () => (opts.now ? opts.now().getTime() : Date.now());
  const lastFailure = new Map<string, number>();
  const lastServedAnswer = new Map<string, number>();
  const lastMissedAnswer = new Map<string, number>();
  /** Whether `domainId`'s answer of this kind was announced within the debounce; if not, notes it now. */
  const isDebounced = (last: Map<string, number>, domainId: string, t: number) => {
    const previous = last.get(domainId);
    if (previous !== undefined && t - previous < (opts.servedAnswerDebounceMs ?? 250)) return true;
    last.set(domainId, t);
    if (last.size > 10_000) last.clear(); // bounded; losing debounce state only costs one extra NOTIFY
    return false;
  };
  const announced = (what: string, domainId: string) => (err: unknown) =>
    opts.logger?.warn(`${what} not announced`, { domainId, error: err instanceof Error ? err.message : String(err) });
  return {
    servedAnswer(domainId) {
      if (!opts.announceServedAnswer) return false;
      const t = now();
      if (isDebounced(lastServedAnswer, domainId, t)) return false;
      opts.announceServedAnswer(domainId, new Date(t)).catch(announced('served answer', domainId));
      return true;
    },
    upstreamFailed(fleetId, domainId, why) {
      const t = now();
      if (opts.announceMissedAnswer && !isDebounced(lastMissedAnswer, domainId, t)) {
        opts.announceMissedAnswer(domainId, new Date(t), why).catch(announced('missed answer', domainId));
      }
      const previous = lastFailure.get(fleetId);
      if (previous !== undefined && t - previous < (opts.debounceMs ?? CHECK_NOW_DEBOUNCE_MS)) return false;
      lastFailure.set(fleetId, t);
      if (lastFailure.size > 10_000) lastFailure.clear(); // bounded; losing debounce state only costs one extra signal
      opts.checkNow(fleetId).then(
        () => opts.logger?.info('upstream failure signalled to the monitor', { fleetId }),
        (err: unknown) =>
          opts.logger?.warn('upstream failure not signalled to the monitor', {
            fleetId,
            error: err instanceof Error ? err.message : String(err),
          }),
      );
      return true;
    },
  };
}
