import { eq, sql } from 'drizzle-orm';
import { watchWorkers } from '../schema';
import { rowsOf, type RepoDeps } from './support';

/** Another live worker holding watch shards, as its last beat left it. */
export interface WatchWorkerPeer {
  held: number;
  /** The task queue only it polls. */
  ownQueue: string;
}

/** How long a worker's row outlives its last beat before the next beat sweeps it. */
const SWEEP_AFTER = sql`interval '1 hour'`;

export type WatchWorkerRepo = ReturnType<typeof createWatchWorkerRepo>;

/** The workers that hold watch shards (`watch_workers`): what each holds, by the database's clock. */
export function createWatchWorkerRepo({ db }: RepoDeps) {
  return {
    /**
     * Records that worker `id` (polling `ownQueue` alone) is alive and holds `held` of `shards` shards on
     * `taskQueue`, and answers what every other worker of the same queue and shard count that beat within
     * `liveWithinMs` holds, by their own queues: one statement, which also sweeps rows an hour old.
     */
    async beat(input: {
      id: string;
      taskQueue: string;
      ownQueue: string;
      shards: number;
      held: number;
      liveWithinMs: number;
    }): Promise<WatchWorkerPeer[]> {
      const result = await db.execute(sql`
        with beat as (
          insert into watch_workers (id, task_queue, own_queue, shards, held, seen_at)
          values (${input.id}, ${input.taskQueue}, ${input.ownQueue}, ${input.shards}, ${input.held},
            statement_timestamp())
          on conflict (id) do update set task_queue = excluded.task_queue, own_queue = excluded.own_queue,
            shards = excluded.shards, held = excluded.held, seen_at = excluded.seen_at
          returning id
        ), swept as (
          delete from watch_workers where seen_at < statement_timestamp() - ${SWEEP_AFTER}
        )
        select held, own_queue from watch_workers
        where task_queue = ${input.taskQueue} and shards = ${input.shards} and id <> ${input.id}
          and seen_at > statement_timestamp() - make_interval(secs => ${input.liveWithinMs / 1000})
        order by own_queue
      `);
      return rowsOf<{ held: number; own_queue: string }>(result).map((r) => ({
        held: Number(r.held),
        ownQueue: r.own_queue,
      }));
    },

    /** Removes worker `id`'s row (it stopped): the others need not wait for it to age. */
    async leave(id: string): Promise<void> {
      await db.delete(watchWorkers).where(eq(watchWorkers.id, id));
    },
  };
}
