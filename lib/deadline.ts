/** One request's abort signal: fires at its timeout or when the caller's own signal aborts, whichever is first. */
export interface Deadline {
  signal: AbortSignal;
  /** Whether it was the timeout that fired (not the caller's signal). */
  isTimedOut(): boolean;
  /** Stops the timer and lets go of the caller's signal: call it once the request settled, either way. */
  clear(): void;
}

/**
 * A deadline of `timeoutMs` joined with `caller` in one AbortController and one timer that `clear` stops. The
 * HTTP clients that poll hosts several times a second use it instead of `AbortSignal.timeout` (plus
 * `AbortSignal.any`): that timer is never cleared, fires long after the answer and builds a `DOMException`
 * each time, which at hundreds of calls a second was a visible share of their CPU.
 */
export function startDeadline(timeoutMs: number, caller?: AbortSignal): Deadline {
  const controller = new AbortController();
  let isTimedOut = false;
  const timer = setTimeout(() => {
    isTimedOut = true;
    controller.abort();
  }, timeoutMs);
  const onAbort = () => controller.abort(caller?.reason);
  if (caller?.aborted) onAbort();
  else caller?.addEventListener('abort', onAbort, { once: true });
  return {
    signal: controller.signal,
    isTimedOut: () => isTimedOut,
    clear() {
      clearTimeout(timer);
      caller?.removeEventListener('abort', onAbort);
    },
  };
}
