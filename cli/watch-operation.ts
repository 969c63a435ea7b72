import { type z } from 'zod';
import { operationDetailSchema } from '../schemas/api';
import { fleetSnapshotSchema, type Operation } from '../schemas/entities';
import { ApiError, type ApiClient } from './api-client';
import { BEST_EFFORT_STEP, formatElapsed, progressChanges } from './format';

export interface WatchDeps {
  api: ApiClient;
  write: (line: string) => void;
  now: () => Date;
  /** Waits between polls; injectable so tests need not wait on wall time. */
  wait: (ms: number) => Promise<void>;
  pollIntervalMs?: number;
}

type OperationDetail = z.infer<typeof operationDetailSchema>;

/** The promotion step that moves routing. */
const COMMIT_STEP = 'commitRouting';

/**
 * `read()`, again after each poll interval while the API answers that its state store is unreachable: the
 * operation runs on in Temporal meanwhile, so the watch says so once and waits instead of exiting.
 */
async function readThroughStoreOutage<T>(deps: WatchDeps, read: () => Promise<T>): Promise<T> {
  let said = false;
  for (;;) {
    try {
      const value = await read();
      if (said) deps.write('state store reachable again');
      return value;
    } catch (err) {
      if (!(err instanceof ApiError) || err.code !== 'state_store_unavailable') throw err;
      if (!said) deps.write(`state store unreachable (${err.message}); the operation goes on, retrying`);
      said = true;
      await deps.wait(deps.pollIntervalMs ?? 250);
    }
  }
}

/** What an operator needs once it ended: from → to, how long routing took to move, the demotion's outcome. */
function summary(detail: OperationDetail, slug: (id: string | null) => string): string[] {
  const lines: string[] = [];
  const steps = new Map((detail.progress?.steps ?? []).map((s) => [s.step, s]));
  const commit = steps.get(COMMIT_STEP);
  const startedAt = detail.startedAt ?? detail.createdAt;
  if (commit?.status === 'succeeded' && commit.finishedAt) {
    lines.push(`routing committed ${formatElapsed(Date.parse(commit.finishedAt) - Date.parse(startedAt))} after start`);
  }
  const demotion = steps.get(BEST_EFFORT_STEP);
  if (detail.kind === 'promote' && demotion && demotion.status !== 'pending') {
    const outcome =
      demotion.status === 'failed'
        ? `failed${demotion.lastError ? `: ${demotion.lastError}` : ''} (the promotion does not depend on it)`
        : demotion.status;
    lines.push(`demotion of ${slug(detail.fromDomainId)} (best effort): ${outcome}`);
  }
  return lines;
}

/**
 * Follows one operation until it ends: from → to, each step as it changes with its elapsed time (the
 * old active's demotion marked best effort), then the time to the routing commit and the demotion's outcome.
 * Resolves with the final operation; the caller maps `succeeded` to exit 0 and anything else to 1.
 */
export async function watchOperation(deps: WatchDeps, fleet: string, operationId: string): Promise<Operation> {
  const started = deps.now();
  const fleetPath = `/v1/fleets/${encodeURIComponent(fleet)}`;
  const snapshot = await readThroughStoreOutage(deps, () => deps.api.get(fleetPath, fleetSnapshotSchema));
  const slugs = new Map(snapshot.domains.map((d) => [d.id, d.slug]));
  const slug = (id: string | null) => (id ? (slugs.get(id) ?? id) : 'none');
  let previous: OperationDetail['progress'] = null;
  let lastState = '';
  for (let first = true; ; first = false) {
    const detail = await readThroughStoreOutage(deps, () =>
      deps.api.get(`${fleetPath}/operations/${encodeURIComponent(operationId)}`, operationDetailSchema),
    );
    if (first) {
      const move =
        detail.kind === 'promote'
          ? `${slug(detail.fromDomainId)} → ${slug(detail.targetDomainId)}`
          : `${slug(detail.targetDomainId)} to standby`;
      deps.write(`${detail.kind} ${move} (${detail.id})`);
    }
    if (detail.state !== lastState) {
      deps.write(`${detail.kind} ${detail.id}: ${detail.state}`);
      lastState = detail.state;
    }
    if (detail.progress) {
      for (const line of progressChanges(previous, detail.progress, deps.now())) deps.write(line);
      previous = detail.progress;
    }
    if (detail.state === 'succeeded' || detail.state === 'failed' || detail.state === 'cancelled') {
      for (const line of summary(detail, slug)) deps.write(line);
      const took = formatElapsed(deps.now().getTime() - started.getTime());
      const why = detail.error ? ` at ${detail.error.step}: ${detail.error.code}: ${detail.error.message}` : '';
      // Routing moved, the old active did not go to standby: the last line says so, as `fleet operations` does.
      const demotion = detail.progress?.steps.find((s) => s.step === BEST_EFFORT_STEP);
      const notDemoted = detail.state === 'succeeded' && demotion?.status === 'failed' ? ' (not demoted)' : '';
      deps.write(`${detail.state}${notDemoted}${why} (watched ${took})`);
      return detail;
    }
    await deps.wait(deps.pollIntervalMs ?? 250);
  }
}
