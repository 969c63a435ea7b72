import { spawn } from 'node:child_process';
import type { Server } from 'node:http';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import type { FleetLayout } from '../../schemas/layout';
import { planSimDomain } from '../../sim/domain-plan';
import { listLiveHolders, readInventory, writeInventory } from '../../sim/gpu-state';
import { createFakeVllm, type FakeVllm } from '../../sim/vllm/server';
import { createApp } from '../../supervisor/app';
import { createGpuReader, type Exec } from '../../supervisor/gpu';
import { NVIDIA_APPS_QUERY, NVIDIA_GPU_QUERY } from '../../supervisor/gpu/nvidia';
import { createObservedInference } from '../../supervisor/status-view';
import { silentLogger } from '../../lib/logger';
import type { ListenerTable } from '../../supervisor/listeners';
import { createSupervisorMetrics } from '../../supervisor/metrics';
import { createProcessTable } from '../../supervisor/process-group';
import { createTrainingManager, type TrainingManager } from '../../supervisor/training';
import { createVllmClient } from '../../supervisor/vllm';
import { signalPid } from '../../sim/processes';
import { childPids } from './cpu';

/**
 * Many simulated domains in this one process: for each, the simulator's fake vLLM servers and the real
 * supervisor app (the same factories `haru sim domain` runs as separate processes), with the fake
 * nvidia-smi's two queries answered in process from the same GPU state files. Trainers stay real child
 * processes. Meant for benchmarks with hundreds of domains, where a process per server would measure the
 * machine's process count rather than Haru.
 */
export interface SimHost {
  domains: number;
  stop(): Promise<void>;
  /**
   * The host dies: every port it serves refuses at once, nothing is shut down in order (a process host is
   * SIGKILLed with its trainers; one in this process drops every connection and listener, its trainers killed).
   */
  kill(): Promise<void>;
}

/**
 * How often a simulated host reads its fake vLLM servers' admin endpoints, however often it is polled: longer
 * than the benchmarks' poll intervals, so a status read costs this process no request of its own. The fakes
 * change state only when told to sleep or wake, which the supervisor records as it proves it.
 */
const SIM_VLLM_READ_INTERVAL_MS = 5_000;

/** The fake nvidia-smi's answer to Haru's two queries, computed from the domain's GPU state directory. */
function inProcessNvidiaSmi(gpuStateDir: string): Exec {
  return async (_file, args) => {
    const inventory = readInventory(gpuStateDir);
    const holders = listLiveHolders(gpuStateDir);
    const query = args.join(' ');
    let lines: string[];
    if (query === NVIDIA_GPU_QUERY.join(' ')) {
      lines = inventory.gpus.map((g) => {
        const used =
          inventory.baselineMiB + holders.filter((h) => h.gpuIndex === g.index).reduce((s, h) => s + h.usedMiB, 0);
        return `${g.index}, ${g.uuid}, ${used}, ${g.totalMiB}`;
      });
    } else if (query === NVIDIA_APPS_QUERY.join(' ')) {
      const uuid = new Map(inventory.gpus.map((g) => [g.index, g.uuid]));
      lines = holders
        .filter((h) => uuid.has(h.gpuIndex))
        .sort((a, b) => a.gpuIndex - b.gpuIndex || a.pid - b.pid)
        .map((h) => `${h.pid}, ${h.usedMiB}, ${uuid.get(h.gpuIndex)}`);
    } else {
      return { code: 2, signal: null, stdout: '', stderr: `unsupported query ${query}` };
    }
    return { code: 0, signal: null, stdout: lines.map((l) => `${l}\n`).join(''), stderr: '' };
  };
}

/**
 * Who serves each fake vLLM's port: this process (it listens and writes their VRAM under its own pid). The
 * supervisor's own table finds that out per status read by scanning every process's fds in /proc, which
 * with hundreds of servers and sockets in one process costs the host more than everything else it does
 * per poll, and would make the benchmark measure the scan rather than Haru. `haru sim domain` and real
 * hosts keep the scan.
 */
function inProcessListeners(ports: ReadonlySet<number>): ListenerTable {
  return {
    canSeeProcesses: true,
    servingPids: (port) => (ports.has(port) ? [process.pid] : []),
    stoppedOf: () => [], // a process answering this call is not stopped
  };
}

/**
 * Starts the domains of `layouts` in this process (those `runs` names, default every one: a region's hosts
 * and the rest can then die apart); a domain named in `standby` sleeps and trains.
 */
