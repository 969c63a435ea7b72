import { z } from 'zod';
import { isLoopbackHost } from '../lib/loopback';
import { secretFromEnv } from '../lib/secret-file';
import { readSecretRef } from '../lib/secret-ref';
import { blankable, ConfigError, formatZodError, parseEnv, portSchema, positiveMsSchema } from '../schemas/env';
import { isLegacySupervisorConfig } from '../schemas/legacy-supervisor-config';
import { type SupervisorConfig, supervisorConfigSchema } from '../schemas/supervisor';
import { DEFAULT_WEDGE_MS } from './engine-progress';
import type { MigSlot } from './gpu';

/** GPU vendors with a memory adapter (supervisor/gpu/). */
export const GPU_VENDORS = ['nvidia', 'amd'] as const;

/** The supervisor's environment. A blank variable counts as unset. */
export const supervisorEnvSchema = z.object({
  /** Inline JSON (starts with `{`) or a path to a JSON file; see schemas/supervisor.ts. */
  HARU_SUPERVISOR_CONFIG: blankable(z.string({ error: 'is required (inline JSON or a file path)' })),
  /**
   * Bearer token for /v1/*, inline or read from HARU_SUPERVISOR_TOKEN_FILE (trimmed; one of the two).
   * Unset: a loud warning, and the supervisor listens on 127.0.0.1 only.
   */
  HARU_SUPERVISOR_TOKEN: blankable(z.string().trim().min(1).optional()),
  HARU_SUPERVISOR_TOKEN_FILE: blankable(z.string().optional()),
  PORT: blankable(portSchema.default(8701)),
  /** Listen address. Default 0.0.0.0 with a token, 127.0.0.1 without (a non-loopback host then is refused). */
  HARU_SUPERVISOR_HOST: blankable(z.string().optional()),
  /** HTTPS: certificate and key files (both or neither); the key must not be readable by group or others. */
  HARU_SUPERVISOR_TLS_CERT_FILE: blankable(z.string().optional()),
  HARU_SUPERVISOR_TLS_KEY_FILE: blankable(z.string().optional()),
  /** mTLS: only clients with a certificate from this CA get past the handshake. */
  HARU_SUPERVISOR_TLS_CLIENT_CA_FILE: blankable(z.string().optional()),
  /** The token being rotated out, still accepted beside HARU_SUPERVISOR_TOKEN until it is unset (or …_FILE). */
  HARU_SUPERVISOR_TOKEN_PREVIOUS: blankable(z.string().trim().min(1).optional()),
  HARU_SUPERVISOR_TOKEN_PREVIOUS_FILE: blankable(z.string().optional()),
  HARU_GPU_VENDOR: blankable(z.enum(GPU_VENDORS).default('nvidia')),
  /** The vendor tool to run instead of `nvidia-smi` / `rocm-smi` (the simulator's, a wrapper, a full path). */
  HARU_GPU_SMI: blankable(z.string().optional()),
  /**
   * Where the host's /proc is mounted in the supervisor's container (`-v /proc:/host/proc:ro`): the vendor tool
   * prints host pids, mapped through it into the container's (NSpid). Unset in a container: no pid is matched.
   */
  HARU_HOST_PROC: blankable(z.string().optional()),
  /**
   * Requests in an awake engine with no progress for this long make its model `wedged`; an idle one gets a
   * synthetic completion every half of it, answered within the other half (supervisor/engine-progress.ts).
   */
  HARU_VLLM_WEDGE_MS: blankable(positiveMsSchema.default(DEFAULT_WEDGE_MS)),
  /** Timeout of each sleep, wake_up and weight reload call (a large model takes tens of seconds). */
  HARU_VLLM_WAKE_TIMEOUT_MS: blankable(positiveMsSchema.default(300_000)),
  /**
   * `1`: start training although runs can only be tracked by process group (no cgroup to be had, e.g. in a
   * container); unset, training is then refused, with the reason in /v1/status (supervisor/cgroup.ts).
   */
  HARU_TRAINING_ALLOW_PGROUP: blankable(z.enum(['0', '1']).default('0')),
  /**
   * The host user every training slot that names no `runAs` of its own runs as: the host's policy, set once for
   * all of supervisor.json (the host kit's unit: `haru-trainer`).
   */
  HARU_TRAINING_RUN_AS: blankable(
    z
      .string()
      .regex(/^[a-z_][a-z0-9_.-]*\$?$/i, 'must be a user name')
      .optional(),
  ),
  /** On its own SIGTERM the supervisor stops every training run with this grace, then exits. */
  HARU_SHUTDOWN_GRACE_MS: blankable(z.coerce.number().int().min(0).default(10_000)),
  LOG_LEVEL: blankable(z.enum(['debug', 'info', 'warn', 'error']).default('info')),
});
export type SupervisorEnv = z.infer<typeof supervisorEnvSchema>;

/**
 * Parses the supervisor's environment; throws ConfigError listing every bad variable. The tokens come back
 * resolved: read from their `…_FILE` when that is the one set (trimmed, so a secret file's trailing newline
 * is not part of the token); an unreadable or empty file, or both forms set, is a ConfigError naming them.
 */
