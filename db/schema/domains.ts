import { type AnyPgColumn, integer, jsonb, pgTable, text, timestamp, unique, uuid } from 'drizzle-orm/pg-core';
import type { LaunchSpec, Placement, SupervisorAccess } from '../../schemas/layout';
import { domainStateEnum, providerEnum } from './enums';
import { fleets } from './fleets';

/** One failure domain of a fleet: where its machines are and how its supervisor is reached. */
export const domains = pgTable(
  'domains',
  {
    id: uuid('id').primaryKey().defaultRandom(),
    fleetId: uuid('fleet_id')
      .notNull()
      .references((): AnyPgColumn => fleets.id, { onDelete: 'cascade' }),
    slug: text('slug').notNull(),
    displayName: text('display_name').notNull(),
    provider: providerEnum('provider').notNull(),
    placement: jsonb('placement').$type<Placement>().notNull(),
    supervisorUrl: text('supervisor_url').notNull(),
    /** The layout's `supervisor` block: CA file, token source, plain-HTTP opt-in (names only, no secret). */
    supervisor: jsonb('supervisor').$type<SupervisorAccess>(),
    servingBaseUrl: text('serving_base_url'),
    launch: jsonb('launch').$type<LaunchSpec>(),
    state: domainStateEnum('state').notNull().default('provisioning'),
    stateChangedAt: timestamp('state_changed_at', { withTimezone: true }).notNull().defaultNow(),
    lastSeenAt: timestamp('last_seen_at', { withTimezone: true }),
    consecutiveFailures: integer('consecutive_failures').notNull().default(0),
    lastError: text('last_error'),
    createdAt: timestamp('created_at', { withTimezone: true }).notNull().defaultNow(),
    updatedAt: timestamp('updated_at', { withTimezone: true }).notNull().defaultNow(),
  },
  (t) => [
    unique('domains_fleet_slug_unique').on(t.fleetId, t.slug),
    // Target of the fleets' composite routing-pointer key.
    unique('domains_fleet_id_id_unique').on(t.fleetId, t.id),
  ],
);
export type DomainRow = typeof domains.$inferSelect;
