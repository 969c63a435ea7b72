import { integer, pgTable, text, timestamp } from 'drizzle-orm/pg-core';

/**
 * The workers that hold watch shards, each row refreshed by its worker every few seconds
 * (`store.watchWorkers.beat`): how many shards it holds, so that a worker holding more than its share hands one
 * on while another live worker holds fewer (docs/architecture.md §4.5). A row not refreshed for a while is a
 * worker that is gone; rows an hour old are swept by the next beat. Times are the database's own clock, so
 * the workers' clocks need not agree.
 */
export const watchWorkers = pgTable('watch_workers', {
  /** The worker's identity for this run (host, pid and a random part). */
  id: text('id').primaryKey(),
  /** Its operations queue (HARU_TASK_QUEUE): workers of one deployment share it. */
  taskQueue: text('task_queue').notNull(),
  /** The task queue only this worker polls, where a shard handed on to it is sent (its watch's next attempt). */
  ownQueue: text('own_queue').notNull(),
  /** How many shards it deals the fleets over (HARU_MONITOR_SHARDS). */
  shards: integer('shards').notNull(),
  /** How many of them it holds now. */
  held: integer('held').notNull(),
  seenAt: timestamp('seen_at', { withTimezone: true }).notNull(),
});
