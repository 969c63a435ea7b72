import { storedHealth } from '../../core/monitor-look';
import type { ReconcileResponse } from '../../schemas/api-responses';
import type { FleetSnapshot } from '../../schemas/entities';
import { type RouteContext } from './context';

const POLL_MS = 100;
// Domains the monitor does not poll: waiting for them would never end.
const UNPOLLED = new Set(['provisioning', 'stopping', 'stopped']);

/** True when every polled domain of `after` shows a poll after `since` (a success or one more failure). */
function polledSince(before: FleetSnapshot, after: FleetSnapshot, since: number): boolean {
  return after.domains.every((d) => {
    if (UNPOLLED.has(d.state)) return true;
    const prior = before.domains.find((p) => p.id === d.id);
    const seen = d.lastSeenAt !== null && Date.parse(d.lastSeenAt) >= since;
    return seen || d.consecutiveFailures > (prior?.consecutiveFailures ?? 0) || d.state !== prior?.state;
  });
}

/**
 * Signals `checkNow` to the fleet's monitor (503 `orchestrator_unavailable` when Temporal is down), then
 * waits up to `reconcileWaitMs` (3 s) for the store to show a poll of every domain newer than the signal,
 * and answers with that health and the monitor's own `health` query.
 */
export async function reconcile(ctx: RouteContext, fleet: FleetSnapshot): Promise<ReconcileResponse> {
  const signalledAt = ctx.now();
  await ctx.orchestrator.checkNow(fleet.id, fleet.slug);
  const deadline = signalledAt.getTime() + ctx.config.reconcileWaitMs;
  let latest = fleet;
  let fresh = polledSince(fleet, latest, signalledAt.getTime());
  while (!fresh && ctx.now().getTime() < deadline) {
    await new Promise((r) => setTimeout(r, POLL_MS));
    latest = (await ctx.store.fleets.snapshot(fleet.id)) ?? latest;
    fresh = polledSince(fleet, latest, signalledAt.getTime());
  }
  const monitor = await ctx.orchestrator.monitorHealth(fleet.id);
  return {
    fleetId: fleet.id,
    signalledAt: signalledAt.toISOString(),
    fresh,
    domains: latest.domains.map(storedHealth),
    monitor,
  };
}
