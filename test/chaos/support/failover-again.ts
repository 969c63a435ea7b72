import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { WorkflowHandle } from '@temporalio/client';
import { startSimDomain } from '../../../sim/domain';
import { healthQuery } from '../../../workflows/definitions';
import type { SimFleet, SimFleetDomain } from '../../workflows/support/sim-fleet';
import { eventually } from '../../workflows/support/temporal';

/** The fleet's routing pointer as the store has it. */
export const activeOf = async (fleet: SimFleet): Promise<string | null> =>
  (await fleet.db.store.fleets.snapshot(fleet.fleetId))!.activeDomainId;

/** Waits until the monitor's health shows `domain` as a viable standby (it would promote it now). */
export async function untilViableStandby(
  monitor: WorkflowHandle,
  domain: SimFleetDomain,
  timeoutMs = 90_000,
): Promise<void> {
  await eventually(
    `the monitor to see ${domain.slug} as a viable standby`,
    async () => (await monitor.query(healthQuery))?.domains.find((d) => d.domainId === domain.id)?.isViableStandby,
    timeoutMs,
    100,
  );
}

/** SIGKILLs `dead`'s host (the active) and waits for the monitor to move routing to `to`. */
export async function killAndFailOver(fleet: SimFleet, dead: SimFleetDomain, to: SimFleetDomain): Promise<void> {
  expect(await activeOf(fleet)).toBe(dead.id);
  await dead.sim.kill();
  await eventually(`routing to move to ${to.slug}`, async () => (await activeOf(fleet)) === to.id, 180_000, 50);
}

/**
 * Brings a dead domain's host back as a standby (models asleep, training running; with `role` `active`,
 * models awake and training idle, as a host that restarted serving) from a fresh state directory;
 * `domain.sim` is replaced. Returns the cleanup that stops it (the fleet's own close does not).
 */
export async function reviveAsStandby(
  fleet: SimFleet,
  domain: SimFleetDomain,
  role: 'standby' | 'active' = 'standby',
): Promise<() => Promise<void>> {
  await domain.sim.kill();
  const stateDir = mkdtempSync(path.join(os.tmpdir(), `haru-revived-${domain.slug}-`));
  const sim = await startSimDomain({
    layout: fleet.layout,
    domainSlug: domain.slug,
    stateDir,
    role,
    shutdownGraceMs: 2_000,
  });
  domain.sim = sim;
  return async () => {
    await sim.kill();
    rmSync(stateDir, { recursive: true, force: true });
  };
}
