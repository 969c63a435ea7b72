/**
 * Whether a succeeded promotion also put the old active on standby. The promotion succeeds once routing moved;
 * its last step, the old active's demotion, is best effort, so a succeeded operation row alone does not say
 * whether the old active still holds its GPUs. The fleet's events do: the workflow records each step's outcome
 * as an `operation.step` event. The live progress of one operation answers where the events read no longer
 * reach back to it.
 */
import { z } from 'zod';
import { eventListResponseSchema, operationDetailSchema } from '../schemas/api';
import type { HaruEvent, Operation } from '../schemas/entities';
import type { ApiClient } from './api-client';
import { BEST_EFFORT_STEP } from './format';

/** What became of the old active: demoted, left as it was (with why), or not known to this client. */
export type DemotionOutcome = { status: 'demoted' } | { status: 'failed'; error: string } | { status: 'unknown' };

/** The most events one read takes (the API's limit). */
const EVENT_WINDOW = 1_000;

const failedDemotionSchema = z.object({ step: z.literal(BEST_EFFORT_STEP), status: z.literal('failed') });

/** A succeeded promotion that ran its demotion step (a skipped one never reached it: no old active). */
export const ranDemotion = (op: Operation): boolean =>
  op.kind === 'promote' && op.state === 'succeeded' && op.step === BEST_EFFORT_STEP;

/** `demoteOldActive: SupervisorUnreachable: old active unreachable …` from the step's failure event. */
function errorOf(event: HaruEvent): string {
  const code = typeof event.data.code === 'string' ? `${event.data.code}: ` : '';
  return `${BEST_EFFORT_STEP}: ${code}${event.message.replace(`${BEST_EFFORT_STEP} failed: `, '')}`;
}

/**
 * The demotion outcome of each succeeded promotion in `operations` that ran its demotion step, by operation
 * id. One read of the fleet's newest events, plus one operation read for each promotion older than they reach.
 */
export async function demotionOutcomes(
  api: ApiClient,
  fleetPath: string,
  operations: readonly Operation[],
): Promise<Map<string, DemotionOutcome>> {
  const promotions = operations.filter(ranDemotion);
  const outcomes = new Map<string, DemotionOutcome>();
  if (promotions.length === 0) return outcomes;
  const { events } = await api.get(`${fleetPath}/events?order=desc&limit=${EVENT_WINDOW}`, eventListResponseSchema);
  const failed = new Map<string, HaruEvent>();
  for (const e of events) {
    if (e.type === 'operation.step' && e.operationId && failedDemotionSchema.safeParse(e.data).success) {
      failed.set(e.operationId, e);
    }
  }
  // Every event is there when fewer than a window came back; else those from the oldest one on.
  const oldest = events.length < EVENT_WINDOW ? -Infinity : Date.parse(events.at(-1)!.createdAt);
  const beyond: Operation[] = [];
  for (const op of promotions) {
    const event = failed.get(op.id);
    if (event) outcomes.set(op.id, { status: 'failed', error: errorOf(event) });
    else if (Date.parse(op.createdAt) >= oldest) outcomes.set(op.id, { status: 'demoted' });
    else beyond.push(op);
  }
  await Promise.all(
    beyond.map(async (op) => {
      const detail = await api.get(`${fleetPath}/operations/${encodeURIComponent(op.id)}`, operationDetailSchema);
      const step = detail.progress?.steps.find((s) => s.step === BEST_EFFORT_STEP);
      outcomes.set(
        op.id,
        !step
          ? { status: 'unknown' }
          : step.status === 'failed'
            ? { status: 'failed', error: `${BEST_EFFORT_STEP}: ${step.lastError ?? 'no error recorded'}` }
            : { status: 'demoted' },
      );
    }),
  );
  return outcomes;
}

/** The STATE cell: `succeeded (not demoted)` when the old active was left as it was. */
export function stateCell(op: Operation, outcome: DemotionOutcome | undefined): string {
  if (outcome?.status === 'failed') return `${op.state} (not demoted)`;
  if (outcome?.status === 'unknown') return `${op.state} (demotion unknown)`;
  return op.state;
}
