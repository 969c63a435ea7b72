import { sql } from 'drizzle-orm';
import { bigint, boolean, index, jsonb, pgTable, text, timestamp, uniqueIndex, uuid } from 'drizzle-orm/pg-core';
import { IN_FLIGHT_OPERATION_STATES } from '../../schemas/enums';
import type { OperationError } from '../../schemas/entities';
import { operationKindEnum, operationStateEnum } from './enums';
import { fleets } from './fleets';

/**
 * One promote or demote. `target_domain_id` / `from_domain_id` carry no foreign key on purpose: history
 * outlives a domain pruned from the layout. The insert checks the target belongs to the fleet instead.
 */
export const operations = pgTable(
  'operations',
  {
    id: uuid('id').primaryKey().defaultRandom(),
    fleetId: uuid('fleet_id')
      .notNull()
      .references(() => fleets.id, { onDelete: 'cascade' }),
    kind: operationKindEnum('kind').notNull(),
    targetDomainId: uuid('target_domain_id').notNull(),
    fromDomainId: uuid('from_domain_id'),
    state: operationStateEnum('state').notNull().default('pending'),
    step: text('step'),
    reason: text('reason').notNull(),
    requestedBy: text('requested_by').notNull(),
    workflowId: text('workflow_id').notNull().unique(),
    routingCommitted: boolean('routing_committed').notNull().default(false),
    routeRevision: bigint('route_revision', { mode: 'number' }),
    error: jsonb('error').$type<OperationError>(),
    createdAt: timestamp('created_at', { withTimezone: true }).notNull().defaultNow(),
    startedAt: timestamp('started_at', { withTimezone: true }),
    finishedAt: timestamp('finished_at', { withTimezone: true }),
    updatedAt: timestamp('updated_at', { withTimezone: true }).notNull().defaultNow(),
  },
  (t) => [
    // One in-flight operation per fleet, whoever asks: the insert's ON CONFLICT decides.
    uniqueIndex('operations_one_in_flight_per_fleet')
      .on(t.fleetId)
      .where(sql.raw(`state in (${IN_FLIGHT_OPERATION_STATES.map((s) => `'${s}'`).join(', ')})`)),
    index('operations_fleet_created_idx').on(t.fleetId, t.createdAt),
  ],
);
export type OperationRow = typeof operations.$inferSelect;
