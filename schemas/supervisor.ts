import { z } from 'zod';
import { sleepLevelSchema } from './enums';
import { gpuIndexSchema, modelNameSchema } from './layout';
import { secretRefSchema } from './secret-ref';

// ---------------------------------------------------------------------------------------------------------------
// Supervisor config (HARU_SUPERVISOR_CONFIG): what runs on one GPU host.
// ---------------------------------------------------------------------------------------------------------------

/** vLLM's default `--gpu-memory-utilization` (vllm/config: `gpu_memory_utilization: float = 0.9`). */
export const VLLM_DEFAULT_GPU_MEMORY_UTILIZATION = 0.9;

/** A model's `apiKey`: read by the supervisor at start (schemas/secret-ref.ts). */
export { secretRefSchema, type SecretRef } from './secret-ref';

export const supervisorModelSchema = z.strictObject({
  name: modelNameSchema,
  /** The vLLM server's port on 127.0.0.1. */
  port: z.number().int().min(1).max(65_535),
  /**
   * The server's `--gpu-memory-utilization`: the share of the GPU (or MIG instance) it takes awake. vLLM's
   * limit is per instance and checked against free memory at start, so a wake needs this share back, less
   * what the sleeping server still holds. Default 0.9, vLLM's.
   */
  gpuMemoryUtilization: z.number().gt(0).max(1).optional(),
  /** What the server needs free to wake, in MiB, when its share is not the right measure (overrides it). */
  wakeMiB: z.number().int().positive().optional(),
  /**
   * The served names of the LoRA adapters this server loads (`--lora-modules NAME=PATH`): each is routed, probed
   * and reported as a model of its own, sleeping and waking with this server.
   */
  loraAdapters: z.array(modelNameSchema).optional(),
  /** The server's `--api-key`: sent as a bearer token on its `/v1/*` routes (probes, fingerprints). */
  apiKey: secretRefSchema.optional(),
});

export const supervisorInferenceSlotSchema = z.strictObject({
  gpuIndex: gpuIndexSchema,
  models: z.array(supervisorModelSchema).min(1),
  sleepLevel: sleepLevelSchema.default(1),
});

/**
 * A MIG instance as nvidia-smi names it: `MIG-<uuid>` (R470 and later, `nvidia-smi -L`) or the older
 * `MIG-<GPU-UUID>/<GI>/<CI>` form.
 */
export const migDeviceSchema = z
  .string()
  .regex(
    /^MIG-(?:[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}|GPU-[0-9a-f-]{36}\/\d+\/\d+)$/i,
    'must be a MIG device as nvidia-smi -L prints it: MIG-<uuid> or MIG-<GPU-UUID>/<GI>/<CI>',
  );

export const supervisorTrainingSlotSchema = z.strictObject({
  gpuIndex: gpuIndexSchema,
  /**
   * The MIG instance of `gpuIndex` the trainer and the models share. Its own memory figures are the proof the
   * GPU was released: with MIG on, nvidia-smi reads a whole GPU's memory only with privileges it rarely has.
   */
  mig: migDeviceSchema.optional(),
  command: z.array(z.string().min(1)).min(1),
  checkpointDir: z.string().min(1),
  /**
   * The user the trainer runs as (a name from the host's passwd), so it can read neither the supervisor's
   * memory and environment nor its token file. Needs a supervisor running as root or holding CAP_SETUID,
   * CAP_SETGID, CAP_CHOWN and CAP_KILL (the host kit's unit grants them); checked at start.
   */
  runAs: z
    .string()
    .regex(/^[a-z_][a-z0-9_.-]*\$?$/i, 'must be a user name')
    .optional(),
  env: z
    .record(z.string().regex(/^[A-Za-z_][A-Za-z0-9_]*$/, 'must be an environment variable name'), z.string())
    .optional(),
});

