import { createPgliteTestDatabase, createTestDatabase } from './testing';

/** The watch workers' registry (`store.watchWorkers`), on both backends: what a worker's beat learns of the others. */
const backends: [string, () => Promise<Pick<Awaited<ReturnType<typeof createTestDatabase>>, 'store' | 'drop'>>][] = [
  ['postgres', () => createTestDatabase()],
  ['pglite', () => createPgliteTestDatabase()],
];

describe.each(backends)('watch workers on %s', (_backend, open) => {
  let t: Awaited<ReturnType<typeof open>> | undefined;
  beforeAll(async () => {
    t = await open();
  });
  afterAll(() => t?.drop());

  const beat = (id: string, held: number, over: { taskQueue?: string; shards?: number; liveWithinMs?: number } = {}) =>
    t!.store.watchWorkers.beat({
      id,
      held,
      ownQueue: `q/${id}`,
      taskQueue: over.taskQueue ?? 'q',
      shards: over.shards ?? 8,
      liveWithinMs: over.liveWithinMs ?? 10_000,
    });

  it('answers what the other live workers of the same queue and shard count hold, updated at each beat', async () => {
    expect(await beat('a', 8)).toEqual([]);
    expect(await beat('b', 0)).toEqual([{ held: 8, ownQueue: 'q/a' }]);
    await beat('other-queue', 1, { taskQueue: 'elsewhere' });
    await beat('other-count', 1, { shards: 4 });
    expect(await beat('a', 7)).toEqual([{ held: 0, ownQueue: 'q/b' }]);
    expect(await beat('b', 1)).toEqual([{ held: 7, ownQueue: 'q/a' }]);
  });

  it('leaves out a worker whose last beat is older than the live window, and one that left', async () => {
    await beat('c', 2);
    await new Promise((r) => setTimeout(r, 50));
    expect(await beat('a', 7, { liveWithinMs: 20 })).toEqual([]); // b and c beat more than 20 ms ago
    await t!.store.watchWorkers.leave('b');
    expect(await beat('a', 7)).toEqual([{ held: 2, ownQueue: 'q/c' }]);
  });
});
