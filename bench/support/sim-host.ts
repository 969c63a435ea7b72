import type { Server } from 'node:http';
import { mkdirSync } from 'node:fs';
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
import { createListenerTable } from '../../supervisor/listeners';
import { createSupervisorMetrics } from '../../supervisor/metrics';
import { createProcessTable } from '../../supervisor/process-group';
import { createTrainingManager, type TrainingManager } from '../../supervisor/training';
import { createVllmClient } from '../../supervisor/vllm';

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
}

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

/** Starts every domain of `layouts` in this process; a domain named in `standby` sleeps and trains. */
export async function startSimHost(opts: {
  layouts: FleetLayout[];
  stateDir: string;
  standby: (fleetSlug: string, domainSlug: string) => boolean;
  wakeDelayMs?: number;
}): Promise<SimHost> {
  const servers: Server[] = [];
  const fakes: FakeVllm[] = [];
  const trainers: TrainingManager[] = [];
  const standbyUrls: string[] = [];
  for (const layout of opts.layouts) {
    for (const domain of layout.domains) {
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
      const vllm = createVllmClient({ timeoutMs: 5_000, wakeTimeoutMs: 300_000 });
      const training = createTrainingManager({
        slots: plan.supervisorConfig.training,
        baseEnv: { ...process.env, HARU_SIM_GPU_STATE: gpuStateDir },
        cwd: dir,
        processTable: createProcessTable(),
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
          listeners: createListenerTable(),
          now: () => new Date(),
          slowMs: 1_000,
        }),
        statusFreshWaitMs: 200,
        training,
        config: plan.supervisorConfig,
        listeners: createListenerTable(),
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
      if (opts.standby(layout.fleet.slug, domain.slug)) standbyUrls.push(`http://127.0.0.1:${plan.supervisorPort}`);
    }
  }
  // Standby posture through the supervisors' own API, as `haru sim domain --standby` does.
  for (const url of standbyUrls) {
    for (const route of ['/v1/vllm/sleep', '/v1/training/start']) {
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
  return {
    domains: servers.length,
    async stop() {
      await Promise.all(trainers.map((t) => t.stopAll(0)));
      for (const s of servers) {
        s.closeAllConnections();
        await new Promise<void>((resolve) => s.close(() => resolve()));
      }
      await Promise.all(fakes.map((f) => f.close()));
    },
  };
}
