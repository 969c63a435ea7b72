import path from 'node:path';
import { z } from 'zod';
import { resolveTemporalSettings, type TemporalSettings, temporalEnvShape } from '../../temporal/config';
import { postgresTlsEnvShape } from '../../db/postgres-tls';
import { blankable, parseEnv, portSchema } from '../../schemas/env';

const port = (fallback: number) => blankable(portSchema.min(1).default(fallback));
const optionalString = blankable(z.string().trim().min(1).optional());

/**
 * The environment of `haru dev`, parsed once at start (a blank variable counts as unset). The API and the
 * worker inside the dev stack also read their own tuning variables (HARU_CHAT_HOLD_MS, …) from the same
 * environment (api/config.ts, workers/config.ts); only what the dev stack decides itself is listed here.
 */
export const devEnvSchema = z.object({
  /** Local state: embedded Postgres, Temporal's SQLite file, the generated layout, logs, checkpoints. */
  HARU_STATE_DIR: blankable(z.string().min(1).default('.haru')),
  /** The fleet layout to run (default examples/dev.layout.json). */
  HARU_DEV_LAYOUT: optionalString,
  /** Added to every supervisor and model port of the layout, so two dev stacks can run side by side. */
  HARU_SIM_PORT_OFFSET: blankable(z.coerce.number().int().min(-65_535).max(65_535).default(0)),
  /** A shared Postgres; unset means the embedded PGlite in $HARU_STATE_DIR/pgdata. */
  DATABASE_URL: blankable(
    z
      .string()
      .trim()
      .regex(/^postgres(?:ql)?:\/\/\S+$/, 'must be a postgres:// or postgresql:// URL (unset: embedded database)')
      .optional(),
  ),
  /** libpq's PGSSLROOTCERT, PGSSLCERT, PGSSLKEY for a DATABASE_URL with sslmode. */
  ...postgresTlsEnvShape,
  /**
   * The Temporal settings every Haru process reads (TEMPORAL_ADDRESS, TEMPORAL_PROFILE, …): with an address
   * (variable or profile) the stack uses that server; without one it starts the Temporal dev server.
   */
  ...temporalEnvShape,
  HARU_TASK_QUEUE: blankable(z.string().min(1).default('haru')),
  /** gRPC port of the Temporal dev server (ignored when TEMPORAL_ADDRESS or the profile names a server). */
  HARU_TEMPORAL_PORT: port(7233),
  /** Web UI port of the Temporal dev server (ignored when TEMPORAL_ADDRESS or the profile names a server). */
  HARU_TEMPORAL_UI_PORT: port(8233),
  /** Where the Temporal Web UI is, for the banner when TEMPORAL_ADDRESS points at your own server. */
  HARU_TEMPORAL_UI_URL: optionalString,
  /** The `temporal` CLI that runs the dev server (default: PATH, then `.haru/tools/bin/temporal`). */
  TEMPORAL_CLI: optionalString,
  /** The Haru API (control plane and OpenAI-compatible proxy). */
  PORT: port(8700),
  /** The worker's Prometheus endpoint; 0 picks a free port. */
  HARU_WORKER_METRICS_PORT: blankable(portSchema.default(9464)),
  /** The Temporal SDK runtime's own Prometheus endpoint (`temporal_*`), as `haru worker` serves it; 0 turns it off. */
  HARU_WORKER_SDK_METRICS_PORT: blankable(portSchema.default(9465)),
  /** The fleet the API serves proxy requests without `X-Haru-Fleet` for (default: the layout's fleet). */
  HARU_DEFAULT_FLEET: optionalString,
  /** Bearer token for the API; unset leaves /v1/* open on 127.0.0.1 only (with a warning). */
  HARU_API_TOKEN: optionalString,
  /** Bearer token between the worker and the simulated supervisors; unset: loopback only, no token. */
  HARU_SUPERVISOR_TOKEN: optionalString,
  LOG_LEVEL: blankable(z.enum(['debug', 'info', 'warn', 'error']).default('info')),
});
export type DevEnv = z.infer<typeof devEnvSchema>;

/** Everything `haru dev` decided from its environment, with paths resolved. */
export interface DevConfig {
  env: DevEnv;
  projectRoot: string;
  /** Absolute state directory. */
  stateDir: string;
  /** Absolute path of the source layout. */
  layoutFile: string;
  /** Where the generated layout (ports shifted, paths resolved) is written for `haru sim domain`. */
  generatedLayoutFile: string;
  logDir: string;
  /** Start the Temporal dev server (no address in TEMPORAL_ADDRESS or the profile). */
  startsTemporal: boolean;
  /** The server the stack's worker and API connect to: the configured one, or the dev server, plain. */
  temporal: TemporalSettings;
}

/**
 * Parses the dev environment (ConfigError listing every bad variable) and resolves paths: a relative
 * HARU_STATE_DIR or HARU_DEV_LAYOUT is taken from `cwd`, the default layout from the project root.
 */
export function loadDevConfig(env: NodeJS.ProcessEnv, cwd: string, projectRoot: string): DevConfig {
  const parsed = parseEnv(devEnvSchema, env, 'dev stack');
  const stateDir = path.resolve(cwd, parsed.HARU_STATE_DIR);
  const configured = resolveTemporalSettings(env);
  const startsTemporal = !configured.configured;
  const devAddress = `127.0.0.1:${parsed.HARU_TEMPORAL_PORT}`;
  return {
    env: parsed,
    projectRoot,
    stateDir,
    layoutFile: parsed.HARU_DEV_LAYOUT
      ? path.resolve(cwd, parsed.HARU_DEV_LAYOUT)
      : path.join(projectRoot, 'examples', 'dev.layout.json'),
    generatedLayoutFile: path.join(stateDir, 'dev', 'layout.json'),
    logDir: path.join(stateDir, 'logs'),
    startsTemporal,
    temporal: startsTemporal
      ? {
          address: devAddress,
          configured: false,
          namespace: configured.namespace,
          connection: { address: devAddress },
        }
      : configured,
  };
}
