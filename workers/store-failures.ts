import { ApplicationFailure } from '@temporalio/common';
import type { ActivityInterceptorsFactory } from '@temporalio/worker';
import { DrizzleQueryError } from 'drizzle-orm';
import { FailureType } from '../schemas/failures';

/** The failed statement in `err` or its causes, or null when no statement failed. */
function failedStatement(err: unknown): DrizzleQueryError | null {
  for (let e: unknown = err, depth = 0; e instanceof Error && depth < 8; e = e.cause, depth++) {
    if (e instanceof DrizzleQueryError) return e;
  }
  return null;
}

/**
 * What an operator reads when a statement failed: the database's own message and its SQLSTATE (or the
 * driver's error code), never the statement text, which drizzle puts in its message. Retryable, as the error
 * it replaces was. Null when `err` is not a failed statement.
 */
export function readableStoreFailure(err: unknown): ApplicationFailure | null {
  const statement = failedStatement(err);
  if (!statement) return null;
  const cause = statement.cause as { code?: unknown; message?: unknown } | undefined;
  const reason = typeof cause?.message === 'string' && cause.message ? cause.message : 'statement failed';
  const code = typeof cause?.code === 'string' ? cause.code : null;
  const label = code ? (/^[0-9A-Z]{5}$/.test(code) ? ` (SQLSTATE ${code})` : ` (${code})`) : '';
  return ApplicationFailure.create({ type: FailureType.StateStoreError, message: `state store: ${reason}${label}` });
}

/**
 * Replaces a failed statement escaping any activity with its readable failure (the one operation rows,
 * `progress` and `haru fleet watch` show), and logs the statement for whoever debugs it.
 */
export const storeFailureInterceptor: ActivityInterceptorsFactory = (ctx) => ({
  inbound: {
    async execute(input, next) {
      try {
        return await next(input);
      } catch (err) {
        const readable = readableStoreFailure(err);
        if (!readable) throw err;
        ctx.log.warn('state store statement failed', {
          activity: ctx.info.activityType,
          query: failedStatement(err)?.query,
          error: readable.message,
        });
        throw readable;
      }
    },
  },
});
