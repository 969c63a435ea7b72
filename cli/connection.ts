/**
 * Which API the `haru` command talks to and with which token: a flag (`--server`, `--token`) wins over the
 * environment (`HARU_URL`, `HARU_API_TOKEN`), which wins over the config file's context (`--context`, else
 * its current one); the server defaults to http://127.0.0.1:8700. A token never goes over plain http:// to a
 * host off loopback unless `--insecure-http` (or the context's `insecureHttp`) says the network is trusted.
 */
import type { Command } from 'commander';
import { z } from 'zod';
import { readSecretFile } from '../lib/secret-file';
import { isLoopbackHost } from '../lib/loopback';
import { ConfigError } from '../schemas/env';
import { type ApiClient, cliEnvSchema, createApiClient } from './api-client';
import { configPath, type LoadedConfig, loadConfigFile, tokenFilePath } from './config-file';
import { BadInputError } from './exit-codes';

export const DEFAULT_SERVER = 'http://127.0.0.1:8700';

/** The global flags, as commander hands them over (`optsWithGlobals()`). */
export const connectionFlagsSchema = z.object({
  server: z.url({ protocol: /^https?$/, error: '--server must be an http(s) URL' }).optional(),
  token: z.string().trim().min(1, { error: '--token is empty' }).optional(),
  context: z.string().optional(),
  insecureHttp: z.boolean().optional(),
});
export type ConnectionFlags = z.infer<typeof connectionFlagsSchema>;

/** Where the API is, the token if any, and where each came from (for messages: `--server`, `HARU_URL`, …). */
export interface Connection {
  server: string;
  serverFrom: string;
  token?: string;
  tokenFrom?: string;
}

/**
 * Resolves the connection. `loadConfig` runs only when a flag or variable leaves something to the config file
 * (or `--context` names one). Throws BadInputError for a bad flag, an unknown context or a token that would
 * cross the network in plain text; ConfigError for a bad variable or config file.
 */
export function resolveConnection(
  rawFlags: unknown,
  rawEnv: NodeJS.ProcessEnv,
  loadConfig: () => LoadedConfig,
): Connection {
  const flagsParsed = connectionFlagsSchema.safeParse(rawFlags);
  if (!flagsParsed.success) throw new BadInputError(flagsParsed.error.issues.map((i) => i.message).join('; '));
  const flags = flagsParsed.data;
  const envParsed = cliEnvSchema.safeParse(rawEnv);
  if (!envParsed.success) {
    throw new ConfigError(`invalid CLI environment: ${envParsed.error.issues.map((i) => i.message).join('; ')}`);
  }
  const env = envParsed.data;

  let server = flags.server ? { value: flags.server, from: '--server' } : undefined;
  server ??= env.HARU_URL ? { value: env.HARU_URL, from: 'HARU_URL' } : undefined;
  let token = flags.token ? { value: flags.token, from: '--token' } : undefined;
  token ??= env.HARU_API_TOKEN ? { value: env.HARU_API_TOKEN.trim(), from: 'HARU_API_TOKEN' } : undefined;
  let insecureHttp = flags.insecureHttp ?? false;

  if (flags.context !== undefined || !server || !token) {
    const loaded = loadConfig();
    const name = flags.context ?? loaded.config.currentContext;
    const context = name === undefined ? undefined : loaded.config.contexts[name];
    if (name !== undefined && !context) throw new BadInputError(`no context ${name} in ${loaded.file}`);
    if (context) {
      const from = `context ${name} in ${loaded.file}`;
      if (!server && context.server) server = { value: context.server, from };
      const file = tokenFilePath(loaded, context);
      if (!token && context.token) token = { value: context.token, from };
      if (!token && file) {
        const fail = (message: string) => new ConfigError(message);
        token = { value: readSecretFile(file, `${from}: tokenFile`, { fail }), from };
      }
      insecureHttp ||= context.insecureHttp ?? false;
    }
  }
  const resolved: Connection = {
    server: server?.value ?? DEFAULT_SERVER,
    serverFrom: server?.from ?? 'the default',
    ...(token ? { token: token.value, tokenFrom: token.from } : {}),
  };
  refusePlainTextToken(resolved, insecureHttp);
  return resolved;
}

/**
 * A bearer token sent over plain http:// to another host can be read by anyone on the path: refused unless
 * the operator said the network is trusted. Loopback stays allowed (`haru dev`, an SSH tunnel).
 */
function refusePlainTextToken(connection: Connection, insecureHttp: boolean): void {
  if (!connection.token || insecureHttp) return;
  const url = new URL(connection.server);
  if (url.protocol !== 'http:' || isLoopbackHost(url.hostname)) return;
  throw new BadInputError(
    `refusing to send the API token (${connection.tokenFrom}) over plain http:// to ${url.host} (${connection.serverFrom}): ` +
      'use https://, or pass --insecure-http if the network between here and the API is trusted',
  );
}

/** The API client for the command `cmd` runs: its global flags, then `env`, then the config file. */
export function apiClientFor(cmd: Command, env: NodeJS.ProcessEnv = process.env): ApiClient {
  const connection = resolveConnection(cmd.optsWithGlobals(), env, () => loadConfigFile(configPath(env)));
  return createApiClient({
    HARU_URL: connection.server,
    HARU_API_TOKEN: connection.token,
    serverFrom: connection.serverFrom,
  });
}
