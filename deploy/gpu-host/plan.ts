/**
 * What a GPU host runs, from the files an operator writes: the supervisor config (HARU_SUPERVISOR_CONFIG)
 * says which models serve on which GPU, in which order, on which port; one environment file per model
 * (`<dir>/<name>.env`, the same files haru-vllm@.service reads) says what `vllm serve` loads.
 */
import { z } from 'zod';
import { ConfigError, formatZodError, portSchema } from '../../schemas/env';
import type { SupervisorConfig } from '../../schemas/supervisor';

/**
 * An environment file as systemd's EnvironmentFile= reads the simple form used here: `KEY=VALUE` lines,
 * blank lines and `#` comments, no quoting.
 */
export function parseEnvFile(text: string): Record<string, string> {
  const env: Record<string, string> = {};
  for (const line of text.split('\n')) {
    const m = /^\s*([A-Za-z_][A-Za-z0-9_]*)=(.*)$/.exec(line);
    if (m) env[m[1]!] = m[2]!.trim();
  }
  return env;
}

/** The variables of a vLLM server's environment file; any others are passed on to vLLM (HF_HOME, HF_TOKEN …). */
export const vllmEnvFileSchema = z.looseObject({
  HARU_VLLM_GPU: z.coerce.number().int().min(0),
  HARU_VLLM_PORT: portSchema,
  /** What `vllm serve` loads: a Hugging Face model id or a local path. */
  HARU_VLLM_MODEL: z.string().min(1),
  /** More `vllm serve` arguments, split on whitespace. */
  HARU_VLLM_ARGS: z.string().default(''),
});

/** Model names that can name an environment file and a `haru-vllm@NAME` instance as they are. */
export const FILE_SAFE_NAME = /^[A-Za-z0-9][A-Za-z0-9._-]*$/;

/** One vLLM server: the arguments of examples/vllm-launch.sh and the environment it runs with. */
export interface VllmServerPlan {
  name: string;
  gpuIndex: number;
  port: number;
  model: string;
  args: string[];
  /** The file's variables other than HARU_VLLM_*. */
  env: Record<string, string>;
}

/** Each GPU's servers in start order (one after another); GPUs start independently of each other. */
export interface HostPlan {
  gpus: { gpuIndex: number; servers: VllmServerPlan[] }[];
}

/**
 * Builds the plan. Throws ConfigError listing every problem: a missing or invalid env file, or one whose GPU
 * or port disagrees with the supervisor config (the supervisor would then drive a server that is not there).
 */
export function planHost(config: SupervisorConfig, readEnvFile: (name: string) => string): HostPlan {
  const problems: string[] = [];
  const gpus = config.inference.map((slot) => ({
    gpuIndex: slot.gpuIndex,
    servers: slot.models.flatMap((m): VllmServerPlan[] => {
      if (!FILE_SAFE_NAME.test(m.name)) {
        problems.push(`${m.name}: names a file and a systemd instance, so it may use only letters, digits, . _ -`);
        return [];
      }
      let text: string;
      try {
        text = readEnvFile(m.name);
      } catch (err) {
        problems.push(`${m.name}: cannot read its environment file: ${(err as Error).message}`);
        return [];
      }
      const parsed = vllmEnvFileSchema.safeParse(parseEnvFile(text));
      if (!parsed.success) {
        problems.push(`${m.name}: invalid environment file:\n${formatZodError(parsed.error, '    ')}`);
        return [];
      }
      const { HARU_VLLM_GPU, HARU_VLLM_PORT, HARU_VLLM_MODEL, HARU_VLLM_ARGS, ...rest } = parsed.data;
      if (HARU_VLLM_GPU !== slot.gpuIndex)
        problems.push(
          `${m.name}: HARU_VLLM_GPU=${HARU_VLLM_GPU} but the supervisor config has it on GPU ${slot.gpuIndex}`,
        );
      if (HARU_VLLM_PORT !== m.port)
        problems.push(`${m.name}: HARU_VLLM_PORT=${HARU_VLLM_PORT} but the supervisor config has port ${m.port}`);
      return [
        {
          name: m.name,
          gpuIndex: slot.gpuIndex,
          port: m.port,
          model: HARU_VLLM_MODEL,
          args: HARU_VLLM_ARGS.split(/\s+/).filter(Boolean),
          env: Object.fromEntries(Object.entries(rest).map(([k, v]) => [k, String(v)])),
        },
      ];
    }),
  }));
  if (problems.length) throw new ConfigError(`the GPU host's vLLM servers:\n  ${problems.join('\n  ')}`);
  return { gpus };
}
