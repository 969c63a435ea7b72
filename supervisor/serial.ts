/**
 * Runs tasks one at a time per key, in arrival order. A retried request (a workflow activity that timed out
 * and runs again) then waits for the earlier attempt instead of interleaving with it on the same GPU.
 */
export function createKeyedSerializer<K>() {
  const tails = new Map<K, Promise<unknown>>();
  return function run<T>(key: K, task: () => Promise<T>): Promise<T> {
    const previous = tails.get(key) ?? Promise.resolve();
    const next = previous.then(task, task);
    const tail = next.catch(() => {});
    tails.set(key, tail);
    void tail.then(() => {
      if (tails.get(key) === tail) tails.delete(key);
    });
    return next;
  };
}
