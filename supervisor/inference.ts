import type { SleepLevel } from '../schemas/enums';
import type { SleepMode, SupervisorActionResponse, SupervisorConfig } from '../schemas/supervisor';
import { NoSlotError } from './errors';
import type { Logger } from '../lib/logger';
import { sumSamples } from './prometheus-text';
import { createKeyedSerializer } from './serial';
import { type VllmClient, VllmError } from './vllm';
import { supportsSleepWaitMode } from '../lib/vllm-version';

/** One configured model with where it runs. */
export interface ConfiguredModel {
  name: string;
  port: number;
  gpuIndex: number;
  sleepLevel: SleepLevel;
  /** For a LoRA adapter: the served name of the base model whose server loads it. */
  parent?: string;
}

/**
 * Flattens the config's inference slots into models, each server's LoRA adapters after it (same port: a sleep or
 * wake of the adapter finds its server already in that state and leaves it).
 */
export function configuredModels(config: SupervisorConfig): ConfiguredModel[] {
  return config.inference.flatMap((slot) =>
    slot.models.flatMap((m) => {
      const base = { name: m.name, port: m.port, gpuIndex: slot.gpuIndex, sleepLevel: slot.sleepLevel };
      return [base, ...(m.loraAdapters ?? []).map((name) => ({ ...base, name, parent: m.name }))];
    }),
  );
}

/** How often, and how far apart, a prefix-cache reset answered `{"success": false}` is tried again after a wake. */
const PREFIX_RESET_ATTEMPTS = 20;
const PREFIX_RESET_PAUSE_MS = 100;

const errorMessage = (err: unknown) => (err instanceof Error ? err.message : String(err));

/**
 * Sleep, wake and status of the vLLM servers on this host. Every action proves its effect by re-reading
 * `/is_sleeping` afterwards: a 200 from vLLM is never taken as proof. Models on one GPU are handled one
 * after another, and actions on one GPU never overlap (no two wakes race for the same VRAM, a retried wake
 * waits for the first); GPUs are handled in parallel.
 */
