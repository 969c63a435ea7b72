import { type z } from 'zod';
import { operationDetailSchema } from '../schemas/api';
import type { Operation } from '../schemas/entities';
import type { ApiClient } from './api-client';
import { formatElapsed, progressChanges } from './format';

export interface WatchDeps {
  api: ApiClient;
  write: (line: string) => void;
  now: () => Date;
  /** Waits between polls; injectable so tests need not wait on wall time. */
  wait: (ms: number) => Promise<void>;
  pollIntervalMs?: number;
}

/**
 * Follows one operation until it ends, printing each step as it changes with its elapsed time.
 * Resolves with the final operation; the caller maps `succeeded` to exit 0 and anything else to 1.
 */
export async function watchOperation(deps: WatchDeps, fleet: string, operationId: string): Promise<Operation> {
  const started = deps.now();
  let previous: z.infer<typeof operationDetailSchema>['progress'] = null;
  let lastState = '';
  for (;;) {
    const detail = await deps.api.get(
      `/v1/fleets/${encodeURIComponent(fleet)}/operations/${encodeURIComponent(operationId)}`,
      operationDetailSchema,
    );
    if (detail.state !== lastState) {
      deps.write(`${detail.kind} ${detail.id}: ${detail.state}`);
      lastState = detail.state;
    }
    if (detail.progress) {
      for (const line of progressChanges(previous, detail.progress, deps.now())) deps.write(line);
      previous = detail.progress;
    }
    if (detail.state === 'succeeded' || detail.state === 'failed' || detail.state === 'cancelled') {
      const took = formatElapsed(deps.now().getTime() - started.getTime());
      const why = detail.error ? ` at ${detail.error.step}: ${detail.error.code}: ${detail.error.message}` : '';
      deps.write(`${detail.state}${why} (watched ${took})`);
      return detail;
    }
    await deps.wait(deps.pollIntervalMs ?? 250);
  }
}