export const supervisorConfigSchema = z
  .strictObject({
    $schema: z.string().optional(),
    inference: z.array(supervisorInferenceSlotSchema).default([]),
    training: z.array(supervisorTrainingSlotSchema).default([]),
  })
  .superRefine((config, ctx) => {
    const names = new Set<string>();
    const ports = new Set<number>();
    const inferenceGpus = new Set<number>();
    config.inference.forEach((slot, i) => {
      if (inferenceGpus.has(slot.gpuIndex)) {
        ctx.addIssue({
          code: 'custom',
          path: ['inference', i, 'gpuIndex'],
          message: `GPU ${slot.gpuIndex} already has an inference slot`,
        });
      }
      inferenceGpus.add(slot.gpuIndex);
      slot.models.forEach((model, j) => {
        if (names.has(model.name)) {
          ctx.addIssue({
            code: 'custom',
            path: ['inference', i, 'models', j, 'name'],
            message: `duplicate model name "${model.name}"`,
          });
        }
        if (ports.has(model.port)) {
          ctx.addIssue({
            code: 'custom',
            path: ['inference', i, 'models', j, 'port'],
            message: `port ${model.port} is used twice`,
          });
        }
        names.add(model.name);
        ports.add(model.port);
        model.loraAdapters?.forEach((adapter, k) => {
          if (names.has(adapter)) {
            ctx.addIssue({
              code: 'custom',
              path: ['inference', i, 'models', j, 'loraAdapters', k],
              message: `duplicate model name "${adapter}"`,
            });
          }
          names.add(adapter);
        });
      });
    });
    const trainingGpus = new Set<number>();
    config.training.forEach((slot, i) => {
      if (trainingGpus.has(slot.gpuIndex)) {
        ctx.addIssue({
          code: 'custom',
          path: ['training', i, 'gpuIndex'],
          message: `GPU ${slot.gpuIndex} already has a training slot`,
        });
      }
      trainingGpus.add(slot.gpuIndex);
    });
  });
export type SupervisorConfig = z.infer<typeof supervisorConfigSchema>;
export type SupervisorConfigInput = z.input<typeof supervisorConfigSchema>;

// ---------------------------------------------------------------------------------------------------------------
// Supervisor API request bodies (strict: unknown keys are a 400).
// ---------------------------------------------------------------------------------------------------------------

/**
 * How a sleep treats requests still in flight, as vLLM's `POST /sleep?mode=` (its `PauseMode`,
 * vllm/v1/engine/core.py `pause_scheduler`): `wait` stops scheduling new requests and lets the running ones
 * finish before the memory is released; `abort` (vLLM's default) ends every running and waiting request.
 */
export type SleepMode = 'wait' | 'abort';

export const sleepRequestSchema = z.strictObject({
  gpuIndex: gpuIndexSchema.optional(),
  level: sleepLevelSchema.optional(),
  /**
   * Requests still in flight: `wait` lets them finish first where the server's vLLM supports it (>= 0.17,
   * read from its `/version`), `abort` (the default, as vLLM's) ends them.
   */
  mode: z.enum(['wait', 'abort']).optional() satisfies z.ZodType<SleepMode | undefined>,
});
export type SleepRequest = z.infer<typeof sleepRequestSchema>;
export const wakeRequestSchema = z.strictObject({ gpuIndex: gpuIndexSchema.optional() });
export type WakeRequest = z.infer<typeof wakeRequestSchema>;
export const trainingStartRequestSchema = z.strictObject({ gpuIndex: gpuIndexSchema.optional() });
export type TrainingStartRequest = z.infer<typeof trainingStartRequestSchema>;
export const trainingStopRequestSchema = z.strictObject({
  gpuIndex: gpuIndexSchema.optional(),
  /** SIGTERM-to-SIGKILL grace. A shorter grace than one already running tightens the deadline; a longer one does not extend it. */
  graceMs: z.number().int().min(0).max(3_600_000).optional(),
  /**
   * Answer once every selected run has ended, or after this long, whichever comes first (absent or 0: at once).
   * Either way the answer is no proof: the caller reads the status.
   */
  waitMs: z.number().int().min(0).max(600_000).optional(),
});
export type TrainingStopRequest = z.infer<typeof trainingStopRequestSchema>;
export const probeRequestSchema = z.strictObject({
  prompt: z.string().min(1).max(2_000),
  maxTokens: z.number().int().min(1).max(256),
  timeoutMs: z.number().int().min(1).max(600_000),
  /** Only these models; all configured models when absent. */
  models: z.array(modelNameSchema).optional(),
});
export type ProbeRequest = z.infer<typeof probeRequestSchema>;

