/**
 * The environment variables of the project Haru grew from (its server, seed script and supervisor), and what
 * each is in Haru (docs/migration.md). A name Haru still reads with the same meaning keeps working as it is; a
 * name whose work moved elsewhere is refused at start by every process (`parseEnv`, schemas/env.ts), naming
 * what to use instead, so no setting is ignored in silence.
 */

/** The processes of the original project. */
export type LegacyProcess = 'server' | 'seed' | 'supervisor';
/** Haru's processes, as the env schemas are named (api/config.ts, workers/config.ts, db/config.ts, …). */
export type HaruProcess = 'api' | 'worker' | 'db' | 'supervisor';

export type LegacyVariable =
  | {
      name: string;
      readBy: readonly LegacyProcess[];
      /** Read under the same name with the same meaning, by these processes. */
      kept: readonly HaruProcess[];
      /** What differs around it (a default, where to set it); empty when nothing does. */
      note: string;
    }
  | {
      name: string;
      readBy: readonly LegacyProcess[];
      /** Refused at start with `NAME is not read: <replacement>`: what does its work in Haru. */
      replacement: string;
    };

export const LEGACY_ENV: readonly LegacyVariable[] = [
  {
    name: 'DATABASE_URL',
    readBy: ['server', 'seed'],
    kept: ['api', 'worker', 'db'],
    note: 'unset now means the embedded database in $HARU_STATE_DIR/pgdata (it was required)',
  },
  {
    name: 'PORT',
    readBy: ['server', 'supervisor'],
    kept: ['api', 'supervisor'],
    note: 'defaults 8700 and 8701 as before',
  },
  { name: 'HARU_API_TOKEN', readBy: ['server'], kept: ['api'], note: '' },
  {
    name: 'HARU_SUPERVISOR_TOKEN',
    readBy: ['server', 'supervisor'],
    kept: ['worker', 'api', 'supervisor'],
    note: "the worker calls the supervisors now: set it in the worker's environment too",
  },
  { name: 'HARU_DEFAULT_FLEET', readBy: ['server'], kept: ['api'], note: '' },
  {
    name: 'HARU_CHAT_HEADER_TIMEOUT_MS',
    readBy: ['server'],
    kept: ['api'],
    note: 'default 60000 (it was 30000)',
  },
  { name: 'HARU_SNAPSHOT_CACHE_TTL_MS', readBy: ['server'], kept: ['api'], note: '' },
  { name: 'HARU_CHAT_MAX_BODY_BYTES', readBy: ['server'], kept: ['api'], note: '' },
  {
    name: 'HARU_SUPERVISOR_CONFIG',
    readBy: ['supervisor'],
    kept: ['supervisor'],
    note: 'the file has a new shape: convert it with `haru layout convert`',
  },
  {
    name: 'HARU_RECONCILE_INTERVAL_MS',
    readBy: ['server'],
    replacement:
      "use policy.heartbeatIntervalMs in the fleet's layout (the worker's fleet monitor polls every fleet, always)",
  },
  {
    name: 'HARU_RECONCILE_FLEETS',
    readBy: ['server'],
    replacement:
      "use policy.autoFailover: false in a fleet's layout, or `haru fleet pause <fleet>`, to keep a fleet from " +
      'failing over (the worker watches every fleet in the state store)',
  },
  {
    name: 'HARU_FLEET_LAYOUT',
    readBy: ['seed'],
    replacement:
      'use `haru db seed --config <file>` (convert a layout of the original format first: `haru layout convert`)',
  },
];

/** Any other `HARU_RECONCILE_…` name: the original's reconcile loop has no counterpart to configure. */
const RECONCILE_PREFIX = 'HARU_RECONCILE_';
const RECONCILE_REPLACEMENT =
  "Haru has no reconcile loop to tune (the worker's fleet monitors do its work; POST /reconcile waits a fixed 3 s " +
  'for their fresh poll)';

const isSet = (value: string | undefined): boolean => value !== undefined && value.trim() !== '';

/**
 * One line per variable of `env` that Haru refuses (`NAME is not read: use …`), in name order; blank values count
 * as unset, as everywhere else.
 */
export function refusedLegacyVariables(env: Readonly<Record<string, string | undefined>>): string[] {
  const lines: string[] = [];
  for (const name of Object.keys(env).sort()) {
    if (!isSet(env[name])) continue;
    const known = LEGACY_ENV.find((v) => v.name === name);
    if (known && 'replacement' in known) lines.push(`${name} is not read: ${known.replacement}`);
    else if (!known && name.startsWith(RECONCILE_PREFIX)) lines.push(`${name} is not read: ${RECONCILE_REPLACEMENT}`);
  }
  return lines;
}
