/**
 * The bytes of request bodies one API process holds at once. A proxied body is kept whole for its request's
 * life (it may be sent again to the new active after a failover), so without a bound, bodies sent to a slow
 * upstream add up to whatever memory the host has (20 bodies of 16 MiB held by a slow upstream took the API
 * from 716 to 1,123 MiB). Past the budget a request is answered 429 `overloaded` with `Retry-After` at once,
 * losing nothing: it was not sent anywhere.
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
