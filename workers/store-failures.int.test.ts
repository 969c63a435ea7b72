import { ApplicationFailure } from '@temporalio/common';
import { MockActivityEnvironment } from '@temporalio/testing';
import { sql } from 'drizzle-orm';
import { createTestDatabase, type TestDatabase } from '../db/testing';
import { FailureType } from '../schemas/failures';
import { storeFailureInterceptor } from './store-failures';

let db: TestDatabase;
beforeAll(async () => {
  db = await createTestDatabase();
});
afterAll(() => db?.drop());

/** An activity whose statement fails on the real database (a missing table). */
const failingActivity = () =>
  db.database.db.execute(sql`select secret_column from haru_no_such_table where id = ${42}`);

it('turns a failed statement into a readable StateStoreError: the database message and SQLSTATE, no SQL', async () => {
  const logged: { message: string; meta?: Record<string, unknown> }[] = [];
  const logger = {
    log: () => undefined,
    trace: () => undefined,
    debug: () => undefined,
    info: () => undefined,
    warn: (message: string, meta?: Record<string, unknown>) => logged.push({ message, meta }),
    error: () => undefined,
  };
  const env = new MockActivityEnvironment({}, { interceptors: [storeFailureInterceptor], logger });
  const err = await env.run(failingActivity).then(
    () => null,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(ApplicationFailure);
  expect(err).toMatchObject({
    type: FailureType.StateStoreError,
    nonRetryable: false,
    message: 'state store: relation "haru_no_such_table" does not exist (SQLSTATE 42P01)',
  });
  // The statement goes to the worker log only.
  expect(logged.map((l) => l.meta?.query)).toEqual([expect.stringContaining('haru_no_such_table')]);
});

it('leaves every other error as it was', async () => {
  const env = new MockActivityEnvironment({}, { interceptors: [storeFailureInterceptor] });
  await expect(
    env.run(async () => {
      throw new Error('supervisor said no');
    }),
  ).rejects.toThrow('supervisor said no');
});
