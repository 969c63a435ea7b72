/**
 * Whether a succeeded promotion also put the old active on standby. The promotion succeeds once routing moved;
 * its last step, the old active's demotion, is best effort: when it failed, the promotion's operation row keeps
 * that failure as its `error` (workflows/promotion.ts), so the row alone says whether the old active still holds
 * its GPUs.
 */
import type { Operation } from '../schemas/entities';
import { BEST_EFFORT_STEP } from './format';

/** What became of the old active of a succeeded promotion that ran its demotion step. */
export type DemotionOutcome = { status: 'demoted' } | { status: 'failed'; error: string };

/** A succeeded promotion that ran its demotion step (a skipped one never reached it: no old active). */
export const ranDemotion = (op: Operation): boolean =>
  op.kind === 'promote' && op.state === 'succeeded' && op.step === BEST_EFFORT_STEP;

/** The demotion outcome of `op`, or null for anything but a succeeded promotion that ran its demotion. Pure. */
export function demotionOutcome(op: Operation): DemotionOutcome | null {
  if (!ranDemotion(op)) return null;
  return op.error
    ? { status: 'failed', error: `${op.error.step}: ${op.error.code}: ${op.error.message}` }
    : { status: 'demoted' };
}

/** The STATE cell: `succeeded (not demoted)` when the old active was left as it was. */
export const stateCell = (op: Operation): string =>
  demotionOutcome(op)?.status === 'failed' ? `${op.state} (not demoted)` : op.state;
