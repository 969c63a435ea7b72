/**
 * Does nothing, once, when a worker starts (workers/worker.ts `warmUpOperations`): the workflow task it takes is
 * the SDK worker's first on the operations queue, which costs its workflow thread the compiling and set-up
 * that the first promotion would otherwise pay in the middle of a failover.
 */
export function workerWarmUpWorkflow(): Promise<void> {
  return Promise.resolve();
}
