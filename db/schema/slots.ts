import { sql } from 'drizzle-orm';
import { check, integer, jsonb, pgTable, text, timestamp, unique, uuid } from 'drizzle-orm/pg-core';
import { INFERENCE_SLOT_STATES, TRAINING_SLOT_STATES } from '../../schemas/enums';
import type { WakeFingerprints } from '../../schemas/fingerprint';
import type { ModelBinding } from '../../schemas/layout';
import { slotKindEnum, slotStateEnum } from './enums';
import { domains } from './domains';

const quoted = (values: readonly string[]) => sql.raw(values.map((v) => `'${v}'`).join(', '));

/**
 * One workload on one GPU. Inference slots carry `sleep_level` and `models`; training slots carry
 * `command`, `checkpoint_dir` and `env`. At most one slot of each kind per GPU of a domain.
 */
export const slots = pgTable(
  'slots',
  {
    id: uuid('id').primaryKey().defaultRandom(),
    domainId: uuid('domain_id')
      .notNull()
      .references(() => domains.id, { onDelete: 'cascade' }),
    kind: slotKindEnum('kind').notNull(),
    gpuIndex: integer('gpu_index').notNull(),
    state: slotStateEnum('state').notNull(),
    stateChangedAt: timestamp('state_changed_at', { withTimezone: true }).notNull().defaultNow(),
    sleepLevel: integer('sleep_level'),
    models: jsonb('models').$type<ModelBinding[]>(),
    command: jsonb('command').$type<string[]>(),
    checkpointDir: text('checkpoint_dir'),
    env: jsonb('env').$type<Record<string, string>>(),
    /** Inference slots: each model's answer and its score, taken before the last demotion slept it (§4.4). */
    wakeFingerprints: jsonb('wake_fingerprints').$type<WakeFingerprints>(),
    createdAt: timestamp('created_at', { withTimezone: true }).notNull().defaultNow(),
    updatedAt: timestamp('updated_at', { withTimezone: true }).notNull().defaultNow(),
  },
  (t) => [
    unique('slots_domain_gpu_kind_unique').on(t.domainId, t.gpuIndex, t.kind),
    check(
      'slots_state_matches_kind',
      sql`(${t.kind} = 'inference' and ${t.state} in (${quoted(INFERENCE_SLOT_STATES)}) and ${t.sleepLevel} is not null and ${t.models} is not null)
        or (${t.kind} = 'training' and ${t.state} in (${quoted(TRAINING_SLOT_STATES)}) and ${t.command} is not null and ${t.checkpointDir} is not null)`,
    ),
  ],
);
export type SlotRow = typeof slots.$inferSelect;
