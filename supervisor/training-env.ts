import type { SupervisorConfig } from '../schemas/supervisor';
import type { RunAsUser } from './run-as';
import { PROGRESS_ENV, progressFile } from './training-progress';

type TrainingSlot = SupervisorConfig['training'][number];

/**
 * Supervisor variables that never reach a training process, even from a slot's own `env` (and never a vLLM
 * server of the GPU-host image, deploy/gpu-host/main.ts).
 */
export const SUPERVISOR_SECRET_ENV = [
  'HARU_SUPERVISOR_TOKEN',
  'HARU_SUPERVISOR_TOKEN_FILE',
  'HARU_SUPERVISOR_TOKEN_PREVIOUS',
  'HARU_SUPERVISOR_TOKEN_PREVIOUS_FILE',
  'HARU_SUPERVISOR_CONFIG',
] as const;

/**
 * The supervisor's variables a trainer inherits: what a process needs to find programs and libraries, its
 * home, its locale and time zone, nothing else. A supervisor runs as root next to credentials (its token,
 * cloud keys, a database URL in a shared env file): a deny-list misses whatever it was not told about, so the
 * trainer gets only these, and whatever else it needs comes from its slot's `env`.
 */
export const TRAINER_BASE_ENV = [
  'PATH',
  'HOME',
  'USER',
  'LOGNAME',
  'SHELL',
  'LANG',
  'LANGUAGE',
  'TZ',
  'TMPDIR',
  // CUDA and its libraries where the host installs them outside the linker's default paths.
  'LD_LIBRARY_PATH',
  'CUDA_HOME',
  'CUDA_PATH',
] as const;

/** Locale categories (LC_ALL, LC_CTYPE, …) count as part of the locale. */
const isBaseName = (name: string) => (TRAINER_BASE_ENV as readonly string[]).includes(name) || name.startsWith('LC_');

/**
 * The environment of a training process (pure): from the supervisor's `base`, only TRAINER_BASE_ENV and
 * `LC_*`; a `runAs` user's own `HOME`, `USER`, `LOGNAME`; the slot's `env`; then the trainer contract, which
 * the slot cannot override: `HARU_CHECKPOINT_DIR`, `HARU_GPU_INDEX`, `HARU_TRAINING_PROGRESS_FILE`
 * (supervisor/training-progress.ts), `CUDA_VISIBLE_DEVICES` (the slot's MIG instance, else its GPU index) and
 * `CUDA_DEVICE_ORDER=PCI_BUS_ID`. CUDA numbers devices fastest first unless told PCI_BUS_ID, the order
 * nvidia-smi's indexes follow (CUDA C Programming Guide, "CUDA Environment Variables"); and a trainer that
 * ignores HARU_GPU_INDEX (a Ray task on SkyPilot inherits every GPU) would otherwise start on device 0, the
 * inference GPU. SUPERVISOR_SECRET_ENV is removed after the merge, so a slot's `env` cannot put the
 * supervisor's token or config in either.
 */
export function buildTrainingEnv(
  base: NodeJS.ProcessEnv,
  slot: TrainingSlot,
  checkpointDir: string,
  user?: RunAsUser,
): NodeJS.ProcessEnv {
  const inherited = Object.fromEntries(
    Object.entries(base).filter(([name, value]) => value !== undefined && isBaseName(name)),
  );
  const own = user ? { HOME: user.home, USER: user.name, LOGNAME: user.name } : {};
  const env: NodeJS.ProcessEnv = { ...inherited, ...own, ...slot.env };
  for (const key of SUPERVISOR_SECRET_ENV) delete env[key];
  env.HARU_CHECKPOINT_DIR = checkpointDir;
  env.HARU_GPU_INDEX = String(slot.gpuIndex);
  env[PROGRESS_ENV] = progressFile(checkpointDir);
  env.CUDA_VISIBLE_DEVICES = slot.mig ?? String(slot.gpuIndex);
  env.CUDA_DEVICE_ORDER = 'PCI_BUS_ID';
  return env;
}
