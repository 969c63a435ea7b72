import { z } from 'zod';
import { blankable, ConfigError, formatZodError, portSchema, positiveMsSchema } from '../schemas/env';
import { type SupervisorConfig, supervisorConfigSchema } from '../schemas/supervisor';
import type { MigSlot } from './gpu';
import { readSecretFile } from './secret-file';

/** GPU vendors with a memory adapter (supervisor/gpu/). */
export const GPU_VENDORS = ['nvidia', 'amd'] as const;

/** The supervisor's environment. A blank variable counts as unset. */
export const supervisorEnvSchema = z.object({
  /** Inline JSON (starts with `{`) or a path to a JSON file; see schemas/supervisor.ts. */
  HARU_SUPERVISOR_CONFIG: blankable(z.string({ error: 'is required (inline JSON or a file path)' })),
  /** Bearer token for /v1/*. Unset: a loud warning, and the supervisor listens on 127.0.0.1 only. */
  HARU_SUPERVISOR_TOKEN: blankable(z.string().optional()),
  /**
   * A file holding the token instead (trimmed; mode 600): a token in the environment stays readable in
   * /proc/<pid>/environ for the process's whole life, by anything running as the same user.
   */
  HARU_SUPERVISOR_TOKEN_FILE: blankable(z.string().optional()),
  PORT: blankable(portSchema.default(8701)),
  /** Listen address. Default 0.0.0.0 with a token, 127.0.0.1 without (a non-loopback host then is refused). */
  HARU_SUPERVISOR_HOST: blankable(z.string().optional()),
  /** HTTPS: certificate and key files (both or neither); the key must not be readable by group or others. */
  HARU_SUPERVISOR_TLS_CERT_FILE: blankable(z.string().optional()),
  HARU_SUPERVISOR_TLS_KEY_FILE: blankable(z.string().optional()),
  /** mTLS: only clients with a certificate from this CA get past the handshake. */
  HARU_SUPERVISOR_TLS_CLIENT_CA_FILE: blankable(z.string().optional()),
  /** The token being rotated out, still accepted beside HARU_SUPERVISOR_TOKEN until it is unset. */
  HARU_SUPERVISOR_TOKEN_PREVIOUS: blankable(z.string().trim().min(1).optional()),
  HARU_GPU_VENDOR: blankable(z.enum(GPU_VENDORS).default('nvidia')),
  /** The vendor tool to run instead of `nvidia-smi` / `rocm-smi` (the simulator's, a wrapper, a full path). */
  HARU_GPU_SMI: blankable(z.string().optional()),
  /**
   * Where the host's /proc is mounted in the supervisor's container (`-v /proc:/host/proc:ro`): the vendor tool
   * prints host pids, mapped through it into the container's (NSpid). Unset in a container: no pid is matched.
   */
  HARU_HOST_PROC: blankable(z.string().optional()),
  HARU_GPU_SMI_TIMEOUT_MS: blankable(positiveMsSchema.default(10_000)),
  /** Timeout of short vLLM calls (is_sleeping, metrics, reset_prefix_cache). */
  HARU_VLLM_TIMEOUT_MS: blankable(positiveMsSchema.default(5_000)),
  /** Timeout of each sleep, wake_up and weight reload call (a large model takes tens of seconds). */
  HARU_VLLM_WAKE_TIMEOUT_MS: blankable(positiveMsSchema.default(300_000)),
  /** On its own SIGTERM the supervisor stops every training run with this grace, then exits. */
  HARU_SUPERVISOR_SHUTDOWN_GRACE_MS: blankable(z.coerce.number().int().min(0).default(10_000)),
  /** Grace used when a run's leader exits on its own and its process group still has members. */
  HARU_TRAINING_ORPHAN_GRACE_MS: blankable(z.coerce.number().int().min(0).default(10_000)),
  LOG_LEVEL: blankable(z.enum(['debug', 'info', 'warn', 'error']).default('info')),
});
export type SupervisorEnv = z.infer<typeof supervisorEnvSchema>;

/** Parses the supervisor's environment; throws ConfigError listing every bad variable. */
export function loadSupervisorEnv(env: NodeJS.ProcessEnv): SupervisorEnv {
  const parsed = supervisorEnvSchema.safeParse(env);
  if (!parsed.success) {
    throw new ConfigError(`invalid supervisor environment:\n${formatZodError(parsed.error, '  ')}`);
  }
  return parsed.data;
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
  const parsed = supervisorConfigSchema.safeParse(json);
  if (!parsed.success) {
    throw new ConfigError(`invalid supervisor config ${source}:\n${formatZodError(parsed.error, '  ')}`);
  }
  return parsed.data;
}

/** The training slots that name a MIG instance, with the config field each comes from. */
export function migSlotsOf(config: SupervisorConfig): MigSlot[] {
  return config.training.flatMap((slot, i) =>
    slot.mig ? [{ gpuIndex: slot.gpuIndex, device: slot.mig, field: `training[${i}].mig` }] : [],
  );
}

/** True for addresses that only this host can reach. */
export function isLoopbackHost(host: string): boolean {
  return host === 'localhost' || host === '::1' || /^127\.\d+\.\d+\.\d+$/.test(host);
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

/**
 * The bearer token: HARU_SUPERVISOR_TOKEN, or the trimmed content of HARU_SUPERVISOR_TOKEN_FILE (not both; an
 * empty file, or one that group or others may read, is refused). Undefined when neither is set.
 */
export function resolveSupervisorToken(
  env: Pick<SupervisorEnv, 'HARU_SUPERVISOR_TOKEN' | 'HARU_SUPERVISOR_TOKEN_FILE'>,
): string | undefined {
  const file = env.HARU_SUPERVISOR_TOKEN_FILE;
  if (!file) return env.HARU_SUPERVISOR_TOKEN;
  if (env.HARU_SUPERVISOR_TOKEN) {
    throw new ConfigError('HARU_SUPERVISOR_TOKEN and HARU_SUPERVISOR_TOKEN_FILE exclude each other: set one');
  }
  const token = readSecretFile('HARU_SUPERVISOR_TOKEN_FILE', file).toString('utf8').trim();
  if (!token) throw new ConfigError(`HARU_SUPERVISOR_TOKEN_FILE: ${file} is empty`);
  return token;
}
