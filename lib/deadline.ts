/** One request's abort signal: fires at its timeout or when the caller's own signal aborts, whichever is first. */
export interface Deadline {
  signal: AbortSignal;
  /** Whether it was the timeout that fired (not the caller's signal). */
  isTimedOut(): boolean;
  /**
   * `work`, or a rejection with the signal's reason the moment the deadline fires, whatever phase `work` is in.
   * undici does not reject a request whose TCP connect is still pending when its signal aborts: it waits for
   * the dispatcher's connect timeout (10 s by default), and against a host that drops packets (no RST) that is
   * the whole wait. `release` gets a value that arrives after the deadline (a late response whose body must be
   * let go); a late rejection is dropped.
   */
  bound<T>(work: Promise<T>, release?: (late: T) => void): Promise<T>;
  /** Stops the timer and lets go of the caller's signal: call it once the request settled, either way. */
  clear(): void;
}

const ignore = () => undefined;

/**
 * A deadline of `timeoutMs` joined with `caller` in one AbortController and one timer that `clear` stops. The
 * HTTP clients that poll hosts several times a second use it instead of `AbortSignal.timeout` (plus
 * `AbortSignal.any`): that timer is never cleared, fires long after the answer and builds a `DOMException`
 * each time, which at hundreds of calls a second was a visible share of their CPU.
 */
export function startDeadline(timeoutMs: number, caller?: AbortSignal): Deadline {
  const controller = new AbortController();
  const { signal } = controller;
  let isTimedOut = false;
  const timer = setTimeout(() => {
    isTimedOut = true;
    controller.abort();
  }, timeoutMs);
  const onAbort = () => controller.abort(caller?.reason);
  if (caller?.aborted) onAbort();
  else caller?.addEventListener('abort', onAbort, { once: true });
  return {
    signal,
    isTimedOut: () => isTimedOut,
    bound<T>(work: Promise<T>, release: (late: T) => void = ignore): Promise<T> {
      if (signal.aborted) {
        work.then(release, ignore);
        return Promise.reject(signal.reason);
      }
      return new Promise<T>((resolve, reject) => {
        let isLate = false;
        const onDeadline = () => {
          isLate = true;
          reject(signal.reason);
        };
        signal.addEventListener('abort', onDeadline, { once: true });
        work.then(
          (value) => {
            signal.removeEventListener('abort', onDeadline);
            if (isLate) release(value);
            else resolve(value);
          },
          (err: unknown) => {
            signal.removeEventListener('abort', onDeadline);
            if (!isLate) reject(err);
          },
        );
      });
    },
    clear() {
      clearTimeout(timer);
      caller?.removeEventListener('abort', onAbort);
    },
  };
}
