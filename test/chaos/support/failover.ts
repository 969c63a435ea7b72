import type { Operation } from '../../../schemas/entities';
import { complete, type SimFleetDomain } from '../../workflows/support/sim-fleet';
import { eventually } from '../../workflows/support/temporal';
import type { ChaosRig } from './rig';

/** Waits until the monitor counts `domain` as a ready standby (what it must be to be failed over to). */
export async function standbyReady(rig: ChaosRig, domain: SimFleetDomain, timeoutMs = 90_000): Promise<void> {
  await eventually(
    `the monitor to count ${domain.slug} as ready`,
    async () => (await rig.fleet.db.store.domains.get(domain.id))?.state === 'ready',
    timeoutMs,
    100,
  );
}

/**
 * The proof that a fleet is not wedged: kills the active host and waits for the monitor to fail over to
 * `standby` by itself. Returns the monitor's promotion.
 */
export async function failsOverOnKill(
  rig: ChaosRig,
  active: SimFleetDomain,
  standby: SimFleetDomain,
  timeoutMs = 120_000,
): Promise<Operation> {
  expect((await rig.routing()).activeDomainId).toBe(active.id);
  await active.sim.kill();
  await eventually(
    `the monitor to fail ${active.slug} over to ${standby.slug}`,
    async () => (await rig.routing()).activeDomainId === standby.id,
    timeoutMs,
    50,
  );
  const operations = await rig.fleet.db.store.operations.list(rig.fleet.fleetId);
  const failover = operations.find(
    (o) => o.requestedBy === 'monitor' && o.targetDomainId === standby.id && o.routingCommitted,
  );
  expect(failover).toBeDefined();
  expect(await complete(standby.servingUrl)).not.toBe('');
  return failover!;
}
