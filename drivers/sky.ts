import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { capTail, SecretNotSetError, SkyCommandError } from './errors';
import type { Exec, ExecResult } from './exec';
import { SECRET_ENV_PREFIX } from '../schemas/secret-ref';
import {
  parseEndpoint,
  parseServeStatus,
  parseStatusJson,
  parseStatusTable,
  saysNotFound,
  saysSkippedFailed,
  type SkyCluster,
  type SkyService,
  UnparseableOutputError,
} from './sky-output';

/** Per-command time limits in ms. Launches provision machines and load models; the rest are short. */
export interface SkyTimeouts {
  launchMs: number;
  serveUpMs: number;
  statusMs: number;
  stopMs: number;
  downMs: number;
}

export const DEFAULT_SKY_TIMEOUTS: SkyTimeouts = {
  launchMs: 45 * 60_000,
  serveUpMs: 45 * 60_000,
  statusMs: 2 * 60_000,
  stopMs: 10 * 60_000,
  downMs: 10 * 60_000,
};

export interface SkyCliOptions {
  exec: Exec;
  /** The `sky` program: a path, or a name looked up on `env.PATH` (default `sky`). */
  bin?: string;
  /**
   * The environment of every `sky` process (PATH, HOME, cloud credentials, SKYPILOT_* settings). Pass it
   * without Haru's own secrets; a command's secrets are added to its own environment only.
   */
  env: Readonly<Record<string, string>>;
  timeouts?: Partial<SkyTimeouts>;
  /**
   * How `sky status` is read: `table` (what every SkyPilot release prints) or `json` (`-o json`, the JSON
   * array of cluster records that SkyPilot 0.14 prints; older releases refuse the option). Default `table`.
   */
  statusOutput?: 'table' | 'json';
  /** Where a YAML file lives while its command runs (default the OS temp dir). */
  tmpDir?: string;
}

/** Per-call options: the activity's cancellation signal, an output tap for heartbeats, a timeout override. */
export interface SkyCallOptions {
  signal?: AbortSignal;
  onOutput?: (chunk: string) => void;
  timeoutMs?: number;
}

/** A launch: the target name, the rendered YAML, and secrets to hand to the host as environment variables. */
export interface SkyLaunchInput {
  name: string;
  yaml: string;
  /** Variable name -> value. Each name goes on argv as `--secret NAME`; the value only in the `sky` process env. */
  secrets?: Readonly<Record<string, string>>;
  /**
   * Names of variables the `sky` process already has in its environment (`SkyCliOptions.env`: the
   * worker's), also passed as `--secret NAME`. One that is not set fails with SecretNotSetError before
   * anything runs.
   */
  envSecrets?: readonly string[];
}

/**
 * The `sky` CLI as typed calls. A non-zero exit, a kill, a timeout or unreadable output throws
 * SkyCommandError (argv + capped stderr); a cluster or service that does not exist is `null` from a status
 * call and `not_found` from a stop or down, never a throw.
 */
export interface SkyCli {
  /** `sky launch --cluster NAME --yes --detach-run [--secret K]... task.yaml`: returns when the task's run has started. */
  launch(input: SkyLaunchInput, opts?: SkyCallOptions): Promise<void>;
  /** `sky status [--refresh] NAME`; null when no such cluster. */
  status(cluster: string, opts?: SkyCallOptions & { refresh?: boolean }): Promise<SkyCluster | null>;
  /**
   * `sky status --endpoint PORT NAME`: the address at which the cluster's head exposes `port`, as a URL
   * (`scheme`, default http, for the `host:port` a VM prints; a printed URL as it is); null when no such cluster.
   */
  endpoint(
    cluster: string,
    port: number,
    opts?: SkyCallOptions & { scheme?: 'http' | 'https' },
  ): Promise<string | null>;
  /** `sky stop NAME --yes`. */
  stop(cluster: string, opts?: SkyCallOptions): Promise<'stopped' | 'not_found'>;
  /** `sky down NAME --yes`: terminates the cluster. */
  down(cluster: string, opts?: SkyCallOptions): Promise<'down' | 'not_found'>;
  /** `sky serve up --service-name NAME --yes [--secret K]... service.yaml`. */
  serveUp(input: SkyLaunchInput, opts?: SkyCallOptions): Promise<void>;
  /** `sky serve status NAME`; null when no such service. */
  serveStatus(service: string, opts?: SkyCallOptions): Promise<SkyService | null>;
  /** `sky serve status --endpoint NAME`: the load balancer's address (an http URL); null when no such service. */
  serveEndpoint(service: string, opts?: SkyCallOptions): Promise<string | null>;
  /**
   * `sky serve down NAME --yes`. SkyServe skips a service in a failed state (CONTROLLER_FAILED,
   * FAILED_CLEANUP) and exits 0, leaving its replicas running; the call then runs `sky serve down NAME
   * --yes --purge`, the only way down for such a service, and answers `purged`. A service still skipped
   * after that is a SkyCommandError, never `down`.
   */
  serveDown(service: string, opts?: SkyCallOptions): Promise<'down' | 'purged' | 'not_found'>;
}

