/**
 * A whole simulated failure domain: one fake vLLM process per model on the ports of the layout's serving
 * URLs, the real supervisor on the port of the domain's supervisor URL (pointed at the fake nvidia-smi), and
 * the layout's training commands run by that supervisor. Every process is a real child in its own process
 * group, so `kill()` is as abrupt as a host losing power.
 */
import { randomUUID } from 'node:crypto';
import { mkdirSync, readFileSync, rmSync } from 'node:fs';
import path from 'node:path';
import { Agent, type Dispatcher, fetch as undiciFetch } from 'undici';
import type { FleetLayout } from '../schemas/layout';
import type { SupervisorConfig } from '../schemas/supervisor';
import { createSimFaults, type SimFaults } from './domain-faults';
import {
  killProcesses,
  killSimDomain,
  readState,
  SIM_STATE_FILE,
  simDomainMarker,
  type StateFile,
} from './domain-kill';
import { planSimDomain, type SimModelPlan } from './domain-plan';
import { writeInventory, writeJsonAtomic } from './gpu-state';
import {
  answers,
  findMarkedPids,
  hasExited,
  logTail,
  pollUntil,
  REPO_ROOT,
  signalGroup,
  SIM_MARKER_ENV,
  type SimChild,
  spawnLogged,
  tsEntry,
} from './processes';
import { writeControlFile } from './vllm/control';
import type { SimSupervisorTls } from './config';

export { killSimDomain, SIM_STATE_FILE, simDomainMarker, type SimFaults, type SimSupervisorTls };

/** The fake nvidia-smi executable (what HARU_GPU_SMI points at in a simulated domain). */
export const SIM_NVIDIA_SMI = path.join(REPO_ROOT, 'sim/bin/nvidia-smi');
/** The fake trainer: use `["node", "sim/trainer.js"]` (run from the repository root) in layouts. */
export const SIM_TRAINER = path.join(REPO_ROOT, 'sim/trainer.js');

export interface SimDomainOptions {
  layout: FleetLayout;
  domainSlug: string;
  /** Everything the simulated host writes goes here: GPU state, logs, fault controls, relative checkpoint dirs. */
  stateDir: string;
  /** How long each vLLM `/wake_up` takes. */
  wakeDelayMs?: number;
  tokensPerSecond?: number;
  /** Each fake vLLM's `--max-num-seqs` (requests beyond it wait). */
  maxNumSeqs?: number;
  /** Bearer token of the supervisor; without one it serves unauthenticated on 127.0.0.1 only. */
  supervisorToken?: string;
  /** Listen address of the supervisor and the fake vLLMs (`0.0.0.0` needs a token). Default 127.0.0.1. */
  host?: string;
  /**
   * `active` (default): engines awake, no training, as vLLM starts. `standby`: engines put to sleep and
   * training started through the supervisor before this resolves.
   */
  role?: 'active' | 'standby';
  /** SIGTERM-to-SIGKILL grace the supervisor gives training runs on stop(). Default 5 s. */
  shutdownGraceMs?: number;
  /** Give up when a process does not answer within this. Default 60 s. */
  startTimeoutMs?: number;
  /**
   * Start every fake vLLM with `--api-key` this key; the supervisor's config then names it by an environment
   * variable (`SIM_VLLM_API_KEY_ENV`), as an operator's would.
   */
  vllmApiKey?: string;
  /** HTTPS for the supervisor, as `haru supervisor` takes it (`haru sim domain`: simSupervisorTls, sim/config.ts). */
  tls?: SimSupervisorTls;
  /**
   * More environment of the supervisor (a shorter HARU_VLLM_WEDGE_MS, say); what the simulator sets itself (its
   * port, config, GPU tool, token, TLS) wins.
   */
  supervisorEnv?: Record<string, string>;
}

/**
 * The undici Agent the simulator checks its own supervisor with: it does not verify the certificate (that is
 * the worker's job, under the name the layout gives; this is a child it has just spawned on loopback), and
 * presents the client certificate when the supervisor requires one. Throws when it requires one and none is
 * given: the start-up checks could not pass.
 */
