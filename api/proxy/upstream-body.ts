import type { ForwardOutcome } from './forwarder';

/** An upstream that answered: its status, headers and body (`first`, then `rest`). */
export type UpstreamResponse = Extract<ForwardOutcome, { kind: 'response' }>;

const ERROR_BODY_LIMIT = 64 * 1024;

/** Up to 64 KiB of an upstream body (more is not read); the upstream is aborted after. */
export async function readSome(upstream: UpstreamResponse): Promise<Buffer> {
  const parts: Buffer[] = upstream.first ? [upstream.first] : [];
  let size = parts[0]?.length ?? 0;
  while (size < ERROR_BODY_LIMIT) {
    const next = await upstream.rest.next();
    if (next.done) break;
    parts.push(next.value);
    size += next.value.length;
  }
  upstream.abort();
  return Buffer.concat(parts);
}

/** The `error` object of an upstream error body (vLLM's `{"error": {…}}`), or one built from its text. */
export async function upstreamError(upstream: UpstreamResponse): Promise<unknown> {
  const raw = await readSome(upstream).catch(() => Buffer.alloc(0));
  try {
    const parsed = JSON.parse(raw.toString('utf8')) as { error?: unknown };
    return parsed?.error ?? parsed;
  } catch {
    return { message: raw.toString('utf8'), code: upstream.statusCode };
  }
}
