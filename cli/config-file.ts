/**
 * The `haru` config file: named contexts (a server and how to get its token), one of them current, like
 * kubectl's kubeconfig and the temporal CLI's profiles. `$HARU_CONFIG`, else `$XDG_CONFIG_HOME/haru/config.json`,
 * else `~/.config/haru/config.json`. A file holding a token itself must be its owner's alone (mode 600).
 */
import { mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { z } from 'zod';
import { readOwnerOnlyFile } from '../lib/secret-file';
import { ConfigError, formatZodError } from '../schemas/env';

/** A context's name: what `--context` and `config use-context` take. */
export const contextNameSchema = z
  .string()
  .regex(/^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$/, 'a context name is letters, digits, `.`, `_` and `-`');

export const contextSchema = z
  .strictObject({
    /** The API's base URL. */
    server: z.url({ protocol: /^https?$/, error: 'must be an http(s) URL' }).optional(),
    /** A file holding the API token (trimmed); relative to the config file's folder. */
    tokenFile: z.string().min(1).optional(),
    /** The token itself: only in a file nobody else may read. */
    token: z.string().trim().min(1).optional(),
    /** Send the token over plain http:// off loopback (a trusted network). */
    insecureHttp: z.boolean().optional(),
  })
  .refine((c) => !(c.token && c.tokenFile), { error: 'set token or tokenFile, not both', path: ['tokenFile'] });
export type HaruContext = z.infer<typeof contextSchema>;

export const configFileSchema = z
  .strictObject({
    currentContext: contextNameSchema.optional(),
    contexts: z.record(contextNameSchema, contextSchema).default({}),
  })
  .refine((c) => c.currentContext === undefined || c.currentContext in c.contexts, {
    error: 'names no context in `contexts`',
    path: ['currentContext'],
  });
export type HaruConfig = z.infer<typeof configFileSchema>;

/** The config file's path: `$HARU_CONFIG`, else under `$XDG_CONFIG_HOME`, else under `~/.config`. */
export function configPath(env: NodeJS.ProcessEnv): string {
  if (env.HARU_CONFIG?.trim()) return path.resolve(env.HARU_CONFIG.trim());
  const base = env.XDG_CONFIG_HOME?.trim() || path.join(env.HOME?.trim() || os.homedir(), '.config');
  return path.join(base, 'haru', 'config.json');
}

/** A config file as read: its path and contents (empty when there is no file yet). */
export interface LoadedConfig {
  file: string;
  config: HaruConfig;
}

const holdsToken = (config: HaruConfig) => Object.values(config.contexts).some((c) => c.token !== undefined);
const fail = (message: string) => new ConfigError(message);

/**
 * Reads and validates the config file. No file is an empty config. Throws ConfigError naming the file and
 * the JSON path of each problem, and for a file that holds a token while group or others may read it.
 */
export function loadConfigFile(file: string): LoadedConfig {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return { file, config: { contexts: {} } };
    throw fail(`config file ${file}: cannot read it (${(err as NodeJS.ErrnoException).code ?? String(err)})`);
  }
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (err) {
    throw fail(`config file ${file}: not JSON (${(err as Error).message})`);
  }
  const parsed = configFileSchema.safeParse(json);
  if (!parsed.success) throw fail(`invalid config file ${file}:\n${formatZodError(parsed.error, '  ')}`);
  // The check the secret key files get: a token readable by others is a token given away.
  if (holdsToken(parsed.data)) readOwnerOnlyFile(file, `config file (it holds a token)`, fail);
  return { file, config: parsed.data };
}

/** A context's token file as an absolute path: a relative one is relative to the config file's folder. */
export const tokenFilePath = (loaded: LoadedConfig, context: HaruContext): string | undefined =>
  context.tokenFile === undefined ? undefined : path.resolve(path.dirname(loaded.file), context.tokenFile);

/** Writes the config file whole (a temporary file renamed over it), mode 600 in a folder of mode 700. */
export function saveConfigFile(file: string, config: HaruConfig): void {
  const valid = configFileSchema.parse(config);
  mkdirSync(path.dirname(file), { recursive: true, mode: 0o700 });
  const temporary = `${file}.${process.pid}.tmp`;
  writeFileSync(temporary, `${JSON.stringify(valid, null, 2)}\n`, { mode: 0o600 });
  renameSync(temporary, file);
}