function ownSupervisorAgent(tls: SimSupervisorTls | undefined): Agent | undefined {
  if (!tls) return undefined;
  if (!tls.clientCaFile) return new Agent({ connect: { rejectUnauthorized: false } });
  if (!tls.clientCertFile || !tls.clientKeyFile) {
    throw new Error(
      'HARU_SUPERVISOR_TLS_CLIENT_CA_FILE makes the simulated supervisor require client certificates: set ' +
        "HARU_SUPERVISOR_CLIENT_CERT_FILE and HARU_SUPERVISOR_CLIENT_KEY_FILE, the client's certificate the " +
        "simulator's own start-up checks present",
    );
  }
  const cert = readFileSync(tls.clientCertFile);
  const key = readFileSync(tls.clientKeyFile);
  return new Agent({ connect: { rejectUnauthorized: false, cert, key } });
}

/** The supervisor's environment variable holding the fake vLLMs' `--api-key` (with `vllmApiKey`). */
export const SIM_VLLM_API_KEY_ENV = 'HARU_SIM_VLLM_API_KEY';

export interface SimModel extends SimModelPlan {
  pid: number;
  controlFile: string;
  logFile: string;
}

export interface SimDomain {
  domainSlug: string;
  supervisorUrl: string;
  supervisorPid: number;
  /** Resolves when the supervisor process has exited, for whatever reason (stop, kill, crash, `haru sim kill`). */
  supervisorExited: Promise<void>;
  stateDir: string;
  /** HARU_SIM_GPU_STATE of this domain (read by the fake nvidia-smi). */
  gpuStateDir: string;
  models: SimModel[];
  faults: SimFaults;
  /** SIGTERM everything (the supervisor stops training within its grace), wait, SIGKILL leftovers. */
  stop(): Promise<void>;
  /** SIGKILL every process of the domain at once, like a host losing power; resolves when all are gone. */
  kill(): Promise<void>;
}

const fileSafe = (name: string) => name.replace(/[^A-Za-z0-9._-]/g, '_');

/**
 * Starts a simulated domain of `layout` and resolves once every fake vLLM and the supervisor answer.
 * Rejects (with the failing process's log tail) after stopping whatever it started when a process exits or
 * stays silent past `startTimeoutMs`, or when a domain already runs from `stateDir`.
 */
