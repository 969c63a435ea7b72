import postgres from 'postgres';
import { testAdminUrl } from '../../../db/testing';

/** A database on the machine's PostgreSQL that refuses every connection until the outage ends. */
export interface DatabaseOutage {
  /** Refuses new connections (`ALLOW_CONNECTIONS false`) and terminates the open ones. */
  begin(): Promise<void>;
  /** Accepts connections again. Harmless when no outage is on. */
  end(): Promise<void>;
  /** Ends the outage and closes the admin connection. */
  close(): Promise<void>;
}

/**
 * An outage of the database `databaseUrl` names, driven from the server's admin database: the server
 * stays up (other databases keep serving) while every client of this one is cut off and refused, as a
 * store that went away for everyone using it.
 */
export function databaseOutage(databaseUrl: string, adminUrl = testAdminUrl()): DatabaseOutage {
  const name = decodeURIComponent(new URL(databaseUrl).pathname.slice(1));
  const admin = postgres(adminUrl, { max: 1, onnotice: () => {} });
  const end = async () => {
    await admin.unsafe(`alter database "${name.replaceAll('"', '""')}" allow_connections true`);
  };
  return {
    async begin() {
      await admin.unsafe(`alter database "${name.replaceAll('"', '""')}" allow_connections false`);
      await admin`select pg_terminate_backend(pid) from pg_stat_activity where datname = ${name} and pid <> pg_backend_pid()`;
    },
    end,
    async close() {
      await end();
      await admin.end({ timeout: 5 });
    },
  };
}
