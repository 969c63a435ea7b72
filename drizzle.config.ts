import { defineConfig } from 'drizzle-kit';

/** `npm run db:generate` writes a migration for every schema change into db/migrations (commit it). */
export default defineConfig({
  dialect: 'postgresql',
  schema: './db/schema/index.ts',
  out: './db/migrations',
  strict: true,
  verbose: true,
});