// ---------------------------------------------------------------------------------------------------------------
// Supervisor API responses (lenient z.object: parsed by the caller inside the activity that fetched them).
// ---------------------------------------------------------------------------------------------------------------

export const MODEL_AWAKE_STATES = ['awake', 'asleep', 'unknown'] as const;
export const modelAwakeStateSchema = z.enum(MODEL_AWAKE_STATES);
export type ModelAwakeState = z.infer<typeof modelAwakeStateSchema>;

/**
 * How a model's server looks as a whole: `ready` (its admin endpoints answered within their timeout),
 * `busy` (its processes live but an admin endpoint is slow or timed out: vLLM's API server queues them
 * behind engine work), `gone` (no process serves its port and connections are refused), `frozen` (every
 * process serving it is stopped, SIGSTOP), `wedged` (awake, and requests sat in its engine while the
 * engine's progress metrics did not move for the wedge window, or a synthetic completion went unanswered
 * without progress), `erroring` (awake, and synthetic completions answer 5xx again and again), `unknown`
 * (nothing read yet).
 */
export const MODEL_CONDITIONS = ['ready', 'busy', 'gone', 'frozen', 'wedged', 'erroring', 'unknown'] as const;
export const modelConditionSchema = z.enum(MODEL_CONDITIONS);
export type ModelCondition = z.infer<typeof modelConditionSchema>;

/**
 * Host-alive evidence for one model's server, refreshed in the background: the processes serving its port
 * (by pid, from /proc) and vLLM's `/health`. `pids` is null where processes cannot be seen (not Linux, or
 * another pid namespace); then only the HTTP answers speak.
 */
export const modelProcessEvidenceSchema = z.object({
  pids: z.array(z.number().int()).nullable(),
  /** Those of `pids` in state T (stopped by a signal). */
  stoppedPids: z.array(z.number().int()),
  /** `GET /health`: true 200, false any other answer or refusal, null not answered yet (in flight or never asked). */
  healthOk: z.boolean().nullable(),
  /** How old each reading is, in ms (null: never read). */
  pidsAgeMs: z.number().nullable(),
  healthAgeMs: z.number().nullable(),
});
export type ModelProcessEvidence = z.infer<typeof modelProcessEvidenceSchema>;

/**
 * One model as the supervisor's status view holds it. Compatibility across a rolling deploy
 * (docs/architecture.md §6.2): fields are only added, each optional here; a reader that finds one missing
 * (an older supervisor) treats it as no evidence and keeps the old reading of the others. `state` keeps its
 * meaning: the sleep state vLLM last confirmed while the server lived (`stateAgeMs` says how long ago), or
 * `unknown` when never confirmed or the server is gone; a slow `/is_sleeping` no longer makes it `unknown`.
 */
export const modelStatusSchema = z.object({
  name: z.string(),
  gpuIndex: z.number().int(),
  port: z.number().int(),
  state: modelAwakeStateSchema,
  /** `vllm:num_requests_running` summed over the server's series; null when /metrics could not be read. */
  runningRequests: z.number().nullable(),
  error: z.string().nullable().optional(),
  /** `vllm:num_requests_waiting`, as `runningRequests`. */
  waitingRequests: z.number().nullable().optional(),
  /** Age of `state` and of the request counts, in ms (null: never read). */
  stateAgeMs: z.number().nullable().optional(),
  requestsAgeMs: z.number().nullable().optional(),
  /** A value this reader does not know (a newer supervisor's) reads `unknown` rather than failing the poll. */
  condition: modelConditionSchema.catch('unknown').optional(),
  processes: modelProcessEvidenceSchema.optional(),
});
export type ModelStatus = z.infer<typeof modelStatusSchema>;

export const TRAINING_RUN_STATES = ['idle', 'running', 'stopping'] as const;
export const trainingRunStateSchema = z.enum(TRAINING_RUN_STATES);
export type TrainingRunState = z.infer<typeof trainingRunStateSchema>;

export const trainingExitSchema = z.object({
  code: z.number().int().nullable(),
  signal: z.string().nullable(),
  at: z.string(),
});
export type TrainingExit = z.infer<typeof trainingExitSchema>;

