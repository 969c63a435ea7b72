import type { ChildProcess, SpawnOptions } from 'node:child_process';
import { createWriteStream } from 'node:fs';
import path from 'node:path';
import type { DomainLayout } from '../../schemas/layout';
import { type ManagedChild, manageChild } from './children';
import { WaitAborted, waitFor } from './wait';

/** Variables a simulated domain must not inherit: secrets of the control plane, and ports meant for the API. */
const WITHHELD = ['HARU_API_TOKEN', 'DATABASE_URL', 'PORT', 'HOST', 'HARU_DEFAULT_FLEET'];

export interface SimDomainDeps {
  spawn: (command: string, args: string[], options: SpawnOptions) => ChildProcess;
  projectRoot: string;
  /** The generated layout file every domain is started from (`haru sim domain --layout`). */
  layoutFile: string;
  stateDir: string;
  env: NodeJS.ProcessEnv;
  /** Where the domain's output is appended. */
  logFile: string;
  readyTimeoutMs?: number;
  /** Called as soon as the process exists (before it is ready), to record its pid. */
  onSpawn?: (pid: number) => void;
}

/** Where the dev stack keeps one simulated domain's host state (what `haru sim kill --state-dir` reads). */
export const simStateDir = (stateDir: string, slug: string): string => path.join(stateDir, 'sim', slug);

/**
 * The `haru sim domain` arguments for one domain of the dev stack. A standby starts in standby posture
 * (engines asleep, training running), as it would be after a demotion.
 */
export function simDomainArgs(layoutFile: string, slug: string, stateDir: string, standby: boolean): string[] {
  return [
    'sim',
    'domain',
    '--layout',
    layoutFile,
    '--domain',
    slug,
    '--state-dir',
    simStateDir(stateDir, slug),
    ...(standby ? ['--standby'] : []),
  ];
}

/** The environment of a simulated domain: the user's, minus the control plane's secrets, plus the state dir. */
export function simDomainEnv(env: NodeJS.ProcessEnv, stateDir: string): NodeJS.ProcessEnv {
  const out: NodeJS.ProcessEnv = { ...env, HARU_STATE_DIR: stateDir };
  for (const key of WITHHELD) delete out[key];
  return out;
}

/**
 * Starts one simulated domain (`haru sim domain`) as its own process group and resolves once its
 * supervisor and every model answer their health checks (`haru sim domain` itself answers only once a
 * standby is asleep and training). Throws with the exit status when the process
 * dies first, or on timeout (the process is stopped then).
 */
export async function startSimDomainProcess(
  deps: SimDomainDeps,
  domain: DomainLayout,
  standby: boolean,
): Promise<ManagedChild> {
  const argv = [
    path.join(deps.projectRoot, 'bin', 'haru.js'),
    ...simDomainArgs(deps.layoutFile, domain.slug, deps.stateDir, standby),
  ];
  const log = createWriteStream(deps.logFile, { flags: 'a' });
  const child = deps.spawn(process.execPath, argv, {
    cwd: deps.projectRoot,
    env: simDomainEnv(deps.env, deps.stateDir),
    stdio: ['ignore', 'pipe', 'pipe'],
    detached: true,
  });
  // `haru sim domain` prints this line once every process answers (and a standby sleeps and trains).
  const readyLine = `simulated domain ${domain.slug} (`;
  let output = '';
  const collect = (chunk: Buffer) => {
    log.write(chunk);
    if (!output.includes(readyLine)) output = (output + chunk.toString()).slice(-4_096);
  };
  child.stdout?.on('data', collect);
  child.stderr?.on('data', collect);
  const managed = manageChild(`simulated domain ${domain.slug}`, child);
  void managed.exited.then(() => log.end());
  deps.onSpawn?.(managed.pid);
  try {
    await waitFor(
      `simulated domain ${domain.slug} (${domain.supervisorUrl}) to start`,
      async () => {
        if (output.includes(readyLine)) return true;
        if (!managed.isRunning()) {
          const exit = await managed.exited;
          throw new ExitedError(domain.slug, exit.code, exit.signal, output);
        }
        return undefined;
      },
      { timeoutMs: deps.readyTimeoutMs ?? 90_000, intervalMs: 100 },
    );
  } catch (err) {
    await managed.stop(5_000);
    throw err;
  }
  return managed;
}

class ExitedError extends WaitAborted {
  constructor(slug: string, code: number | null, signal: string | null, output: string) {
    super(`simulated domain ${slug} exited during start (${signal ?? `exit code ${code}`}):\n${output.trim()}`);
  }
}

/** Hooks of `startSimDomains`: a pid to record as soon as it exists, a domain that ended. */
export interface SimDomainHooks {
  onSpawn(slug: string, pid: number): void;
  onExit(slug: string, child: ManagedChild, exit: { code: number | null; signal: NodeJS.Signals | null }): void;
}

/**
 * Starts every domain at once, the active one awake and the others as standbys, adding each to `children`
 * as soon as it is ready (so the caller can stop whatever started). Throws the first failure once every
 * start has settled.
 */
export async function startSimDomains(
  deps: Omit<SimDomainDeps, 'onSpawn' | 'logFile'> & { logDir: string },
  domains: DomainLayout[],
  activeSlug: string,
  hooks: SimDomainHooks,
  children: Map<string, ManagedChild>,
): Promise<void> {
  const starts = await Promise.allSettled(
    domains.map(async (domain) => {
      const child = await startSimDomainProcess(
        {
          ...deps,
          logFile: path.join(deps.logDir, `sim-${domain.slug}.log`),
          onSpawn: (pid) => hooks.onSpawn(domain.slug, pid),
        },
        domain,
        domain.slug !== activeSlug,
      );
      children.set(domain.slug, child);
      void child.exited.then((exit) => hooks.onExit(domain.slug, child, exit));
    }),
  );
  const failure = starts.find((r): r is PromiseRejectedResult => r.status === 'rejected');
  if (failure) throw failure.reason;
}
