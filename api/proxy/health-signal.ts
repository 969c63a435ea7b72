import type { Logger } from '../../lib/logger';

/**
 * The passive health signal: a connection refused or reset by an active upstream asks the fleet's
 * monitor to re-check now. Debounced per fleet so a burst of failed requests sends one signal.
 */
export interface HealthSignal {
  /** Fire and forget; never throws. Returns true when a signal was sent (not debounced). */
  report(fleetId: string): boolean;
}

export function createHealthSignal(opts: {
  checkNow: (fleetId: string) => Promise<void>;
  debounceMs: number;
  now?: () => Date;
  logger?: Logger;
}): HealthSignal {
  const now = () => (opts.now ? opts.now().getTime() : Date.now());
  const last = new Map<string, number>();
  return {
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
