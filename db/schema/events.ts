import { sql } from 'drizzle-orm';
import { bigserial, index, jsonb, pgTable, text, timestamp, uuid } from 'drizzle-orm/pg-core';
import { domains } from './domains';
import { fleets } from './fleets';
import { operations } from './operations';

/** The append-only audit log. `id` is the cursor clients page and follow with. */
export const events = pgTable(
  'events',
  {
    id: bigserial('id', { mode: 'number' }).primaryKey(),
    fleetId: uuid('fleet_id')
      .notNull()
      .references(() => fleets.id, { onDelete: 'cascade' }),
    operationId: uuid('operation_id').references(() => operations.id, { onDelete: 'set null' }),
    domainId: uuid('domain_id').references(() => domains.id, { onDelete: 'set null' }),
    type: text('type').notNull(),
    message: text('message').notNull(),
    data: jsonb('data')
      .$type<Record<string, unknown>>()
      .notNull()
      .default(sql`'{}'::jsonb`),
    createdAt: timestamp('created_at', { withTimezone: true }).notNull().defaultNow(),
  },
  (t) => [index('events_fleet_id_idx').on(t.fleetId, t.id)],
);
export type EventRow = typeof events.$inferSelect;
