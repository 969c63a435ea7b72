/** One thing to stop, named for the message when stopping it fails. */
export interface Closer {
  what: string;
  fn: () => Promise<unknown>;
}

/**
 * Runs `closers` last-first (the reverse of start order) and empties the list. Each is bounded by
 * `timeoutMs` so one stuck part cannot keep the others running; failures are reported through `err`.
 */
export async function runClosers(closers: Closer[], err: (line: string) => void, timeoutMs = 30_000): Promise<void> {
  for (const closer of closers.splice(0).reverse()) {
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<'timeout'>((r) => {
      timer = setTimeout(() => r('timeout'), timeoutMs);
    });
    const result = await Promise.race([closer.fn().then(() => 'ok' as const), timeout]).catch((e: Error) => e);
    clearTimeout(timer);
    if (result === 'timeout') err(`haru dev: stopping ${closer.what} timed out`);
    else if (result instanceof Error) err(`haru dev: stopping ${closer.what} failed: ${result.message}`);
  }
}
