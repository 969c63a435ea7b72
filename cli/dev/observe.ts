import { type FleetSnapshot, fleetSnapshotSchema } from '../../schemas/entities';
import type { ApiClient } from '../api-client';
import { waitFor } from './wait';

/**
 * True once the monitor has polled every domain since `since`, no operation is in flight, and the active
 * domain is serving (or auto-failover is off, so nothing will replace a failed one): what the banner shows
 * then is what the monitor sees, not what an earlier run left in the store.
 */
export function isSettled(snapshot: FleetSnapshot, since: Date): boolean {
  const seen = snapshot.domains.every((d) => d.lastSeenAt && new Date(d.lastSeenAt) >= since);
  const active = snapshot.domains.find((d) => d.id === snapshot.activeDomainId);
  const serving = active?.state === 'ready' || active?.state === 'degraded';
  return seen && !snapshot.inFlightOperation && (serving || !snapshot.policy.autoFailover);
}

/** Waits (up to `timeoutMs`) for the fleet to settle; returns the last snapshot either way, with whether it settled. */
export async function waitForFleetSettled(
  api: ApiClient,
  fleet: string,
  since: Date,
  timeoutMs: number,
): Promise<{ snapshot: FleetSnapshot; settled: boolean }> {
  const read = () => api.get(`/v1/fleets/${encodeURIComponent(fleet)}`, fleetSnapshotSchema);
  try {
    return await waitFor(
      `fleet ${fleet} to settle`,
      async () => {
        const snapshot = await read();
        return isSettled(snapshot, since) ? { snapshot, settled: true } : undefined;
      },
      { timeoutMs, intervalMs: 250 },
    );
  } catch {
    return { snapshot: await read(), settled: false };
  }
}
