import type { SupervisorActionResponse, SupervisorConfig } from '../schemas/supervisor';
import { NoSlotError } from './errors';
import { configuredModels, type InferenceController } from './inference';
import { createKeyedSerializer } from './serial';
import type { TrainingManager } from './training';
import type { VllmClient } from './vllm';

const errorMessage = (err: unknown): string => (err instanceof Error ? err.message : String(err));

/**
 * vLLM and a trainer never hold one GPU's memory at once: an engine woken beside a trainer (or a trainer
 * started beside an awake engine) runs out of memory or slows both. The control plane proves the host at rest
 * before each step (wakeModels re-reads training, restoreStandby starts training only where every model
 * sleeps), but between its read and its request another caller can change the host: an attempt whose step
 * Temporal has already timed out, a second worker after a partition, an operator's request. The supervisor is
 * the one place that sees both, so it refuses the request that would break the rule, and a wake and a training
 * start on one GPU take turns, the check inside the turn (docs/architecture.md §6.4). A training slot's MIG
 * instance is the one its GPU's models share (schemas/supervisor.ts), so it counts as that GPU.
 */
export function createGpuExclusion(deps: {
  config: SupervisorConfig;
  inference: InferenceController;
  training: TrainingManager;
  vllm: Pick<VllmClient, 'isSleeping'>;
}) {
  const models = configuredModels(deps.config);
  // One request per server, named by its base model: a LoRA adapter shares its base model's port.
  const serversOn = (gpu: number) => models.filter((m) => m.gpuIndex === gpu && m.parent === undefined);
  const turn = createKeyedSerializer<number>();

  /** Why a wake on `gpu` must not run now: a trainer there, running or still stopping. */
  function trainerOn(gpu: number): string | null {
    const run = deps.training.status().find((r) => r.gpuIndex === gpu);
    if (!run || (run.state === 'idle' && run.pids.length === 0)) return null;
    const pids = run.pids.length ? `pids ${run.pids.join(',')}` : 'no pids';
    return `training is ${run.state} on GPU ${gpu} (${pids}): refusing to wake vLLM beside it`;
  }

  /** Why training on `gpu` must not start now: an engine there awake, or one that does not answer. */
  async function engineAwakeOn(gpu: number): Promise<string | null> {
    for (const model of serversOn(gpu)) {
      let sleeping: boolean;
      try {
        sleeping = await deps.vllm.isSleeping(model.port);
      } catch (err) {
        return `${model.name} on GPU ${gpu} does not answer (${errorMessage(err)}): refusing to start training beside it`;
      }
      if (!sleeping) return `${model.name} on GPU ${gpu} is awake: refusing to start training beside it`;
    }
    return null;
  }

  /** Runs `act` per GPU in that GPU's turn unless `refusal` names a reason; one response for all. */
  async function perGpu(
    gpus: number[],
    target: (gpu: number) => string[],
    refusal: (gpu: number) => string | null | Promise<string | null>,
    act: (gpu: number) => Promise<SupervisorActionResponse>,
  ): Promise<SupervisorActionResponse> {
    const answers = await Promise.all(
      gpus.map((gpu) =>
        turn(gpu, async (): Promise<SupervisorActionResponse> => {
          const why = await refusal(gpu);
          if (why === null) return act(gpu);
          return { accepted: false, gpuIndexes: [gpu], errors: target(gpu).map((t) => ({ target: t, message: why })) };
        }),
      ),
    );
    const errors = answers.flatMap((a) => a.errors);
    return { accepted: errors.length === 0, gpuIndexes: gpus, errors };
  }

  return {
    /** `inference.wake`, refused per GPU where a trainer runs. Throws NoSlotError for a GPU without models. */
    wake(req: { gpuIndex?: number }): Promise<SupervisorActionResponse> {
      const gpus = [...new Set(deps.inference.select(req.gpuIndex).map((m) => m.gpuIndex))].sort((a, b) => a - b);
      return perGpu(
        gpus,
        (gpu) => models.filter((m) => m.gpuIndex === gpu).map((m) => m.name),
        trainerOn,
        (gpu) => deps.inference.wake({ gpuIndex: gpu }),
      );
    },

    /** `training.start`, refused per GPU where an engine is awake or silent. Throws NoSlotError for an unknown GPU. */
    startTraining(req: { gpuIndex?: number }): Promise<SupervisorActionResponse> {
      const slots =
        req.gpuIndex === undefined
          ? deps.config.training
          : deps.config.training.filter((s) => s.gpuIndex === req.gpuIndex);
      if (req.gpuIndex !== undefined && slots.length === 0) throw new NoSlotError('training', req.gpuIndex);
      return perGpu(
        slots.map((s) => s.gpuIndex),
        (gpu) => [`training/gpu${gpu}`],
        engineAwakeOn,
        (gpu) => deps.training.start({ gpuIndex: gpu }),
      );
    },
  };
}