export function createInferenceController(deps: {
  config: SupervisorConfig;
  vllm: VllmClient;
  logger: Logger;
  /** Told each sleep state an action proved, so the status view does not lag behind it. */
  onProvedSleeping?: (model: string, sleeping: boolean) => void;
  /** Told when a sleep or wake starts (true) and ends (false) on a GPU: its engines pause meanwhile. */
  onGpuAction?: (gpuIndex: number, isRunning: boolean) => void;
}) {
  const models = configuredModels(deps.config);
  const { vllm, logger } = deps;
  /** Level of this process's last sleep per model: the fallback when vLLM's metrics do not say. */
  const lastSleepLevel = new Map<string, SleepLevel>();
  /** Models woken whose prefix cache is not reset yet. */
  const pendingReset = new Set<string>();
  /** Sleep and wake of one GPU never overlap, even across requests. */
  const serial = createKeyedSerializer<number>();

  function select(gpuIndex: number | undefined): ConfiguredModel[] {
    if (gpuIndex === undefined) return models;
    const selected = models.filter((m) => m.gpuIndex === gpuIndex);
    if (selected.length === 0) throw new NoSlotError('inference', gpuIndex);
    return selected;
  }

  async function perGpu(
    selected: ConfiguredModel[],
    action: (model: ConfiguredModel) => Promise<void>,
  ): Promise<SupervisorActionResponse> {
    const gpus = [...new Set(selected.map((m) => m.gpuIndex))].sort((a, b) => a - b);
    const errors: SupervisorActionResponse['errors'] = [];
    await Promise.all(
      gpus.map((gpu) =>
        serial(gpu, async () => {
          deps.onGpuAction?.(gpu, true);
          for (const model of selected.filter((m) => m.gpuIndex === gpu)) {
            try {
              await action(model);
            } catch (err) {
              errors.push({ target: model.name, message: errorMessage(err) });
            }
          }
          deps.onGpuAction?.(gpu, false);
        }),
      ),
    );
    return { accepted: errors.length === 0, gpuIndexes: gpus, errors };
  }

  /** The level a sleeping server slept at: vLLM's `engine_sleep_state` gauge, else what we asked, else the slot's. */
  async function sleptLevel(model: ConfiguredModel): Promise<SleepLevel> {
    try {
      const samples = await vllm.metrics(model.port);
      if (sumSamples(samples, 'vllm:engine_sleep_state', { sleep_state: 'discard_all' })) return 2;
      if (sumSamples(samples, 'vllm:engine_sleep_state', { sleep_state: 'weights_offloaded' })) return 1;
    } catch {
      // metrics are a hint only
    }
    return lastSleepLevel.get(model.name) ?? model.sleepLevel;
  }

  /**
   * `wait` when asked and the server's vLLM reads it (its `/version`; an older one would silently abort), else
   * vLLM's default (abort).
   */
  async function sleepModeOf(model: ConfiguredModel, asked: SleepMode | undefined): Promise<'wait' | undefined> {
    if (asked !== 'wait') return undefined;
    const version = await vllm.version(model.port).catch(() => null);
    if (supportsSleepWaitMode(version)) return 'wait';
    logger.info('sleep mode=wait not supported, sleeping with vLLM default (abort)', {
      model: model.name,
      vllmVersion: version,
    });
    return undefined;
  }

  async function sleepOne(model: ConfiguredModel, level: SleepLevel, asked: SleepMode | undefined): Promise<void> {
    if (await vllm.isSleeping(model.port)) return;
    const mode = await sleepModeOf(model, asked);
    try {
      await vllm.sleep(model.port, level, mode);
    } catch (err) {
      // An engine running in-process (VLLM_ENABLE_V1_MULTIPROCESSING=0) refuses `wait` with a 500
      // (vllm/v1/engine/core.py `pause_scheduler` raises ValueError): sleep as vLLM would by default.
      if (!(mode === 'wait' && err instanceof VllmError && err.status === 500)) throw err;
      logger.warn('sleep mode=wait refused, sleeping with vLLM default (abort)', {
        model: model.name,
        error: err.message,
      });
      await vllm.sleep(model.port, level);
    }
    if (!(await vllm.isSleeping(model.port))) {
      throw new Error(`${model.name} still reports awake after POST /sleep?level=${level} answered 200`);
    }
    lastSleepLevel.set(model.name, level);
    deps.onProvedSleeping?.(model.name, true);
    logger.info('model asleep', {
      model: model.name,
      gpuIndex: model.gpuIndex,
      sleepLevel: level,
      mode: mode ?? 'abort',
    });
  }

  async function wakeOne(model: ConfiguredModel): Promise<void> {
    if (!(await vllm.isSleeping(model.port))) {
      if (pendingReset.has(model.name)) await resetPrefixCache(model);
      return;
    }
    const level = await sleptLevel(model);
    if (level === 2) {
      // Level 2 discarded the weights: bring the weight buffers back, reload them, then the KV cache,
      // and drop prefix-cache entries computed with the old weights.
      await vllm.wakeUp(model.port, ['weights']);
      await vllm.collectiveRpc(model.port, 'reload_weights');
      await vllm.wakeUp(model.port, ['kv_cache']);
    } else {
      await vllm.wakeUp(model.port);
    }
    if (await vllm.isSleeping(model.port)) {
      throw new Error(`${model.name} still reports sleeping after POST /wake_up answered 200`);
    }
    lastSleepLevel.delete(model.name);
    pendingReset.add(model.name);
    await resetPrefixCache(model);
    deps.onProvedSleeping?.(model.name, false);
    logger.info('model awake', { model: model.name, gpuIndex: model.gpuIndex, sleepLevel: level });
  }

  /**
   * Drops every cached prefix after a wake, at any level: prefixes computed before the sleep are not to be
   * trusted (vLLM has reused them across a sleep). Retried while vLLM answers `{"success": false}`; a model
   * whose reset never succeeded stays pending, so a repeated wake of the now-awake model tries it again.
   */
  async function resetPrefixCache(model: ConfiguredModel): Promise<void> {
    for (let attempt = 1; attempt <= PREFIX_RESET_ATTEMPTS; attempt += 1) {
      if (await vllm.resetPrefixCache(model.port)) {
        pendingReset.delete(model.name);
        return;
      }
      await new Promise((resolve) => setTimeout(resolve, PREFIX_RESET_PAUSE_MS));
    }
    throw new Error(
      `${model.name} answered {"success": false} to POST /reset_prefix_cache ${PREFIX_RESET_ATTEMPTS} times after its wake`,
    );
  }

  return {
    models,
    /** Throws NoSlotError when `gpuIndex` has no inference slot. */
    select,
    /**
     * Puts the selected models to sleep (level from the request, else the slot's; `mode` as `sleepModeOf`) and
     * proves each asleep.
     * Already-sleeping models are left alone. Throws NoSlotError; per-model failures go to `errors`.
     */
    sleep: (req: { gpuIndex?: number; level?: SleepLevel; mode?: SleepMode }) =>
      perGpu(select(req.gpuIndex), (m) => sleepOne(m, req.level ?? m.sleepLevel, req.mode)),
    /** Wakes the selected models (level-2 sequence when they slept at level 2) and proves each awake. */
    wake: (req: { gpuIndex?: number }) => perGpu(select(req.gpuIndex), wakeOne),
  };
}
export type InferenceController = ReturnType<typeof createInferenceController>;
