/** Polls `condition` until it returns a truthy value or `timeoutMs` passes (then throws naming `what`). */
export async function waitUntil<T>(
  what: string,
  condition: () => T | Promise<T>,
  { timeoutMs = 20_000, intervalMs = 25 } = {},
): Promise<NonNullable<T>> {
  const deadline = Date.now() + timeoutMs;
  let lastError: unknown;
  for (;;) {
    try {
      const value = await condition();
      if (value) return value as NonNullable<T>;
    } catch (err) {
      lastError = err;
    }
    if (Date.now() > deadline) {
      throw new Error(`timed out waiting for ${what}${lastError ? `: ${String(lastError)}` : ''}`);
    }
    await new Promise((r) => setTimeout(r, intervalMs));
  }
}

/** A promise with its resolver, for gating a fake upstream until the test says go. */
export function gate(): { promise: Promise<void>; open(): void } {
  let open!: () => void;
  const promise = new Promise<void>((resolve) => {
    open = resolve;
  });
  return { promise, open };
}
