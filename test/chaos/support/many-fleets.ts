import path from 'node:path';
import type { Client } from '@temporalio/client';
import { seedLayout, type TestDatabase } from '../../../db/testing';
import { fleetLayoutSchema, type FleetLayout } from '../../../schemas/layout';
import type { FleetPolicyInput } from '../../../schemas/policy';
import { SIM_TRAINER } from '../../../sim/domain';
import { monitorWorkflowId } from '../../../workflows/definitions';
import { freePort } from '../../support/ports';
import { eventually } from '../../workflows/support/temporal';

/**
 * Many two-domain fleets at once (east active, west standby), for the chaos tests in which a region fails
 * many fleets together; their simulated hosts run in few processes (bench/support/sim-host.ts), as in
 * `bench:scale`.
 */

/** The model every fleet serves. */
export const MANY_FLEETS_MODEL = 'mass-model';

/** A fleet as seeded: its ids and the routing revision it started at. */
export interface SeededFleet {
  slug: string;
  fleetId: string;
  eastId: string;
  westId: string;
  routeRevision: number;
}

/** The fleet's layout as the simulated host runs it, with ports of its own. */
export async function simLayout(slug: string, stateDir: string, policy: FleetPolicyInput): Promise<FleetLayout> {
  const domain = async (name: 'east' | 'west') => ({
    slug: name,
    supervisorUrl: `http://127.0.0.1:${await freePort()}`,
    slots: [
      {
        kind: 'inference' as const,
        gpuIndex: 0,
        models: [{ name: MANY_FLEETS_MODEL, servingUrl: `http://127.0.0.1:${await freePort()}/v1` }],
      },
      {
        kind: 'training' as const,
        gpuIndex: 0,
        command: ['node', SIM_TRAINER],
        checkpointDir: path.join(stateDir, slug, name, 'checkpoints'),
      },
    ],
  });
  return fleetLayoutSchema.parse({
    fleet: { slug, activeDomain: 'east', policy },
    domains: [await domain('east'), await domain('west')],
  });
}

/** `count` layouts named `<prefix>-<i>`. */
export async function simLayouts(
  count: number,
  prefix: string,
  stateDir: string,
  policy: FleetPolicyInput,
): Promise<FleetLayout[]> {
  const layouts: FleetLayout[] = [];
  for (let i = 0; i < count; i += 1) layouts.push(await simLayout(`${prefix}-${i}`, stateDir, policy));
  return layouts;
}

/**
 * Seeds every layout with its domains `ready` from the start, as fleets that have served for a while (a first
 * look is not what these tests are about).
 */
export async function seedReadyFleets(db: TestDatabase, layouts: readonly FleetLayout[]): Promise<SeededFleet[]> {
  const fleets: SeededFleet[] = [];
  for (const layout of layouts) {
    const { fleetId } = await seedLayout(db.store, layout);
    const snapshot = (await db.store.fleets.snapshot(fleetId))!;
    for (const d of snapshot.domains) await db.store.domains.transition(d.id, 'ready');
    fleets.push({
      slug: layout.fleet.slug,
      fleetId,
      eastId: snapshot.domains.find((d) => d.slug === 'east')!.id,
      westId: snapshot.domains.find((d) => d.slug === 'west')!.id,
      routeRevision: snapshot.routeRevision,
    });
  }
  return fleets;
}

/** Waits until every fleet's monitor has polled both its domains (the store has a sighting of each). */
export async function untilEveryDomainPolled(db: TestDatabase, fleets: readonly SeededFleet[]): Promise<void> {
  await eventually(
    'every monitor to have polled both its domains',
    async () => {
      for (const f of fleets) {
        const snapshot = (await db.store.fleets.snapshot(f.fleetId))!;
        if (!snapshot.domains.every((d) => d.lastSeenAt !== null)) return false;
      }
      return true;
    },
    120_000,
    250,
  );
}

/** Terminates every fleet's monitor (the test's end: the worker is gone, the workflows would wait on). */
export async function terminateMonitors(client: Client, fleets: readonly SeededFleet[]): Promise<void> {
  await Promise.all(
    fleets.map((f) =>
      client.workflow
        .getHandle(monitorWorkflowId(f.fleetId))
        .terminate('test over')
        .catch(() => undefined),
    ),
  );
}
