/** Thrown by a check to stop waiting at once (the thing waited for can no longer happen). */
export class WaitAborted extends Error {}

/** Polls `check` until it returns a value other than undefined, or throws after `timeoutMs` naming `what`. */
export async function waitFor<T>(
  what: string,
  check: () => Promise<T | undefined>,
  opts: { timeoutMs: number; intervalMs?: number; wait?: (ms: number) => Promise<void> },
): Promise<T> {
  const wait = opts.wait ?? ((ms: number) => new Promise<void>((r) => setTimeout(r, ms)));
  const deadline = Date.now() + opts.timeoutMs;
  let lastError: unknown;
  for (;;) {
    try {
      const value = await check();
      if (value !== undefined) return value;
    } catch (err) {
      if (err instanceof WaitAborted) throw err;
      lastError = err;
    }
    if (Date.now() >= deadline) {
      const why = lastError instanceof Error ? `: ${lastError.message}` : '';
      throw new Error(`timed out after ${Math.round(opts.timeoutMs / 1000)}s waiting for ${what}${why}`);
    }
    await wait(opts.intervalMs ?? 200);
  }
}