/** Restarts of a run that crashed while wanted (started and not stopped since). */
export const trainingRestartSchema = z.object({
  /** Restarts in a row so far. */
  attempts: z.number().int(),
  /** When the next one is due; null when none is pending. */
  nextAt: z.string().nullable(),
  /** The attempts are spent: the slot stays down until the next start. */
  gaveUp: z.boolean(),
});
export type TrainingRestart = z.infer<typeof trainingRestartSchema>;

/**
 * What a trainer last reported through its progress file (supervisor/training-progress.ts): `at` is when (the
 * file's mtime), `ageMs` how long ago; `error` says why a file there could not be read (the figures are then null).
 */
export const trainerProgressSchema = z.object({
  step: z.number().int().nullable(),
  totalSteps: z.number().int().nullable(),
  loss: z.number().nullable(),
  at: z.string().nullable(),
  ageMs: z.number().nullable(),
  error: z.string().nullable(),
});
export type TrainerProgress = z.infer<typeof trainerProgressSchema>;

export const trainingRunStatusSchema = z.object({
  gpuIndex: z.number().int(),
  state: trainingRunStateSchema,
  /** Live pids of the run's process group (leader first); empty when idle. */
  pids: z.array(z.number().int()),
  startedAt: z.string().nullable(),
  lastExit: trainingExitSchema.nullable(),
  /** When a stopping run gets its SIGKILL; null otherwise. */
  stopDeadline: z.string().nullable().optional(),
  /** Set once a crashed run has been restarted or is due to be; null otherwise. */
  restart: trainingRestartSchema.nullable().optional(),
  /**
   * What finds the run's processes: its cgroup (`detail`: the cgroup's path; a trainer that leaves its process
   * group is still found), or its process group (`detail`: why no cgroup could be had).
   */
  tracking: z.object({ kind: z.enum(['cgroup', 'process-group']), detail: z.string() }).optional(),
  /**
   * Why the supervisor refuses to start training on this slot (no cgroup tracking and no
   * HARU_TRAINING_ALLOW_PGROUP=1); null when it starts it. Absent from older supervisors.
   */
  refused: z.string().nullable().optional(),
  /**
   * The trainer's last reported progress (its current run's, or the last run's on an idle slot); null when it
   * reported none. Absent from older supervisors.
   */
  progress: trainerProgressSchema.nullable().optional(),
});
export type TrainingRunStatus = z.infer<typeof trainingRunStatusSchema>;

export const supervisorStatusSchema = z.object({
  models: z.array(modelStatusSchema),
  training: z.array(trainingRunStatusSchema),
  at: z.string(),
});
export type SupervisorStatus = z.infer<typeof supervisorStatusSchema>;

export const gpuProcessMemorySchema = z.object({
  /** In the supervisor's PID namespace, unless `foreign`. */
  pid: z.number().int(),
  /** null when the driver does not say (the process is listed, its memory is not). */
  usedMiB: z.number().nullable(),
  /**
   * The pid is another PID namespace's, as the driver printed it (a supervisor in a container): it names no
   * process the supervisor knows, so it proves nothing about the trainer or the vLLM servers. Absent: false.
   */
  foreign: z.boolean().optional(),
});

/** A vLLM server configured on a GPU: its processes, what they hold there, what a wake needs free. */
export const gpuModelMemorySchema = z.object({
  name: z.string(),
  /** The process serving its port and that process's descendants (engine core, tensor-parallel workers). */
  pids: z.array(z.number().int()),
  /** Memory its processes hold on this GPU (a sleeping server's residue); null when no per-process figure says. */
  residueMiB: z.number().nullable(),
  /** `wakeMiB`, else its share of the GPU less its residue; null when the GPU's total is unknown. */
  wakeNeedMiB: z.number().nullable(),
});
export type GpuModelMemory = z.infer<typeof gpuModelMemorySchema>;

/**
 * Where a GPU's figures come from: the device's own totals; the sum of its per-process figures (the device
 * prints `[N/A]` / `[Not Supported]` for totals); or the MIG instance the slot names.
 */
export const GPU_MEMORY_SOURCES = ['device', 'processes', 'mig'] as const;
/**
 * Why a GPU's memory cannot be read: the caller lacks the privilege (MIG without a slot naming its instance),
 * the GPU fell off the bus, or the driver gave an unknown error.
 */
