import { Gauge, type Registry } from 'prom-client';
import { DOMAIN_STATES } from '../schemas/enums';
import type { FleetSnapshot } from '../schemas/entities';
import type { Logger } from '../lib/logger';

/**
 * Fleet state as Prometheus series, read from the store at each scrape (every API replica reports the same
 * values: aggregate with `max by`). Labels: `fleet` is always the slug, `domain` the domain's slug.
 * - `haru_domain_state{fleet,domain,state}`: 1 for the domain's state, 0 for the others;
 * - `haru_active_domain{fleet,domain}`: 1 on the domain routing points at;
 * - `haru_fleet_ready_standbys{fleet}`: `ready` domains that are not the active;
 * - `haru_fleet_auto_failover_paused{fleet}`: 1 while the stored pause holds;
 * - `haru_fleet_operation_in_flight{fleet,kind}`: 1 while an operation of that kind is pending or running.
 * A store that does not answer leaves the series out of that scrape (and logs it): no stale values.
 */
export function registerFleetMetrics(registry: Registry, list: () => Promise<FleetSnapshot[]>, logger: Logger): void {
  let read: Promise<FleetSnapshot[]> | null = null;
  // One store read per scrape, shared by the gauges' collect callbacks.
  const fleets = () => {
    read ??= list()
      .catch((err: unknown) => {
        logger.warn('fleet metrics not read', { error: err instanceof Error ? err.message : String(err) });
        return [];
      })
      .finally(() => setImmediate(() => (read = null)));
    return read;
  };
  const gauge = (name: string, help: string, labelNames: string[], fill: (g: Gauge, all: FleetSnapshot[]) => void) =>
    new Gauge({
      name,
      help,
      labelNames,
      registers: [registry],
      async collect() {
        const all = await fleets();
        this.reset();
        fill(this, all);
      },
    });
  gauge('haru_domain_state', 'Domain state: 1 for the current one', ['fleet', 'domain', 'state'], (g, all) => {
    for (const f of all)
      for (const d of f.domains)
        for (const state of DOMAIN_STATES) g.set({ fleet: f.slug, domain: d.slug, state }, d.state === state ? 1 : 0);
  });
  gauge('haru_active_domain', 'The domain the routing pointer names (1)', ['fleet', 'domain'], (g, all) => {
    for (const f of all)
      for (const d of f.domains) g.set({ fleet: f.slug, domain: d.slug }, d.id === f.activeDomainId ? 1 : 0);
  });
  gauge('haru_fleet_ready_standbys', 'Ready domains other than the active', ['fleet'], (g, all) => {
    for (const f of all)
      g.set({ fleet: f.slug }, f.domains.filter((d) => d.state === 'ready' && d.id !== f.activeDomainId).length);
  });
  gauge('haru_fleet_auto_failover_paused', 'Automatic failover paused (1) or not (0)', ['fleet'], (g, all) => {
    for (const f of all) g.set({ fleet: f.slug }, f.autoFailoverPause ? 1 : 0);
  });
  gauge(
    'haru_fleet_operation_in_flight',
    'An operation of this kind pending or running (1)',
    ['fleet', 'kind'],
    (g, all) => {
      for (const f of all)
        for (const kind of ['promote', 'demote'] as const)
          g.set({ fleet: f.slug, kind }, f.inFlightOperation?.kind === kind ? 1 : 0);
    },
  );
}
