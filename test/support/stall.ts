import type { IncomingMessage, ServerResponse } from 'node:http';

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

/**
 * An upstream that writes a large body (256 chunks of 128 KiB: 32 MiB, far past what sockets and a proxy's
 * queue hold) as fast as its socket takes it, waiting for `drain` when told to: with a reader that lags,
 * `progress.written` stops growing (see writesStall) and `progress.ended` stays false until it catches up.
 */
export function largeBodyUpstream(fill: string) {
  const chunk = Buffer.alloc(128 * 1024, fill);
  const chunkCount = 256;
  const progress = { written: 0, ended: false };
  const handler = async (_req: IncomingMessage, res: ServerResponse) => {
    res.writeHead(200, { 'content-type': 'application/octet-stream' });
    for (let i = 0; i < chunkCount; i += 1) {
      const more = res.write(chunk);
      progress.written += chunk.length;
      if (!more) await new Promise((resolve) => res.once('drain', resolve));
    }
    res.end(() => (progress.ended = true));
  };
  return { handler, progress, totalBytes: chunk.length * chunkCount };
}
