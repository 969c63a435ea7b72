/**
 * `haru fleet operations` against the real API and store, the steps recorded and the operation finished by the
 * same activities the promotion workflow uses (`recordStep`, `finishOperation`): a promotion whose demotion of the old active failed
 * reads `succeeded (not demoted)`, one whose demotion succeeded reads `succeeded`.
 */
import { createFleetStoreActivities } from '../../activities/fleet-store';
import { startHarness, type Harness, twoDomainLayout } from '../../test/api/support/harness';
import { quietEnvironment, runIn } from '../../test/support/activity-environment';
import { runCli } from '../../test/support/cli';
import { FakeHost } from '../../test/support/fake-host';

let h: Harness;
beforeAll(async () => {
  h = await startHarness({});
});
afterAll(() => h?.close());

it('reads a promotion whose demotion failed as succeeded (not demoted), with the demotion error', async () => {
  const fleet = await h.seed(twoDomainLayout({ eastUrl: 'http://127.0.0.1:9', westUrl: 'http://127.0.0.1:9' }));
  const west = fleet.domains.find((d) => d.slug === 'west')!;
  const acts = createFleetStoreActivities({ store: h.store, supervisor: new FakeHost().client, now: () => new Date() });
  const env = quietEnvironment();
  /** A succeeded promotion of west whose demotion step ended `demotion`, recorded as the workflow records it. */
  const promotion = async (demotion: 'succeeded' | 'failed') => {
    const { operation } = await h.store.operations.create({
      fleetId: fleet.id,
      kind: 'promote',
      targetDomainId: west.id,
      reason: 'test',
      requestedBy: 'test',
    });
    await h.store.operations.start(operation.id);
    const step = { fleetId: fleet.id, operationId: operation.id, domainId: west.id, step: 'demoteOldActive' };
    await runIn(env, acts.recordStep, { ...step, status: 'started', message: 'demoteOldActive started' });
    await runIn(env, acts.recordStep, {
      ...step,
      status: demotion,
      message:
        demotion === 'failed'
          ? 'demoteOldActive failed: old active unreachable, left as it was (drain: refused)'
          : 'old active on standby',
      ...(demotion === 'failed' ? { data: { code: 'SupervisorUnreachable' } } : {}),
    });
    // As the workflow ends it: succeeded, with the best-effort step's failure kept on the row.
    await runIn(env, acts.finishOperation, {
      fleetId: fleet.id,
      operationId: operation.id,
      outcome: 'succeeded',
      ...(demotion === 'failed'
        ? {
            error: {
              step: 'demoteOldActive',
              code: 'SupervisorUnreachable',
              message: 'old active unreachable, left as it was (drain: refused)',
            },
          }
        : {}),
    });
    return operation.id;
  };
  const failed = await promotion('failed');
  const fine = await promotion('succeeded');

  const run = await runCli(['fleet', 'operations', fleet.slug], { HARU_URL: h.url, HARU_CONFIG: '/nonexistent' });
  expect([run.code, run.stderr]).toEqual([0, '']);
  const row = (id: string) => run.stdout.split('\n').find((l) => l.includes(id));
  expect(row(failed)).toMatch(
    /^\d+s +promote +east → west +succeeded \(not demoted\) +demoteOldActive +\S+ +demoteOldActive: SupervisorUnreachable: old active unreachable, left as it was \(drain: refused\)$/,
  );
  expect(row(fine)).toMatch(/^\d+s +promote +east → west +succeeded +demoteOldActive +\S+ +-$/);
});
