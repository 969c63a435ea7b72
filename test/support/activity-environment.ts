/** Running activities in tests outside a worker. */
import { MockActivityEnvironment } from '@temporalio/testing';
import { DefaultLogger } from '@temporalio/worker';

/**
 * A MockActivityEnvironment that does not log every expected activity failure. No step budget unless `info`
 * gives one (`scheduleToCloseTimeoutMs`): the mock's own default of 1 s would stop a lifecycle activity's host
 * requests after 950 ms (activities/step-budget.ts).
 */
export const quietEnvironment = (info: ConstructorParameters<typeof MockActivityEnvironment>[0] = {}) =>
  new MockActivityEnvironment(
    { scheduleToCloseTimeoutMs: 0, ...info },
    { logger: new DefaultLogger('ERROR', () => undefined) },
  );

/** `env.run` with the activity's own types (MockActivityEnvironment's generics lose them). */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export function runIn<F extends (...args: any[]) => Promise<unknown>>(
  env: MockActivityEnvironment,
  fn: F,
  ...args: Parameters<F>
): ReturnType<F> {
  return env.run(fn as never, ...(args as unknown as never[])) as ReturnType<F>;
}
