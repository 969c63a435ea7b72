/** The fields a link of an error chain may carry: a driver or socket `code`, a `message`, the wrapped `cause`. */
export interface ErrorLink {
  code?: unknown;
  message?: unknown;
  cause?: unknown;
}

/** Links looked at before giving up; real chains (fetch, drizzle, gRPC) are two or three deep, and a cyclic one ends. */
export const MAX_CAUSE_DEPTH = 5;

/**
 * Walks `err` and its `cause`s, outermost first, and returns the first value `pick` gives that is not
 * undefined (undefined when no link matches or `err` is not an object). Stops after MAX_CAUSE_DEPTH links.
 */
export function findCause<T>(err: unknown, pick: (link: ErrorLink) => T | undefined): T | undefined {
  let link = err;
  for (let depth = 0; depth < MAX_CAUSE_DEPTH && isObject(link); depth += 1) {
    const found = pick(link);
    if (found !== undefined) return found;
    link = link.cause;
  }
  return undefined;
}

/** True when some link of the chain satisfies `test`. */
export const hasCause = (err: unknown, test: (link: ErrorLink) => boolean): boolean =>
  findCause(err, (link) => (test(link) ? true : undefined)) === true;

/** The outermost string `code` in the chain that `accept` takes (by default any), or undefined. */
export function causeCode(err: unknown, accept: (code: string) => boolean = () => true): string | undefined {
  return findCause(err, (link) => (typeof link.code === 'string' && accept(link.code) ? link.code : undefined));
}

/**
 * What went wrong at the bottom of the chain, for a log line or an error message: the outermost string
 * `code` (fetch's `TypeError: fetch failed` hides ECONNREFUSED in its cause), else the innermost non-empty
 * message, else `String(err)`.
 */
export function describeCause(err: unknown): string {
  const code = causeCode(err);
  if (code !== undefined) return code;
  let message: string | undefined;
  findCause(err, (link) => {
    if (typeof link.message === 'string' && link.message) message = link.message;
    return undefined;
  });
  return message ?? String(err);
}

function isObject(value: unknown): value is ErrorLink {
  return (typeof value === 'object' || typeof value === 'function') && value !== null;
}