const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;

/** The argv (after `sky`) of every command, as pure functions so tests can pin them. */
export const skyArgs = {
  launch: (cluster: string, yamlPath: string, secretNames: readonly string[] = []) => [
    'launch',
    '--cluster',
    cluster,
    '--yes',
    // Without it `sky launch` tails the run's logs for as long as the supervisor lives.
    '--detach-run',
    ...secretNames.flatMap((name) => ['--secret', name]),
    yamlPath,
  ],
  status: (cluster: string, opts: { refresh?: boolean; json?: boolean } = {}) => [
    'status',
    ...(opts.refresh === false ? [] : ['--refresh']),
    ...(opts.json ? ['-o', 'json'] : []),
    cluster,
  ],
  endpoint: (cluster: string, port: number) => ['status', '--endpoint', String(port), cluster],
  stop: (cluster: string) => ['stop', cluster, '--yes'],
  down: (cluster: string) => ['down', cluster, '--yes'],
  serveUp: (service: string, yamlPath: string, secretNames: readonly string[] = []) => [
    'serve',
    'up',
    '--service-name',
    service,
    '--yes',
    ...secretNames.flatMap((name) => ['--secret', name]),
    yamlPath,
  ],
  serveStatus: (service: string) => ['serve', 'status', service],
  serveEndpoint: (service: string) => ['serve', 'status', '--endpoint', service],
  serveDown: (service: string, opts: { purge?: boolean } = {}) => [
    'serve',
    'down',
    service,
    '--yes',
    ...(opts.purge ? ['--purge'] : []),
  ],
} as const;