export const GPU_MEMORY_ERRORS = ['permission', 'lost', 'unknown'] as const;
/**
 * Whose pids the per-process figures carry. The NVIDIA driver knows no PID namespaces: it always gives the
 * host's pids (github.com/NVIDIA/nvidia-docker/issues/1483). `own`: the supervisor is in the host's PID
 * namespace (or the tool's pids are its own); `mapped`: translated into the supervisor's namespace through
 * `NSpid` of the host's /proc (proc(5)), processes of other namespaces marked `foreign`; `unmapped`: the
 * supervisor is in a container without the host's /proc, every process is `foreign`.
 */
export const GPU_PID_SPACES = ['own', 'mapped', 'unmapped'] as const;
export type GpuPidSpace = (typeof GPU_PID_SPACES)[number];
export const gpuMemoryErrorSchema = z.object({ kind: z.enum(GPU_MEMORY_ERRORS), message: z.string() });
export type GpuMemoryError = z.infer<typeof gpuMemoryErrorSchema>;

export const gpuMemorySchema = z.object({
  index: z.number().int(),
  uuid: z.string(),
  /** null only with `error`. */
  usedMiB: z.number().nullable(),
  /** null when the device does not report totals; usage then comes from per-process figures. */
  totalMiB: z.number().nullable(),
  processes: z.array(gpuProcessMemorySchema),
  /** Absent: `own`. */
  pidSpace: z.enum(GPU_PID_SPACES).optional(),
  source: z.enum(GPU_MEMORY_SOURCES).default('device'),
  /** The MIG instance the figures are of (source `mig`). */
  migDevice: z.string().nullable().default(null),
  /** Set when the figures cannot be read; the message names the GPU and the fix. */
  error: gpuMemoryErrorSchema.nullable().default(null),
  /** The vLLM servers configured on this GPU and the memory they hold and need. */
  models: z.array(gpuModelMemorySchema).default([]),
});
export type GpuMemory = z.infer<typeof gpuMemorySchema>;
/** `at`: when the vendor tool was run for these figures (a reading reused under `maxAgeMs` keeps its own time). */
export const gpuMemoryReportSchema = z.object({ gpus: z.array(gpuMemorySchema), at: z.string() });
export type GpuMemoryReport = z.infer<typeof gpuMemoryReportSchema>;

/** The longest `maxAgeMs` a caller may ask for: a reading older than this says nothing about now. */
export const GPU_MEMORY_MAX_AGE_LIMIT_MS = 5_000;
/**
 * `GET /v1/gpu/memory?maxAgeMs=N`: the last reading may be reused when the tool finished it at most N ms ago on
 * the host's clock (absent or 0: run the tool now, or join the run in flight).
 */
export const gpuMemoryQuerySchema = z.object({
  maxAgeMs: z.coerce.number().int().min(0).max(GPU_MEMORY_MAX_AGE_LIMIT_MS).optional(),
  /**
   * `since=<ISO time of the host's clock>`: a reading whose run of the tool started at or after it (a trainer's
   * end, as the host's status reported it), taken then or being taken, else a new one.
   */
  since: z.string().datetime({ offset: true }).optional(),
});

export const probeModelResultSchema = z.object({
  model: z.string(),
  ok: z.boolean(),
  latencyMs: z.number(),
  error: z.string().nullable(),
});
export type ProbeModelResult = z.infer<typeof probeModelResultSchema>;
export const probeResponseSchema = z.object({ results: z.array(probeModelResultSchema) });
export type ProbeResponse = z.infer<typeof probeResponseSchema>;

/** Answer of sleep/wake/training-start: what was asked of which GPUs; callers re-read status for proof. */
export const supervisorActionResponseSchema = z.object({
  accepted: z.boolean(),
  gpuIndexes: z.array(z.number().int()),
  errors: z.array(z.object({ target: z.string(), message: z.string() })).default([]),
  /** A training stop's answer: the processes of each run it asked to stop, as they were then (leader first). */
  stopping: z.array(z.object({ gpuIndex: z.number().int(), pids: z.array(z.number().int()) })).optional(),
});
export type SupervisorActionResponse = z.infer<typeof supervisorActionResponseSchema>;
