import type { AbortLike } from './client-gone';
import type { RoutingCache } from './routing-cache';

/** A bounded count of requests waiting for a route move. */
export interface HoldQueue {
  /** Takes a place; null when `max` requests are already held (the caller answers 429). */
  tryEnter(): (() => void) | null;
  readonly held: number;
  readonly max: number;
}

/** Creates the hold queue; `onChange` reports the held count (a metrics gauge). */
export function createHoldQueue(max: number, onChange?: (held: number) => void): HoldQueue {
  let held = 0;
  return {
    max,
    get held() {
      return held;
    },
    tryEnter() {
      if (held >= max) return null;
      held++;
      onChange?.(held);
      let left = false;
      return () => {
        if (left) return;
        left = true;
        held--;
        onChange?.(held);
      };
    },
  };
}

/**
 * Waits until `fleetId`'s route moves past `sinceRevision`, `ms` elapse, or `signal` aborts, whichever
 * comes first. Never rejects.
 */
export function waitForRouteMove(
  cache: Pick<RoutingCache, 'onMove'>,
  fleetId: string,
  sinceRevision: number,
  ms: number,
  signal: AbortLike,
): Promise<'moved' | 'elapsed' | 'aborted'> {
  if (signal.aborted) return Promise.resolve('aborted');
  return new Promise((resolve) => {
    const done = (why: 'moved' | 'elapsed' | 'aborted') => {
      clearTimeout(timer);
      unsubscribe();
      signal.removeEventListener('abort', onAbort);
      resolve(why);
    };
    const onAbort = () => done('aborted');
    const timer = setTimeout(() => done('elapsed'), Math.max(0, ms));
    const unsubscribe = cache.onMove((id, revision) => {
      if (id === fleetId && revision > sinceRevision) done('moved');
    });
    signal.addEventListener('abort', onAbort, { once: true });
  });
}