/** Creates the wrapper. It holds no state; every call is one `sky` process. */
export function createSkyCli(options: SkyCliOptions): SkyCli {
  const bin = options.bin ?? 'sky';
  const timeouts = { ...DEFAULT_SKY_TIMEOUTS, ...options.timeouts };
  const tmpRoot = options.tmpDir ?? os.tmpdir();

  async function run(
    args: string[],
    timeoutMs: number,
    opts: SkyCallOptions = {},
    secrets: Readonly<Record<string, string>> = {},
  ): Promise<ExecResult> {
    const command = [bin, ...args];
    let result: ExecResult;
    try {
      result = await options.exec({
        file: bin,
        args,
        env: { ...options.env, ...secrets },
        timeoutMs: opts.timeoutMs ?? timeoutMs,
        signal: opts.signal,
        onOutput: opts.onOutput ? (chunk) => opts.onOutput!(chunk) : undefined,
      });
    } catch (err) {
      throw new SkyCommandError(command, 'spawn', null, '', (err as Error).message);
    }
    const stderr = capTail(result.stderr || result.stdout);
    if (result.timedOut)
      throw new SkyCommandError(command, 'timeout', null, stderr, `${opts.timeoutMs ?? timeoutMs} ms`);
    if (result.aborted) throw new SkyCommandError(command, 'aborted', null, stderr);
    if (result.exitCode === null)
      throw new SkyCommandError(command, 'signal', null, stderr, result.signal ?? undefined);
    return result;
  }

  const failed = (command: string[], result: ExecResult) =>
    new SkyCommandError(command, 'exit', result.exitCode, capTail(result.stderr || result.stdout));

  /** Writes the YAML to a private temp dir for the length of `fn`, then removes it whatever happens. */
  async function withYamlFile<T>(name: string, yaml: string, fn: (file: string) => Promise<T>): Promise<T> {
    const dir = await mkdtemp(path.join(tmpRoot, 'haru-sky-'));
    try {
      const file = path.join(dir, `${name}.yaml`);
      await writeFile(file, yaml, { mode: 0o600 });
      return await fn(file);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  }

  function secretNames(secrets: Readonly<Record<string, string>> | undefined): string[] {
    const names = Object.keys(secrets ?? {});
    for (const name of names) {
      if (!ENV_NAME.test(name)) throw new Error(`secret name "${name}" is not an environment variable name`);
    }
    return names;
  }

  async function launchLike(
    kind: 'launch' | 'serveUp',
    input: SkyLaunchInput,
    opts: SkyCallOptions | undefined,
  ): Promise<void> {
    const names = secretNames(input.secrets);
    for (const name of input.envSecrets ?? []) {
      if (!ENV_NAME.test(name)) throw new Error(`secret name "${name}" is not an environment variable name`);
      if (options.env[name] === undefined) throw new SecretNotSetError(name);
      if (!names.includes(name)) names.push(name);
    }
    await withYamlFile(input.name, input.yaml, async (file) => {
      const args =
        kind === 'launch' ? skyArgs.launch(input.name, file, names) : skyArgs.serveUp(input.name, file, names);
      const timeout = kind === 'launch' ? timeouts.launchMs : timeouts.serveUpMs;
      const result = await run(args, timeout, opts, input.secrets);
      if (result.exitCode !== 0) throw failed([bin, ...args], result);
    });
  }

  function removal<T extends string>(args: string[], name: string, result: ExecResult, done: T): T | 'not_found' {
    const output = `${result.stdout}\n${result.stderr}`;
    // `sky down` of an unknown cluster exits 0 and says so; a failing one may say so too.
    if (saysNotFound(output, name)) return 'not_found';
    if (result.exitCode !== 0) throw failed([bin, ...args], result);
    return done;
  }

  function parsed<T>(args: string[], result: ExecResult, parse: () => T): T {
    try {
      return parse();
    } catch (err) {
      if (err instanceof UnparseableOutputError) {
        throw new SkyCommandError([bin, ...args], 'unparseable', result.exitCode, capTail(result.stdout), err.message);
      }
      throw err;
    }
  }

  /** An endpoint query: the printed address as a URL, null for an unknown cluster or service. */
  async function endpointOf(
    args: string[],
    name: string,
    opts: (SkyCallOptions & { scheme?: 'http' | 'https' }) | undefined,
  ): Promise<string | null> {
    const result = await run(args, timeouts.statusMs, opts);
    if (saysNotFound(`${result.stdout}\n${result.stderr}`, name)) return null;
    if (result.exitCode !== 0) throw failed([bin, ...args], result);
    return parsed(args, result, () => parseEndpoint(result.stdout, opts?.scheme));
  }

  return {
    launch: (input, opts) => launchLike('launch', input, opts),
    serveUp: (input, opts) => launchLike('serveUp', input, opts),

    async status(cluster, opts = {}) {
      const json = options.statusOutput === 'json';
      const args = skyArgs.status(cluster, { refresh: opts.refresh, json });
      const result = await run(args, timeouts.statusMs, opts);
      if (result.exitCode !== 0) {
        if (saysNotFound(`${result.stdout}\n${result.stderr}`, cluster)) return null;
        throw failed([bin, ...args], result);
      }
      return parsed(args, result, () =>
        json ? parseStatusJson(result.stdout, cluster) : parseStatusTable(result.stdout, cluster),
      );
    },

    async serveStatus(service, opts = {}) {
      const args = skyArgs.serveStatus(service);
      const result = await run(args, timeouts.statusMs, opts);
      if (result.exitCode !== 0) {
        if (saysNotFound(`${result.stdout}\n${result.stderr}`, service)) return null;
        throw failed([bin, ...args], result);
      }
      return parsed(args, result, () => parseServeStatus(result.stdout, service));
    },

    endpoint: (cluster, port, opts) => endpointOf(skyArgs.endpoint(cluster, port), cluster, opts),
    serveEndpoint: (service, opts) => endpointOf(skyArgs.serveEndpoint(service), service, opts),

    async stop(cluster, opts) {
      const args = skyArgs.stop(cluster);
      return removal(args, cluster, await run(args, timeouts.stopMs, opts), 'stopped' as const);
    },
    async down(cluster, opts) {
      const args = skyArgs.down(cluster);
      return removal(args, cluster, await run(args, timeouts.downMs, opts), 'down' as const);
    },
    async serveDown(service, opts) {
      const args = skyArgs.serveDown(service);
      const result = await run(args, timeouts.downMs, opts);
      if (!saysSkippedFailed(`${result.stdout}\n${result.stderr}`, service)) {
        return removal(args, service, result, 'down' as const);
      }
      const purgeArgs = skyArgs.serveDown(service, { purge: true });
      const purged = await run(purgeArgs, timeouts.downMs, opts);
      const output = `${purged.stdout}\n${purged.stderr}`;
      if (purged.exitCode !== 0 || saysSkippedFailed(output, service)) throw failed([bin, ...purgeArgs], purged);
      return saysNotFound(output, service) ? 'not_found' : 'purged';
    },
  };
}

/** Variables of Haru's own processes that must never reach a `sky` process (or, through it, a cloud host). */
export const CONTROL_PLANE_SECRETS = [
  'HARU_SUPERVISOR_TOKEN',
  'HARU_API_TOKEN',
  'DATABASE_URL',
  'HARU_LISTEN_DATABASE_URL',
] as const;

/**
 * The environment for `sky` processes from a Haru process's own: everything the CLI may need (PATH, HOME,
 * cloud credentials, SKYPILOT_*), without Haru's secrets: those above, every `HARU_SUPERVISOR_TOKEN…`
 * variable, and every `HARU_SECRET_…` one (the per-domain tokens and upstream keys layouts name: each goes only
 * to its own host). A launch adds the domain's supervisor token back for that one command, as a `--secret`.
 */
export function skyProcessEnv(env: NodeJS.ProcessEnv): Record<string, string> {
  const result: Record<string, string> = {};
  for (const [key, value] of Object.entries(env)) {
    const isSecret =
      (CONTROL_PLANE_SECRETS as readonly string[]).includes(key) ||
      key.startsWith('HARU_SUPERVISOR_TOKEN') ||
      key.startsWith(SECRET_ENV_PREFIX);
    if (value !== undefined && !isSecret) result[key] = value;
  }
  return result;
}
