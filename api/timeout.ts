import { HaruError } from '../schemas/errors';

/**
 * Resolves like `promise`, or rejects with HaruError `state_store_unavailable` after `ms`. The store call
 * itself keeps running; only the request stops waiting for it.
 */
export function storeDeadline<T>(promise: Promise<T>, ms: number, what = 'the state store'): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const timer = setTimeout(
      () => reject(new HaruError('state_store_unavailable', `${what} did not answer within ${ms} ms`)),
      ms,
    );
    promise.then(
      (v) => {
        clearTimeout(timer);
        resolve(v);
      },
      (err: unknown) => {
        clearTimeout(timer);
        reject(err);
      },
    );
  });
}