export async function startSimDomain(opts: SimDomainOptions): Promise<SimDomain> {
  const stateDir = path.resolve(opts.stateDir);
  const plan = planSimDomain(opts.layout, opts.domainSlug, stateDir);
  const running = readState(stateDir);
  if (running && findMarkedPids(running.marker).length > 0) {
    throw new Error(
      `a simulated domain already runs from ${stateDir}: stop it, or run \`haru sim kill --state-dir ${stateDir}\``,
    );
  }
  const gpuStateDir = path.join(stateDir, 'gpu');
  const logDir = path.join(stateDir, 'logs');
  const vllmDir = path.join(stateDir, 'vllm');
  rmSync(gpuStateDir, { recursive: true, force: true });
  for (const dir of [logDir, vllmDir]) mkdirSync(dir, { recursive: true });
  writeInventory(gpuStateDir, plan.inventory);

  const marker = randomUUID();
  const host = opts.host ?? '127.0.0.1';
  const baseEnv: NodeJS.ProcessEnv = { ...process.env, HARU_SIM_GPU_STATE: gpuStateDir, [SIM_MARKER_ENV]: marker };
  delete baseEnv.HARU_SUPERVISOR_TOKEN;
  delete baseEnv.HARU_SUPERVISOR_CONFIG;
  const tls = opts.tls;
  for (const name of TLS_ENV) delete baseEnv[name];
  const ownSupervisor = ownSupervisorAgent(tls);
  const children: SimChild[] = [];
  const models: SimModel[] = [];

  for (const m of plan.models) {
    const controlFile = path.join(vllmDir, `${fileSafe(m.name)}.control.json`);
    writeControlFile(controlFile, {});
    const [node, entry] = tsEntry('sim/vllm/main.ts');
    const args = [
      ...entry,
      ...['--model', m.name, '--port', String(m.port), '--host', host, '--gpu-index', String(m.gpuIndex)],
      ...['--gpu-state', gpuStateDir, '--control', controlFile],
      ...['--weights-mib', String(m.weightsMiB), '--kv-cache-mib', String(m.kvCacheMiB)],
      ...['--residue-mib', String(m.residueMiB)],
      ...(opts.wakeDelayMs !== undefined ? ['--wake-delay-ms', String(opts.wakeDelayMs)] : []),
      ...(opts.tokensPerSecond !== undefined ? ['--tokens-per-second', String(opts.tokensPerSecond)] : []),
      ...(opts.vllmApiKey ? ['--api-key', opts.vllmApiKey] : []),
      ...m.loraAdapters.flatMap((name) => ['--lora-module', `${name}=adapters/${name}`]),
      ...(opts.maxNumSeqs !== undefined ? ['--max-num-seqs', String(opts.maxNumSeqs)] : []),
    ];
    const child = spawnLogged(
      `vllm ${m.name}`,
      [node, args],
      baseEnv,
      path.join(logDir, `vllm-${fileSafe(m.name)}.log`),
    );
    children.push(child);
    models.push({ ...m, pid: child.process.pid ?? 0, controlFile, logFile: child.logFile });
  }

  const supervisor = spawnLogged(
    'supervisor',
    tsEntry('supervisor/main.ts'),
    {
      ...baseEnv,
      ...opts.supervisorEnv,
      HARU_SUPERVISOR_CONFIG: JSON.stringify(
        withTrainerSimEnv(withApiKeyRefs(plan.supervisorConfig, opts.vllmApiKey), {
          HARU_SIM_GPU_STATE: gpuStateDir,
          [SIM_MARKER_ENV]: marker,
        }),
      ),
      ...(opts.vllmApiKey ? { [SIM_VLLM_API_KEY_ENV]: opts.vllmApiKey } : {}),
      PORT: String(plan.supervisorPort),
      HARU_SUPERVISOR_HOST: host,
      HARU_GPU_SMI: SIM_NVIDIA_SMI,
      HARU_GPU_VENDOR: 'nvidia',
      HARU_SHUTDOWN_GRACE_MS: String(opts.shutdownGraceMs ?? 5_000),
      // A simulated host runs on a developer's machine, often without a cgroup the supervisor may use (macOS, a
      // container, no root): its fake trainers never leave their group, so tracking by it is said to be enough.
      HARU_TRAINING_ALLOW_PGROUP: '1',
      ...(opts.supervisorToken ? { HARU_SUPERVISOR_TOKEN: opts.supervisorToken } : {}),
      ...(tls && {
        HARU_SUPERVISOR_TLS_CERT_FILE: tls.certFile,
        HARU_SUPERVISOR_TLS_KEY_FILE: tls.keyFile,
        ...(tls.clientCaFile && { HARU_SUPERVISOR_TLS_CLIENT_CA_FILE: tls.clientCaFile }),
      }),
    },
    path.join(logDir, 'supervisor.log'),
  );
  children.push(supervisor);
  // With a certificate the supervisor serves HTTPS, and with a client CA it requires client certificates
  // (supervisor/tls.ts), as on a real host.
  const supervisorUrl = `${tls ? 'https' : 'http'}://127.0.0.1:${plan.supervisorPort}`;
  const checkpointDirs = plan.supervisorConfig.training.map((t) => t.checkpointDir);
  writeJsonAtomic(path.join(stateDir, SIM_STATE_FILE), {
    marker,
    pids: children.map((c) => c.process.pid ?? 0),
    checkpointDirs,
    supervisorUrl,
  } satisfies StateFile);

  const killAll = () => killProcesses(children, marker, checkpointDirs);
  try {
    await waitReady(
      children,
      [...models.map((m) => `http://127.0.0.1:${m.port}/health`), `${supervisorUrl}/healthz`],
      opts.startTimeoutMs ?? 60_000,
      ownSupervisor,
    );
    if (opts.role === 'standby') await becomeStandby(supervisorUrl, opts.supervisorToken, ownSupervisor);
  } catch (err) {
    await killAll();
    rmSync(path.join(stateDir, SIM_STATE_FILE), { force: true });
    throw err;
  }

  const faults = createSimFaults(
    plan.domain.slug,
    models.map((m) => ({ ...m, child: children.find((c) => c.process.pid === m.pid)! })),
    gpuStateDir,
  );

  let ended: Promise<void> | null = null;
  return {
    domainSlug: plan.domain.slug,
    supervisorUrl,
    supervisorPid: supervisor.process.pid ?? 0,
    supervisorExited: supervisor.exited,
    stateDir,
    gpuStateDir,
    models,
    faults,
    stop() {
      ended ??= stopProcesses(children, supervisor, opts.shutdownGraceMs ?? 5_000)
        .then(killAll)
        .finally(() => rmSync(path.join(stateDir, SIM_STATE_FILE), { force: true }));
      return ended;
    },
    kill() {
      ended ??= killAll().finally(() => rmSync(path.join(stateDir, SIM_STATE_FILE), { force: true }));
      return ended;
    },
  };
}

