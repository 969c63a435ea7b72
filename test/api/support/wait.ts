import { eventually, type Truthy } from '../../support/eventually';

/** Polls `condition` until it returns a truthy value or `timeoutMs` passes (then throws naming `what`). */
export const waitUntil = <T>(
  what: string,
  condition: () => T | Promise<T>,
  { timeoutMs = 20_000, intervalMs = 25 } = {},
): Promise<Truthy<T>> => eventually(what, condition, timeoutMs, intervalMs);

/** A promise with its resolver, for gating a fake upstream until the test says go. */
export function gate(): { promise: Promise<void>; open(): void } {
  let open!: () => void;
  const promise = new Promise<void>((resolve) => {
    open = resolve;
  });
  return { promise, open };
}
