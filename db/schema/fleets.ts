import { sql } from 'drizzle-orm';
import {
  bigint,
  foreignKey,
  jsonb,
  type PgTableExtraConfigValue,
  pgTable,
  text,
  timestamp,
  uuid,
} from 'drizzle-orm/pg-core';
import type { FleetPolicy } from '../../schemas/policy';
import type { TrainerTemplate } from '../../schemas/trainer-template';
import type { AutoFailoverPause } from '../../schemas/entities';
import { domains } from './domains';

/**
 * One Active/Standby unit. `active_domain_id` is the routing pointer: it moves only in commitRouting
 * (db/repo/routing.ts), and `route_revision` increases by exactly one each time it does.
 */
export const fleets = pgTable(
  'fleets',
  {
    id: uuid('id').primaryKey().defaultRandom(),
    slug: text('slug').notNull().unique(),
    displayName: text('display_name').notNull(),
    activeDomainId: uuid('active_domain_id'),
    routeRevision: bigint('route_revision', { mode: 'number' }).notNull().default(0),
    /** The full policy with defaults filled in, as last applied from a layout. */
    policy: jsonb('policy').$type<FleetPolicy>().notNull(),
    /** Who paused automatic failover, why and when; null while it is not paused. */
    autoFailoverPause: jsonb('auto_failover_pause').$type<AutoFailoverPause>(),
    /** The trainer templates training jobs may name, as last applied from a layout (§3.6); [] when none. */
    trainingTemplates: jsonb('training_templates')
      .$type<TrainerTemplate[]>()
      .notNull()
      .default(sql`'[]'::jsonb`),
    createdAt: timestamp('created_at', { withTimezone: true }).notNull().defaultNow(),
    updatedAt: timestamp('updated_at', { withTimezone: true }).notNull().defaultNow(),
  },
  (t): PgTableExtraConfigValue[] => [
    // Composite key: the active domain must belong to this fleet. NULL pointer = not checked (MATCH SIMPLE).
    foreignKey({
      name: 'fleets_active_domain_fk',
      columns: [t.id, t.activeDomainId],
      foreignColumns: [domains.fleetId, domains.id],
    }).onDelete('restrict'),
  ],
);
export type FleetRow = typeof fleets.$inferSelect;