/** The supervisor's TLS variables: a simulated domain sets them from its `tls`, never inherits them. */
const TLS_ENV = [
  'HARU_SUPERVISOR_TLS_CERT_FILE',
  'HARU_SUPERVISOR_TLS_KEY_FILE',
  'HARU_SUPERVISOR_TLS_CLIENT_CA_FILE',
  'HARU_SUPERVISOR_CLIENT_CERT_FILE',
  'HARU_SUPERVISOR_CLIENT_KEY_FILE',
] as const;

/** Waits until every URL answers 2xx; fails early with the log of a process that exited. */
async function waitReady(
  children: SimChild[],
  urls: string[],
  timeoutMs: number,
  dispatcher: Dispatcher | undefined,
): Promise<void> {
  const exited = new Set<SimChild>();
  for (const child of children) void child.exited.then(() => exited.add(child));
  const pending = new Set(urls);
  const ok = await pollUntil(
    async () => {
      if (exited.size) return true;
      await Promise.all([...pending].map(async (url) => (await answers(url, { dispatcher })) && pending.delete(url)));
      return pending.size === 0;
    },
    timeoutMs,
    100,
  );
  const dead = [...exited][0];
  if (dead) {
    const code = dead.process.exitCode ?? dead.process.signalCode;
    throw new Error(`simulated ${dead.name} exited during start-up (${code}):\n${logTail(dead.logFile)}`);
  }
  if (!ok) throw new Error(`simulated domain did not answer within ${timeoutMs} ms: ${[...pending].join(', ')}`);
}

/** Puts every engine to sleep and starts training, through the supervisor's own API. */
async function becomeStandby(
  supervisorUrl: string,
  token: string | undefined,
  dispatcher: Dispatcher | undefined,
): Promise<void> {
  const headers = { 'content-type': 'application/json', ...(token ? { authorization: `Bearer ${token}` } : {}) };
  for (const route of ['/v1/vllm/sleep', '/v1/training/start']) {
    const init = { method: 'POST', headers, body: '{}' };
    const res = dispatcher
      ? await undiciFetch(`${supervisorUrl}${route}`, { ...init, dispatcher })
      : await fetch(`${supervisorUrl}${route}`, init);
    const body = (await res.json()) as { accepted?: boolean };
    if (!res.ok || !body.accepted) throw new Error(`standby set-up failed at ${route}: ${JSON.stringify(body)}`);
  }
}

/** SIGTERM to the supervisor (it stops training within its grace), then the engines; SIGKILL what lingers. */
async function stopProcesses(children: SimChild[], supervisor: SimChild, graceMs: number): Promise<void> {
  const stopOne = async (child: SimChild, waitMs: number) => {
    if (hasExited(child)) return; // its pid may belong to someone else by now
    signalGroup(child.process.pid, 'SIGTERM');
    const timer = setTimeout(() => !hasExited(child) && signalGroup(child.process.pid, 'SIGKILL'), waitMs);
    await child.exited;
    clearTimeout(timer);
  };
  await stopOne(supervisor, graceMs + 10_000);
  await Promise.all(children.filter((c) => c !== supervisor).map((c) => stopOne(c, 5_000)));
}

/** The config with every model's `apiKey` naming SIM_VLLM_API_KEY_ENV, when the fakes run with a key. */
/**
 * The config with `simEnv` added to every training slot's `env`: a trainer inherits none of the supervisor's
 * variables beyond its base ones (supervisor/training-env.ts), and the fake trainer needs the simulated GPU
 * state, and the domain's marker so that `haru sim kill` finds it.
 */
function withTrainerSimEnv(config: SupervisorConfig, simEnv: Record<string, string>): SupervisorConfig {
  return { ...config, training: config.training.map((slot) => ({ ...slot, env: { ...slot.env, ...simEnv } })) };
}

function withApiKeyRefs(config: SupervisorConfig, apiKey: string | undefined): SupervisorConfig {
  if (!apiKey) return config;
  return {
    ...config,
    inference: config.inference.map((slot) => ({
      ...slot,
      models: slot.models.map((m) => ({ ...m, apiKey: { env: SIM_VLLM_API_KEY_ENV } })),
    })),
  };
}
