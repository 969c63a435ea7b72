import { and, eq, inArray, or, sql } from 'drizzle-orm';
import type { Slot } from '../../schemas/entities';
import type { WakeFingerprints } from '../../schemas/fingerprint';
import { INFERENCE_SLOT_STATES, type SlotState, TRAINING_SLOT_STATES } from '../../schemas/enums';
import {
  INFERENCE_SLOT_TRANSITIONS,
  InvalidTransitionError,
  predecessorsOf,
  TRAINING_SLOT_TRANSITIONS,
  type TransitionTable,
} from '../../schemas/transitions';
import { slots } from '../schema';
import { toSlot } from './mappers';
import { isUuid, type RepoDeps } from './support';

export type SlotRepo = ReturnType<typeof createSlotRepo>;

const predecessors = (table: TransitionTable<string>, states: readonly string[], to: SlotState): SlotState[] =>
  (states.includes(to) ? predecessorsOf(table, to) : []) as SlotState[];

/**
 * The allowed predecessors of `to` for each slot kind, narrowed to `from` when given. Throws
 * InvalidTransitionError when no edge leads to `to`, or when a state in `from` has no edge to it.
 */
export function slotPredecessors(to: SlotState, from?: readonly SlotState[]) {
  let inference = predecessors(INFERENCE_SLOT_TRANSITIONS, INFERENCE_SLOT_STATES, to);
  let training = predecessors(TRAINING_SLOT_TRANSITIONS, TRAINING_SLOT_STATES, to);
  if (from) {
    for (const state of from) {
      if (!inference.includes(state) && !training.includes(state)) throw new InvalidTransitionError('slot', state, to);
    }
    inference = inference.filter((s) => from.includes(s));
    training = training.filter((s) => from.includes(s));
  }
  if (inference.length + training.length === 0) throw new InvalidTransitionError('slot', '*', to);
  return { inference, training };
}

/** Slots: reads and guarded state transitions (inference and training tables, by the row's kind). */
export function createSlotRepo({ db, now }: RepoDeps) {
  return {
    /** The slot with this id, or null. */
    async get(id: string): Promise<Slot | null> {
      if (!isUuid(id)) return null;
      const [row] = await db.select().from(slots).where(eq(slots.id, id));
      return row ? toSlot(row) : null;
    },

    /** The slots of a domain, by GPU index then kind (inference first). */
    async listByDomain(domainId: string): Promise<Slot[]> {
      if (!isUuid(domainId)) return [];
      const rows = await db
        .select()
        .from(slots)
        .where(eq(slots.domainId, domainId))
        .orderBy(slots.gpuIndex, slots.kind);
      return rows.map(toSlot);
    },

    /**
     * Replaces an inference slot's wake fingerprints (`{}` clears them). Idempotent; returns false when no
     * inference slot has this id.
     */
    async setWakeFingerprints(slotId: string, fingerprints: WakeFingerprints): Promise<boolean> {
      if (!isUuid(slotId)) return false;
      const rows = await db
        .update(slots)
        .set({ wakeFingerprints: fingerprints, updatedAt: now() })
        .where(and(eq(slots.id, slotId), eq(slots.kind, 'inference')))
        .returning({ id: slots.id });
      return rows.length > 0;
    },

    /**
     * Moves the slot to `to` with one guarded UPDATE: the row's state must be a predecessor of `to` in
     * the table of its kind (and in `from`, when given). Returns the slot, or null when the row does not
     * exist or is in another state. Throws InvalidTransitionError before any SQL for an impossible edge.
     */
    async transition(slotId: string, to: SlotState, from?: readonly SlotState[]): Promise<Slot | null> {
      const { inference, training } = slotPredecessors(to, from);
      if (!isUuid(slotId)) return null;
      const byKind = [
        inference.length ? and(eq(slots.kind, 'inference'), inArray(slots.state, inference)) : undefined,
        training.length ? and(eq(slots.kind, 'training'), inArray(slots.state, training)) : undefined,
      ].filter((c) => c !== undefined);
      const at = now();
      const [row] = await db
        .update(slots)
        .set({ state: to, stateChangedAt: at, updatedAt: at })
        .where(and(eq(slots.id, slotId), or(...byKind) ?? sql`false`))
        .returning();
      return row ? toSlot(row) : null;
    },
  };
}
