import { seedLayout } from '../../../db/testing';
import type { FleetLayout } from '../../../schemas/layout';
import type { SimFleet } from '../../workflows/support/sim-fleet';
import { startTcpRelay, type TcpRelay } from './tcp-relay';

type Slug = 'east' | 'west';

/** Seeds the fleet's layout again with `slug`'s supervisor and/or models at the relays' addresses. */
async function seedRelayed(
  fleet: SimFleet,
  slug: Slug,
  to: { supervisorUrl?: string; servingUrl?: string },
): Promise<void> {
  const relayed = (d: FleetLayout['domains'][number]): FleetLayout['domains'][number] => ({
    ...d,
    ...(to.supervisorUrl && { supervisorUrl: to.supervisorUrl }),
    ...(to.servingUrl && {
      slots: d.slots.map((s) =>
        s.kind === 'inference' ? { ...s, models: s.models.map((m) => ({ ...m, servingUrl: to.servingUrl! })) } : s,
      ),
    }),
  });
  await seedLayout(fleet.db.store, {
    ...fleet.layout,
    domains: fleet.layout.domains.map((d) => (d.slug === slug ? relayed(d) : d)),
  });
}

const supervisorRelay = (fleet: SimFleet, slug: Slug) =>
  startTcpRelay({ host: '127.0.0.1', port: Number(new URL(fleet[slug].supervisorUrl).port) });
const modelRelay = (fleet: SimFleet, slug: Slug) =>
  startTcpRelay({ host: '127.0.0.1', port: Number(new URL(fleet[slug].servingUrl).port) });

/**
 * Puts a relay the test can cut or turn dark between Haru and one domain's supervisor, and seeds the fleet's
 * layout again with the relay's address: the worker then reaches that supervisor only through it.
 */
export async function relaySupervisor(fleet: SimFleet, slug: Slug): Promise<TcpRelay> {
  const relay = await supervisorRelay(fleet, slug);
  await seedRelayed(fleet, slug, { supervisorUrl: relay.url });
  return relay;
}

/**
 * Puts a relay between Haru and one domain's model (its layout servingUrl), and seeds the layout again with
 * the relay's address: the proxy, the promotion's probe and the worker's refusal check reach the model only
 * through it; the supervisor still reaches its own engine directly.
 */
export async function relayModel(fleet: SimFleet, slug: Slug): Promise<TcpRelay> {
  const relay = await modelRelay(fleet, slug);
  await seedRelayed(fleet, slug, { servingUrl: `${relay.url}/v1` });
  return relay;
}

/** Relays in front of a domain's supervisor and its model, turned dark or restored together. */
export interface RelayedHost {
  supervisor: TcpRelay;
  model: TcpRelay;
  /** Both ports drop packets (a region gone dark, the whole host behind it). */
  goDark(): Promise<void>;
  restore(): Promise<void>;
  close(): Promise<void>;
}

/**
 * Relays both of a domain's ports Haru reaches (its supervisor and its model's servingUrl) and seeds the
 * layout once with both relays' addresses: the worker, the proxy and the promotion's probe reach that host
 * only through them; the supervisor still reaches its own engine directly.
 */
export async function relayHost(fleet: SimFleet, slug: Slug): Promise<RelayedHost> {
  const supervisor = await supervisorRelay(fleet, slug);
  const model = await modelRelay(fleet, slug);
  await seedRelayed(fleet, slug, { supervisorUrl: supervisor.url, servingUrl: `${model.url}/v1` });
  const both = async (fn: (relay: TcpRelay) => Promise<void>) => void (await Promise.all([supervisor, model].map(fn)));
  return {
    supervisor,
    model,
    goDark: () => both((r) => r.goDark()),
    restore: () => both((r) => r.restore()),
    close: () => both((r) => r.close()),
  };
}