export function loadSupervisorEnv(env: NodeJS.ProcessEnv, readFile?: (file: string) => string): SupervisorEnv {
  const parsed = parseEnv(supervisorEnvSchema, env, 'supervisor');
  const opts = { read: readFile, fail: (message: string) => new ConfigError(message) };
  return {
    ...parsed,
    HARU_SUPERVISOR_TOKEN: secretFromEnv(parsed, 'HARU_SUPERVISOR_TOKEN', opts),
    HARU_SUPERVISOR_TOKEN_PREVIOUS: secretFromEnv(parsed, 'HARU_SUPERVISOR_TOKEN_PREVIOUS', opts),
  };
}

/**
 * Reads HARU_SUPERVISOR_CONFIG: inline JSON when it starts with `{`, otherwise a file path read with
 * `readFile`. Throws ConfigError naming the source and listing every problem (JSON syntax or schema).
 */
export function loadSupervisorConfig(raw: string, readFile: (file: string) => string): SupervisorConfig {
  const inline = raw.trimStart().startsWith('{');
  const source = inline ? 'HARU_SUPERVISOR_CONFIG (inline JSON)' : raw;
  let text = raw;
  if (!inline) {
    try {
      text = readFile(raw);
    } catch (err) {
      throw new ConfigError(`cannot read supervisor config ${raw}: ${(err as Error).message}`);
    }
  }
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (err) {
    throw new ConfigError(`supervisor config ${source} is not valid JSON: ${(err as Error).message}`);
  }
  if (isLegacySupervisorConfig(json)) {
    throw new ConfigError(
      `supervisor config ${source} is in the original project's format (one "slots" list): convert it with ` +
        `\`haru layout convert ${inline ? '<file>' : raw} -o <new file>\` and point HARU_SUPERVISOR_CONFIG at the result ` +
        '(docs/migration.md)',
    );
  }
  const parsed = supervisorConfigSchema.safeParse(json);
  if (!parsed.success) {
    throw new ConfigError(`invalid supervisor config ${source}:\n${formatZodError(parsed.error, '  ')}`);
  }
  return parsed.data;
}

/**
 * The supervisor config this environment configures: HARU_SUPERVISOR_CONFIG (loadSupervisorConfig), with every
 * training slot that names no `runAs` running as HARU_TRAINING_RUN_AS when that is set. What the supervisor runs
 * and what `--trainer-firewall` keeps off its engines are the same.
 */
export function supervisorConfigOf(
  settings: Pick<SupervisorEnv, 'HARU_SUPERVISOR_CONFIG' | 'HARU_TRAINING_RUN_AS'>,
  readFile: (file: string) => string,
): SupervisorConfig {
  const config = loadSupervisorConfig(settings.HARU_SUPERVISOR_CONFIG, readFile);
  const runAs = settings.HARU_TRAINING_RUN_AS;
  if (!runAs) return config;
  return { ...config, training: config.training.map((slot) => (slot.runAs ? slot : { ...slot, runAs })) };
}

/**
 * Reads every model's `apiKey` reference: the named environment variable, or the file's trimmed contents.
 * Returns the key by vLLM port. Throws ConfigError naming the model and the reference for an unset or blank
 * variable, an unreadable file or an empty one (never the key itself).
 */
export function resolveVllmApiKeys(
  config: SupervisorConfig,
  env: NodeJS.ProcessEnv,
  readFile: (file: string) => string,
): Map<number, string> {
  const keys = new Map<number, string>();
  for (const model of config.inference.flatMap((slot) => slot.models)) {
    if (!model.apiKey) continue;
    try {
      keys.set(model.port, readSecretRef(model.apiKey, 'apiKey', env, readFile));
    } catch (err) {
      throw new ConfigError(`model ${model.name}: ${(err as Error).message}`);
    }
  }
  return keys;
}

/** The environment variables that hold vLLM API keys: kept from training runs like the supervisor's own secrets. */
export const apiKeyEnvNames = (config: SupervisorConfig): string[] =>
  config.inference.flatMap((slot) => slot.models.flatMap((m) => (m.apiKey && 'env' in m.apiKey ? [m.apiKey.env] : [])));

/** The training slots that name a MIG instance, with the config field each comes from. */
export function migSlotsOf(config: SupervisorConfig): MigSlot[] {
  return config.training.flatMap((slot, i) =>
    slot.mig ? [{ gpuIndex: slot.gpuIndex, device: slot.mig, field: `training[${i}].mig` }] : [],
  );
}

/**
 * Where the supervisor listens. Without a token it must stay on loopback: an explicit non-loopback
 * HARU_SUPERVISOR_HOST is a ConfigError rather than an open control surface.
 */
export function resolveListenHost(env: Pick<SupervisorEnv, 'HARU_SUPERVISOR_TOKEN' | 'HARU_SUPERVISOR_HOST'>): string {
  const host = env.HARU_SUPERVISOR_HOST;
  if (env.HARU_SUPERVISOR_TOKEN) return host ?? '0.0.0.0';
  if (host && !isLoopbackHost(host)) {
    throw new ConfigError(
      `HARU_SUPERVISOR_HOST=${host} needs HARU_SUPERVISOR_TOKEN: without a token the supervisor listens on 127.0.0.1 only`,
    );
  }
  return host ?? '127.0.0.1';
}
