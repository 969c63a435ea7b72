import { seedLayout } from '../../../db/testing';
import type { SimFleet } from '../../workflows/support/sim-fleet';
import { startTcpRelay, type TcpRelay } from './tcp-relay';

/**
 * Puts a relay the test can cut or turn dark between Haru and one domain's supervisor, and seeds the fleet's
 * layout again with the relay's address: the worker then reaches that supervisor only through it.
 */
export async function relaySupervisor(fleet: SimFleet, slug: 'east' | 'west'): Promise<TcpRelay> {
  const relay = await startTcpRelay({ host: '127.0.0.1', port: Number(new URL(fleet[slug].supervisorUrl).port) });
  await seedLayout(fleet.db.store, {
    ...fleet.layout,
    domains: fleet.layout.domains.map((d) => (d.slug === slug ? { ...d, supervisorUrl: relay.url } : d)),
  });
  return relay;
}

/**
 * Puts a relay between Haru and one domain's model (its layout servingUrl), and seeds the layout again with
 * the relay's address: the proxy, the promotion's probe and the worker's refusal check reach the model only
 * through it; the supervisor still reaches its own engine directly.
 */
export async function relayModel(fleet: SimFleet, slug: 'east' | 'west'): Promise<TcpRelay> {
  const relay = await startTcpRelay({ host: '127.0.0.1', port: Number(new URL(fleet[slug].servingUrl).port) });
  const servingUrl = `${relay.url}/v1`;
  await seedLayout(fleet.db.store, {
    ...fleet.layout,
    domains: fleet.layout.domains.map((d) =>
      d.slug === slug
        ? {
            ...d,
            slots: d.slots.map((s) =>
              s.kind === 'inference' ? { ...s, models: s.models.map((m) => ({ ...m, servingUrl })) } : s,
            ),
          }
        : d,
    ),
  });
  return relay;
}
