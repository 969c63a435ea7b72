import type { Client } from '@temporalio/client';
import type { Store } from '../db/store';
import { monitorStart } from '../workflows/start-options';

/**
 * Starts the fleet's monitor (`haru/<fleetId>/monitor`) unless one runs (USE_EXISTING), so calling it
 * on every worker start and on fleet creation is harmless.
 */
export async function ensureMonitor(client: Client, fleetId: string, taskQueue: string): Promise<void> {
  const { workflowType, options } = monitorStart(fleetId);
  await client.workflow.start(workflowType, { ...options, taskQueue });
}

/** Ensures a monitor for every fleet in the store; returns the fleet ids. */
export async function ensureMonitors(client: Client, store: Store, taskQueue: string): Promise<string[]> {
  const fleets = await store.fleets.list();
  for (const fleet of fleets) await ensureMonitor(client, fleet.id, taskQueue);
  return fleets.map((f) => f.id);
}
