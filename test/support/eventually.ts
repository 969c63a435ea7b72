/** The value of `T` once it is truthy. */
export type Truthy<T> = Exclude<T, null | undefined | false | 0 | ''>;

/**
 * Polls `check` until it returns a truthy value (returned) or `timeoutMs` passes (then throws naming `what`
 * and the last error `check` threw). This is how tests wait for processes and state: never a fixed sleep.
 */
export async function eventually<T>(
  what: string,
  check: () => T | Promise<T>,
  timeoutMs = 30_000,
  intervalMs = 50,
): Promise<Truthy<T>> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  for (;;) {
    try {
      const value = await check();
      if (value) return value as Truthy<T>;
    } catch (err) {
      last = err;
    }
    if (Date.now() > deadline) {
      throw new Error(
        `timed out after ${timeoutMs} ms waiting for ${what}${last ? ` (last error: ${String(last)})` : ''}`,
      );
    }
    await new Promise((r) => setTimeout(r, intervalMs));
  }
}
