/**
 * Chaos: 100 promote requests for one fleet at once, for two different standbys (and a few for the
 * active), through the real API on Postgres and the Temporal dev server. The partial unique index must
 * let exactly one operation exist; every other request joins it (same target) or gets 409.
 */
import { call, type Harness, startHarness, uniqueSlug } from '../api/support/harness';

jest.setTimeout(120_000);

let h: Harness | undefined;
afterAll(async () => {
  await h?.close();
});

const domain = (slug: string, port: number) => ({
  slug,
  supervisorUrl: 'http://127.0.0.1:9',
  slots: [
    { kind: 'inference' as const, gpuIndex: 0, models: [{ name: 'm', servingUrl: `http://127.0.0.1:${port}/v1` }] },
    { kind: 'training' as const, gpuIndex: 0, command: ['true'], checkpointDir: `/tmp/haru-storm/${slug}` },
  ],
});

it('100 concurrent promote requests (mixed targets) create exactly one operation; the rest join it or get 409', async () => {
  h = await startHarness({});
  const fleet = await h.seed({
    fleet: { slug: uniqueSlug('storm'), activeDomain: 'east', policy: { autoFailover: false } },
    domains: [domain('east', 9), domain('west', 9), domain('north', 9)],
  });
  const targets = Array.from({ length: 100 }, (_, i) => (i % 10 === 9 ? 'east' : i % 2 ? 'west' : 'north'));
  const answers = await Promise.all(
    targets.map(async (target) => ({
      target,
      ...(await call(`${h!.url}/v1/fleets/${fleet.slug}/promote`, { body: { targetDomainId: target } })),
    })),
  );

  expect(answers.filter((a) => a.status >= 500)).toEqual([]);
  const operations = await h.store.operations.list(fleet.id);
  expect(operations).toHaveLength(1);
  const [operation] = operations;
  const winner = fleet.domains.find((d) => d.id === operation!.targetDomainId)!.slug;

  for (const a of answers) {
    if (a.target === 'east') {
      expect([a.status, a.body.status]).toEqual([200, 'already_active']);
    } else if (a.target === winner) {
      expect(a.status).toBe(202);
      expect(a.body.operation.id).toBe(operation!.id);
    } else {
      expect([a.status, a.body.error?.code]).toEqual([409, 'operation_conflict']);
    }
  }
  const accepted = answers.filter((a) => a.status === 202);
  expect(accepted.filter((a) => a.body.status === 'accepted')).toHaveLength(1);
  expect(accepted.filter((a) => a.body.status === 'joined')).toHaveLength(accepted.length - 1);
  console.log(
    `promote storm: ${accepted.length} accepted or joined (${winner}), ` +
      `${answers.filter((a) => a.status === 409).length} conflicts, ` +
      `${answers.filter((a) => a.status === 200).length} already active`,
  );
  // Routing did not move: no worker ran the operation.
  expect((await h.fleet(fleet.slug)).routeRevision).toBe(fleet.routeRevision);
  await h.temporal.client.workflow.getHandle(operation!.workflowId).terminate('storm test over');
});
