import { createHash } from 'node:crypto';
import path from 'node:path';
import type { DomainLayout, FleetLayout } from '../schemas/layout';
import type { SupervisorConfig } from '../schemas/supervisor';
import type { SimGpuInventory } from './gpu-state';

/** Every simulated GPU is an 80 GB H100 as nvidia-smi reports it. */
export const SIM_GPU_NAME = 'NVIDIA H100 80GB HBM3';
export const SIM_GPU_TOTAL_MIB = 81_559;
/** vLLM's default `--gpu-memory-utilization`: the share of a GPU the engines on it take when awake. */
const GPU_MEMORY_UTILIZATION = 0.9;
/**
 * What each sleeping engine keeps on its GPU: CUDA context plus CUDA graph pools, which vLLM's sleep mode does not
 * free (1-7 GB per GPU on real hosts). Two asleep on one GPU hold more than 10% of it between them.
 */
export const SIM_RESIDUE_MIB = 4_500;

/** One fake vLLM to run: where it listens and how much VRAM it takes awake. */
export interface SimModelPlan {
  name: string;
  gpuIndex: number;
  port: number;
  servingUrl: string;
  weightsMiB: number;
  kvCacheMiB: number;
  residueMiB: number;
  /** Served names of the LoRA adapters this server loads: the slot's other models on the same serving URL. */
  loraAdapters: string[];
}

/** What a simulated domain consists of, derived from the layout alone. */
export interface SimDomainPlan {
  domain: DomainLayout;
  supervisorPort: number;
  inventory: SimGpuInventory;
  models: SimModelPlan[];
  /** The supervisor's config: model ports from the serving URLs, checkpoint dirs resolved under the state dir. */
  supervisorConfig: SupervisorConfig;
}

/** The explicit port of `url` (a layout's URL without a port cannot be simulated). */
function portOf(url: string, what: string): number {
  const port = new URL(url).port;
  if (!port) throw new Error(`${what} ${url} has no explicit port: the simulator listens on the URL's port`);
  return Number(port);
}

/** A stable nvidia-smi style UUID for GPU `index` of domain `slug`. */
export function simGpuUuid(slug: string, index: number): string {
  const h = createHash('sha1').update(`${slug}/${index}`).digest('hex');
  return `GPU-${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20, 32)}`;
}

/** Weights from the size in the model's name (`llama-70b` ≈ 70e9 bf16 parameters), else 2 GiB. */
function weightsFromName(name: string): number {
  const match = /(\d+(?:\.\d+)?)\s*b\b/i.exec(name.replace(/[-_]/g, ' '));
  return match ? Math.round(Number(match[1]) * 2 * 1024) : 2_048;
}

/**
 * Derives a simulated domain from `layout`: one GPU per slot GPU index, one fake vLLM per model (the engines
 * on a GPU share 90% of it, weights sized from the model name and capped at half their share), and the
 * supervisor config. Relative checkpoint dirs resolve under `stateDir`, so a state dir holds everything a
 * simulated host writes. Throws for an unknown domain or a URL without a port.
 */
export function planSimDomain(layout: FleetLayout, domainSlug: string, stateDir: string): SimDomainPlan {
  const domain = layout.domains.find((d) => d.slug === domainSlug);
  if (!domain) {
    throw new Error(
      `domain "${domainSlug}" is not in fleet "${layout.fleet.slug}" (domains: ${layout.domains.map((d) => d.slug).join(', ')})`,
    );
  }
  const gpuIndexes = [...new Set(domain.slots.map((s) => s.gpuIndex))].sort((a, b) => a - b);
  const inventory: SimGpuInventory = {
    gpus: gpuIndexes.map((index) => ({
      index,
      uuid: simGpuUuid(domain.slug, index),
      name: SIM_GPU_NAME,
      totalMiB: SIM_GPU_TOTAL_MIB,
    })),
    mig: null,
    baselineMiB: 4,
    fault: null,
  };
  const models: SimModelPlan[] = [];
  const config: SupervisorConfig = { inference: [], training: [] };
  for (const slot of domain.slots) {
    if (slot.kind === 'training') {
      config.training.push({
        gpuIndex: slot.gpuIndex,
        command: slot.command,
        checkpointDir: path.resolve(stateDir, slot.checkpointDir),
        ...(slot.env ? { env: slot.env } : {}),
      });
      continue;
    }
    // Models of a slot on one serving URL are one vLLM server: the first is its base, the others its LoRA adapters.
    const servers = slot.models.filter((m, k) => slot.models.findIndex((x) => x.servingUrl === m.servingUrl) === k);
    const adaptersOf = (base: string, url: string) =>
      slot.models.filter((x) => x.servingUrl === url && x.name !== base).map((x) => x.name);
    const utilization = GPU_MEMORY_UTILIZATION / servers.length;
    const share = Math.floor(SIM_GPU_TOTAL_MIB * utilization) - SIM_RESIDUE_MIB;
    const slotModels = servers.map((m) => {
      const weightsMiB = Math.min(weightsFromName(m.name), Math.floor(share / 2));
      return {
        name: m.name,
        gpuIndex: slot.gpuIndex,
        port: portOf(m.servingUrl, `servingUrl of model "${m.name}"`),
        servingUrl: m.servingUrl,
        weightsMiB,
        kvCacheMiB: share - weightsMiB,
        residueMiB: SIM_RESIDUE_MIB,
        loraAdapters: adaptersOf(m.name, m.servingUrl),
      };
    });
    models.push(...slotModels);
    config.inference.push({
      gpuIndex: slot.gpuIndex,
      sleepLevel: slot.sleepLevel,
      // As `--gpu-memory-utilization` would be set for engines sharing a GPU: what a wake needs back.
      models: slotModels.map((m) => ({
        name: m.name,
        port: m.port,
        gpuMemoryUtilization: utilization,
        ...(m.loraAdapters.length ? { loraAdapters: m.loraAdapters } : {}),
      })),
    });
  }
  return {
    domain,
    supervisorPort: portOf(domain.supervisorUrl, `supervisorUrl of domain "${domain.slug}"`),
    inventory,
    models,
    supervisorConfig: config,
  };
}
