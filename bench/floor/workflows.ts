import { proxyActivities } from '@temporalio/workflow';

/** Bundled only by `npm run bench:floor`: the least a chain of sequential activities costs in Temporal. */
const { noop } = proxyActivities<{ noop(step: number): Promise<number> }>({ startToCloseTimeout: '10s' });

/** `steps` activities one after another, each doing nothing: what is left is Temporal's own round trips. */
export async function sequentialNoops(steps: number): Promise<number> {
  let done = 0;
  for (let i = 0; i < steps; i += 1) done += await noop(i);
  return done;
}