export async function startSimHost(opts: {
  layouts: FleetLayout[];
  stateDir: string;
  standby: (fleetSlug: string, domainSlug: string) => boolean;
  runs?: (fleetSlug: string, domainSlug: string) => boolean;
  wakeDelayMs?: number;
}): Promise<SimHost> {
  const servers: Server[] = [];
  const fakes: FakeVllm[] = [];
  const trainers: TrainingManager[] = [];
  const standbyUrls: { url: string; trains: boolean }[] = [];
  // One walk of /proc serves every training manager of this process for 250 ms: hundreds of hosts here.
  const processTable = createProcessTable({ maxScanAgeMs: 250 });
  for (const layout of opts.layouts) {
    for (const domain of layout.domains) {
      if (opts.runs && !opts.runs(layout.fleet.slug, domain.slug)) continue;
      const dir = path.join(opts.stateDir, layout.fleet.slug, domain.slug);
      const plan = planSimDomain(layout, domain.slug, dir);
      const gpuStateDir = path.join(dir, 'gpu');
      mkdirSync(gpuStateDir, { recursive: true });
      writeInventory(gpuStateDir, plan.inventory);
      for (const m of plan.models) {
        const fake = createFakeVllm({
          model: m.name,
          port: m.port,
          gpuIndex: m.gpuIndex,
          gpuStateDir,
          weightsMiB: m.weightsMiB,
          kvCacheMiB: m.kvCacheMiB,
          wakeDelayMs: opts.wakeDelayMs ?? 0,
          onCrash: () => undefined,
        });
        await fake.listen();
        fakes.push(fake);
      }
      const listeners = inProcessListeners(new Set(plan.models.map((m) => m.port)));
      const vllm = createVllmClient({ timeoutMs: 5_000, wakeTimeoutMs: 300_000 });
      const training = createTrainingManager({
        slots: plan.supervisorConfig.training,
        baseEnv: { ...process.env, HARU_SIM_GPU_STATE: gpuStateDir },
        cwd: dir,
        processTable,
        now: () => new Date(),
        logger: silentLogger,
        output: 'ignore',
        orphanGraceMs: 10_000,
      });
      trainers.push(training);
      const app = createApp({
        token: null,
        ...createObservedInference({
          config: plan.supervisorConfig,
          vllm,
          logger: silentLogger,
          listeners,
          now: () => new Date(),
          slowMs: 1_000,
          // Each status read would otherwise make three requests to this process's own fake vLLM servers: the
          // benchmark measures Haru's polls, not the simulator's.
          minReadIntervalMs: SIM_VLLM_READ_INTERVAL_MS,
        }),
        training,
        config: plan.supervisorConfig,
        listeners,
        gpu: createGpuReader({ vendor: 'nvidia', exec: inProcessNvidiaSmi(gpuStateDir), timeoutMs: 10_000 }),
        vllm,
        metrics: createSupervisorMetrics({ trainingStatus: () => training.status() }),
        logger: silentLogger,
        now: () => new Date(),
        defaultStopGraceMs: 30_000,
      });
      servers.push(
        await new Promise<Server>((resolve, reject) => {
          const s = app.listen(plan.supervisorPort, '127.0.0.1', () => resolve(s));
          s.once('error', reject);
        }),
      );
      if (opts.standby(layout.fleet.slug, domain.slug))
        standbyUrls.push({
          url: `http://127.0.0.1:${plan.supervisorPort}`,
          trains: domain.slots.some((slot) => slot.kind === 'training'),
        });
    }
  }
  // Standby posture through the supervisors' own API, as `haru sim domain --standby` does.
  for (const { url, trains } of standbyUrls) {
    for (const route of trains ? ['/v1/vllm/sleep', '/v1/training/start'] : ['/v1/vllm/sleep']) {
      const res = await fetch(`${url}${route}`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: '{}',
      });
      const body = (await res.json()) as { accepted?: boolean };
      if (!res.ok || !body.accepted)
        throw new Error(`standby set-up failed at ${url}${route}: ${JSON.stringify(body)}`);
    }
  }
  const closeServers = async () => {
    for (const s of servers) {
      s.closeAllConnections();
      await new Promise<void>((resolve) => s.close(() => resolve()));
    }
    await Promise.all(fakes.map((f) => f.close()));
  };
  return {
    domains: servers.length,
    async stop() {
      await Promise.all(trainers.map((t) => t.stopAll(0)));
      await closeServers();
    },
    async kill() {
      // Every listener and connection goes first, in one turn of the loop, so no port answers after another
      // has begun refusing; the trainers die after (SIGKILL, no grace).
      const closed = closeServers();
      await Promise.all([closed, ...trainers.map((t) => t.stopAll(0))]);
    },
  };
}

