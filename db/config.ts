import path from 'node:path';
import { z } from 'zod';
import { blankable } from '../schemas/env';
import { postgresTlsEnvShape, type PostgresTlsEnv } from './postgres-tls';

/**
 * Where the state store lives, from the environment: `DATABASE_URL` (postgres:// or postgresql://) for a
 * server; unset or blank for the embedded PGlite database in `$HARU_STATE_DIR/pgdata` (default `.haru`).
 */
export const dbEnvSchema = z.object({
  DATABASE_URL: blankable(
    z
      .string()
      .trim()
      .regex(
        /^postgres(?:ql)?:\/\/\S+$/,
        'must be a postgres:// or postgresql:// URL (leave it unset for the embedded database)',
      )
      .optional(),
  ),
  HARU_STATE_DIR: blankable(z.string().default('.haru')),
  /** libpq's PGSSLROOTCERT, PGSSLCERT, PGSSLKEY for a DATABASE_URL with sslmode. */
  ...postgresTlsEnvShape,
});
export type DbEnv = z.infer<typeof dbEnvSchema>;

/** The resolved database options for createDatabase. */
export interface DbConfig {
  databaseUrl?: string;
  dataDir: string;
  tlsEnv: PostgresTlsEnv;
}

/** DbConfig from parsed env; `cwd` anchors a relative HARU_STATE_DIR. */
export const dbConfigFromEnv = (env: DbEnv, cwd: string): DbConfig => ({
  ...(env.DATABASE_URL ? { databaseUrl: env.DATABASE_URL } : {}),
  dataDir: path.resolve(cwd, env.HARU_STATE_DIR, 'pgdata'),
  tlsEnv: { PGSSLROOTCERT: env.PGSSLROOTCERT, PGSSLCERT: env.PGSSLCERT, PGSSLKEY: env.PGSSLKEY },
});

/** Where the store is, for messages: the URL without its password, or the data directory. */
export function describeDatabase(config: DbConfig): string {
  if (!config.databaseUrl) return `embedded database in ${config.dataDir}`;
  try {
    const url = new URL(config.databaseUrl);
    if (url.password) url.password = '***';
    return url.toString();
  } catch {
    return 'DATABASE_URL';
  }
}
