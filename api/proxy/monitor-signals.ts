import type { Logger } from '../../lib/logger';

/**
 * What the proxy tells the fleet monitor from the traffic it carries: an upstream failure (the active refused,
 * reset or timed out) asks the monitor to re-check now, debounced per fleet so a burst of failed requests
 * sends one signal; a served answer (a 2xx relayed from a domain) is evidence the domain is alive, announced
 * at most once per `servedAnswerDebounceMs` per domain.
 */
export interface MonitorSignals {
  /** Fire and forget; never throws. Returns true when a signal was sent (not debounced). */
  upstreamFailed(fleetId: string): boolean;
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
  servedAnswerDebounceMs?: number;
  now?: () => Date;
  logger?: Logger;
}): MonitorSignals {
  const now = () => (opts.now ? opts.now().getTime() : Date.now());
  const lastFailure = new Map<string, number>();
  const lastServedAnswer = new Map<string, number>();
  return {
    servedAnswer(domainId) {
      if (!opts.announceServedAnswer) return false;
      const t = now();
      const previous = lastServedAnswer.get(domainId);
      if (previous !== undefined && t - previous < (opts.servedAnswerDebounceMs ?? 250)) return false;
      lastServedAnswer.set(domainId, t);
      if (lastServedAnswer.size > 10_000) lastServedAnswer.clear();
      opts.announceServedAnswer(domainId, new Date(t)).catch((err: unknown) =>
        opts.logger?.warn('served answer not announced', {
          domainId,
          error: err instanceof Error ? err.message : String(err),
        }),
      );
      return true;
    },
    upstreamFailed(fleetId) {
      const t = now();
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
