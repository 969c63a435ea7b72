import type { Logger } from '../../lib/logger';

/**
 * The passive health signals: a connection refused or reset by an active upstream asks the fleet's
 * monitor to re-check now (debounced per fleet so a burst of failed requests sends one signal), and a
 * successful answer relayed from a domain is announced as its proof of life (debounced per domain).
 */
export interface HealthSignal {
  /** Fire and forget; never throws. Returns true when a signal was sent (not debounced). */
  report(fleetId: string): boolean;
  /**
   * A successful answer relayed from `domainId`: proof of life for the monitor, announced at most once per
   * `servedDebounceMs` per domain. Fire and forget; never throws. Returns true when announced.
   */
  served(domainId: string): boolean;
}

export function createHealthSignal(opts: {
  checkNow: (fleetId: string) => Promise<void>;
  debounceMs: number;
  /** Publishes a proof of life (the store's `announceServed`); absent: relayed answers are not announced. */
  announceServed?: (domainId: string, at: Date) => Promise<void>;
  servedDebounceMs?: number;
  now?: () => Date;
  logger?: Logger;
}): HealthSignal {
  const now = () => (opts.now ? opts.now().getTime() : Date.now());
  const last = new Map<string, number>();
  const lastServed = new Map<string, number>();
  return {
    served(domainId) {
      if (!opts.announceServed) return false;
      const t = now();
      const previous = lastServed.get(domainId);
      if (previous !== undefined && t - previous < (opts.servedDebounceMs ?? 250)) return false;
      lastServed.set(domainId, t);
      if (lastServed.size > 10_000) lastServed.clear();
      opts.announceServed(domainId, new Date(t)).catch((err: unknown) =>
        opts.logger?.warn('proof of life not announced', {
          domainId,
          error: err instanceof Error ? err.message : String(err),
        }),
      );
      return true;
    },
    report(fleetId) {
      const t = now();
      const previous = last.get(fleetId);
      if (previous !== undefined && t - previous < opts.debounceMs) return false;
      last.set(fleetId, t);
      if (last.size > 10_000) last.clear(); // bounded; losing debounce state only costs one extra signal
      opts.checkNow(fleetId).then(
        () => opts.logger?.info('passive health signal sent', { fleetId }),
        (err: unknown) =>
          opts.logger?.warn('passive health signal failed', {
            fleetId,
            error: err instanceof Error ? err.message : String(err),
          }),
      );
      return true;
    },
  };
}
