/**
 * Resolves once `written()` has not grown across eight looks 25 ms apart: the writer is blocked
 * (backpressure), not just between two writes.
 */
export async function writesStall(written: () => number): Promise<void> {
  let last = -1;
  let still = 0;
  while (still < 8) {
    await new Promise((resolve) => setTimeout(resolve, 25));
    const now = written();
    still = now === last ? still + 1 : 0;
    last = now;
  }
}

/** `promise`, or a rejection naming `what` after `ms`: a stalled stream fails its test instead of hanging it. */
export function withDeadline<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const deadline = new Promise<never>((_resolve, reject) => {
    timer = setTimeout(() => reject(new Error(`${what} did not arrive within ${ms} ms`)), ms);
  });
  return Promise.race([promise, deadline]).finally(() => clearTimeout(timer));
}