/** What `startSimHostProcess` hands the child process (a JSON file): `startSimHost`'s options as data. */
interface SimHostSpec {
  layouts: FleetLayout[];
  stateDir: string;
  /** `fleet/domain` of each domain that starts as a standby. */
  standby: string[];
  /** `fleet/domain` of each domain this host serves; null: every domain of `layouts`. */
  runs: string[] | null;
  wakeDelayMs?: number;
}

/** A sim host in a child process of its own (its pid, so its CPU can be told apart from the benchmark's). */
export interface SimHostProcess extends SimHost {
  pid: number;
}

/**
 * `startSimHost` in a process of its own (this file run by tsx), for benchmarks whose simulated hosts would
 * otherwise share the benchmark's event loop and CPU figures: with 1,000 fleets they need a core of their own.
 */
export async function startSimHostProcess(
  opts: Parameters<typeof startSimHost>[0] & { nodeArgs?: string[] },
): Promise<SimHostProcess> {
  const spec: SimHostSpec = {
    layouts: opts.layouts,
    stateDir: opts.stateDir,
    standby: opts.layouts.flatMap((l) =>
      l.domains.filter((d) => opts.standby(l.fleet.slug, d.slug)).map((d) => `${l.fleet.slug}/${d.slug}`),
    ),
    runs: opts.runs
      ? opts.layouts.flatMap((l) =>
          l.domains.filter((d) => opts.runs!(l.fleet.slug, d.slug)).map((d) => `${l.fleet.slug}/${d.slug}`),
        )
      : null,
    wakeDelayMs: opts.wakeDelayMs,
  };
  // Named by the first domain it serves, so several sim host processes can share one state directory.
  const specFile = path.join(
    opts.stateDir,
    `sim-host-${(spec.runs?.[0] ?? opts.layouts[0]?.fleet.slug ?? 'empty').replace('/', '-')}.json`,
  );
  writeFileSync(specFile, JSON.stringify(spec));
  const child = spawn(
    process.execPath,
    [...(opts.nodeArgs ?? []), '-r', require.resolve('tsx/cjs'), __filename, specFile],
    {
      stdio: ['ignore', 'pipe', 'inherit'],
    },
  );
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const domains = await new Promise<number>((resolve, reject) => {
    let out = '';
    child.stdout!.on('data', (chunk: Buffer) => {
      out += chunk.toString();
      const ready = /^ready (\d+)$/m.exec(out);
      if (ready) resolve(Number(ready[1]));
    });
    void exited.then(() => reject(new Error(`sim host exited before it was ready:\n${out}`)));
  });
  return {
    pid: child.pid!,
    domains,
    async stop() {
      if (child.exitCode !== null || child.signalCode !== null) return;
      child.kill('SIGTERM');
      await exited;
    },
    async kill() {
      if (child.exitCode !== null || child.signalCode !== null) return;
      // Its trainers (children, each leading a process group of its own) die with it, as on a host that died.
      const doomed = [child.pid!, ...descendantsOf(child.pid!)];
      for (const pid of doomed) signalPid(pid, 'SIGKILL');
      await exited;
    },
  };
}

/** Every process below `pid` (children, theirs, ...), read from /proc. */
function descendantsOf(pid: number): number[] {
  const children = childPids(pid);
  return [...children, ...children.flatMap(descendantsOf)];
}

if (require.main === module) {
  const spec = JSON.parse(readFileSync(process.argv[2]!, 'utf8')) as SimHostSpec;
  const standby = new Set(spec.standby);
  const runs = spec.runs ? new Set(spec.runs) : null;
  void startSimHost({
    ...spec,
    standby: (f, d) => standby.has(`${f}/${d}`),
    runs: runs ? (f, d) => runs.has(`${f}/${d}`) : undefined,
  }).then(
    (host) => {
      process.stdout.write(`ready ${host.domains}\n`);
      process.once('SIGTERM', () => void host.stop().then(() => process.exit(0)));
    },
    (err: unknown) => {
      process.stderr.write(`sim host failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
      process.exit(1);
    },
  );
}
