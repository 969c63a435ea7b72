import type { ServerResponse } from 'node:http';
import { HaruError } from '../../schemas/errors';

/**
 * The bytes of request bodies one API process holds at once, from their first byte read to their response's
 * end. A proxied body is kept whole for its request's life (it may be sent again to the new active after a
 * failover), and one still arriving is held as it comes, so without a bound, bodies sent to a slow upstream, or
 * sent slowly, add up to whatever memory the host has (20 bodies of 16 MiB held by a slow upstream took the API
 * from 716 to 1,123 MiB). Past the budget a request is answered 429 `overloaded` with `Retry-After`, losing
 * nothing: it was not sent anywhere (api/proxy/body-reader.ts takes the bytes as they arrive).
 */
export interface BodyBudget {
  /** Holds `bytes` until the returned release is called; null when they do not fit the budget now. */
  take(bytes: number): (() => void) | null;
  readonly held: number;
  readonly limit: number;
}

/**
 * How many bodies of the largest size allowed (HARU_CHAT_MAX_BODY_BYTES) fit the budget at once: 256 MiB at
 * the default 32 MiB, a few thousand ordinary chat requests of tens of KiB.
 */
export const LARGEST_BODIES_HELD = 8;

export function createBodyBudget(limit: number): BodyBudget {
  let held = 0;
  return {
    limit,
    get held() {
      return held;
    },
    take(bytes) {
      if (held + bytes > limit) return null;
      held += bytes;
      let released = false;
      return () => {
        if (released) return;
        released = true;
        held -= bytes;
      };
    },
  };
}

/** The refusal past the budget: 429 `overloaded`, try again in a second. */
export const bodyBudgetExceeded = (budget: BodyBudget, bytes: number): HaruError =>
  new HaruError(
    'overloaded',
    `this API process holds ${budget.held} bytes of request bodies; ${bytes} more would pass its ${budget.limit}-byte budget`,
    { retryAfterSeconds: 1 },
  );

/** Keeps a read body's bytes taken (its `release` from the body reader) until its response closes. */
export function holdUntilClosed(res: ServerResponse, release: (() => void) | undefined): void {
  if (!release) return;
  if (res.closed) release();
  else res.once('close', release);
}
