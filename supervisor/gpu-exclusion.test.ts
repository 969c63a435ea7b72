import type { SupervisorActionResponse, TrainingRunStatus } from '../schemas/supervisor';
import { supervisorConfigSchema } from '../schemas/supervisor';
import { NoSlotError } from './errors';
import { createGpuExclusion } from './gpu-exclusion';
import { configuredModels, type InferenceController } from './inference';
import type { TrainingManager } from './training';

const config = supervisorConfigSchema.parse({
  inference: [
    { gpuIndex: 0, models: [{ name: 'a', port: 8001, loraAdapters: ['a-lora'] }] },
    { gpuIndex: 1, models: [{ name: 'b', port: 8002 }] },
  ],
  training: [
    { gpuIndex: 0, command: ['train'], checkpointDir: 'ck0' },
    { gpuIndex: 1, command: ['train'], checkpointDir: 'ck1' },
  ],
});

const ok = (gpu: number): SupervisorActionResponse => ({ accepted: true, gpuIndexes: [gpu], errors: [] });

/** A host whose engines sleep or not per port, whose trainers run or not per GPU; it records what it was asked. */
function host() {
  const sleeping = new Map<number, boolean | Error>([
    [8001, true],
    [8002, true],
  ]);
  const runs = new Map<number, TrainingRunStatus['state']>();
  const calls: string[] = [];
  let wakeGate: Promise<void> = Promise.resolve();
  const models = configuredModels(config);
  const inference = {
    models,
    select: (gpu?: number) => models.filter((m) => gpu === undefined || m.gpuIndex === gpu),
    async wake({ gpuIndex }: { gpuIndex?: number }) {
      calls.push(`wake:${gpuIndex}`);
      await wakeGate;
      for (const m of models) if (m.gpuIndex === gpuIndex) sleeping.set(m.port, false);
      return ok(gpuIndex!);
    },
  } as unknown as InferenceController;
  const training = {
    status: () =>
      config.training.map((s) => ({
        gpuIndex: s.gpuIndex,
        state: runs.get(s.gpuIndex) ?? 'idle',
        pids: runs.has(s.gpuIndex) ? [4242] : [],
      })),
    async start({ gpuIndex }: { gpuIndex?: number }) {
      calls.push(`start:${gpuIndex}`);
      runs.set(gpuIndex!, 'running');
      return ok(gpuIndex!);
    },
  } as unknown as TrainingManager;
  const vllm = {
    async isSleeping(port: number) {
      calls.push(`is_sleeping:${port}`);
      const s = sleeping.get(port)!;
      if (s instanceof Error) throw s;
      return s;
    },
  };
  return {
    sleeping,
    runs,
    calls,
    holdWakes: () => {
      let release!: () => void;
      wakeGate = new Promise((resolve) => (release = resolve));
      return release;
    },
    exclusion: createGpuExclusion({ config, inference, training, vllm }),
  };
}

describe('one GPU never holds an engine and a trainer at once', () => {
  it('refuses a wake on a GPU whose trainer runs or is still stopping, and wakes the GPUs without one', async () => {
    const h = host();
    h.runs.set(0, 'stopping');
    const answer = await h.exclusion.wake({});
    expect(answer).toEqual({
      accepted: false,
      gpuIndexes: [0, 1],
      errors: ['a', 'a-lora'].map((target) => ({
        target,
        message: 'training is stopping on GPU 0 (pids 4242): refusing to wake vLLM beside it',
      })),
    });
    expect(h.calls).toEqual(['wake:1']);
  });

  it('refuses a training start beside an awake engine, and beside one that does not answer', async () => {
    const h = host();
    h.sleeping.set(8001, false);
    h.sleeping.set(8002, new Error('connect ECONNREFUSED 127.0.0.1:8002'));
    const answer = await h.exclusion.startTraining({});
    expect(answer.accepted).toBe(false);
    expect(answer.errors).toEqual([
      { target: 'training/gpu0', message: 'a on GPU 0 is awake: refusing to start training beside it' },
      {
        target: 'training/gpu1',
        message:
          'b on GPU 1 does not answer (connect ECONNREFUSED 127.0.0.1:8002): refusing to start training beside it',
      },
    ]);
    expect(h.calls.filter((c) => c.startsWith('start'))).toEqual([]);
    // One question per engine: the adapter shares its base model's server.
    expect(h.calls.filter((c) => c === 'is_sleeping:8001')).toHaveLength(1);
  });

  it('starts training where every engine of the GPU sleeps', async () => {
    const h = host();
    expect(await h.exclusion.startTraining({ gpuIndex: 1 })).toEqual({ accepted: true, gpuIndexes: [1], errors: [] });
    expect(h.calls).toEqual(['is_sleeping:8002', 'start:1']);
  });

  it('makes a training start wait for a wake in flight on its GPU, then sees the engine awake', async () => {
    const h = host();
    const release = h.holdWakes();
    const waking = h.exclusion.wake({ gpuIndex: 0 });
    const starting = h.exclusion.startTraining({ gpuIndex: 0 });
    // The start has not even looked while the wake runs.
    await new Promise((resolve) => setImmediate(resolve));
    expect(h.calls).toEqual(['wake:0']);
    release();
    expect((await waking).accepted).toBe(true);
    expect((await starting).errors).toEqual([
      { target: 'training/gpu0', message: 'a on GPU 0 is awake: refusing to start training beside it' },
    ]);
  });

  it('names an unknown training GPU as such', () => {
    expect(() => host().exclusion.startTraining({ gpuIndex: 7 })).toThrow(NoSlotError);
  });
});
