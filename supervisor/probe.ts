import { judgeProbeAnswer, probeRequestBody } from '../schemas/probe-answer';
import type { ProbeModelResult } from '../schemas/supervisor';
import type { VllmClient } from './vllm';

export interface ProbeInput {
  models: { name: string; port: number }[];
  prompt: string;
  maxTokens: number;
  timeoutMs: number;
}

/**
 * Sends one synthetic, non-streaming chat completion to every model, in parallel, judged by judgeProbeAnswer.
 * A timeout, an error status or empty content fails that model with the reason; the prompt and the answer are
 * never echoed in errors.
 */
export async function probeModels(
  input: ProbeInput,
  deps: { vllm: VllmClient; now: () => Date },
): Promise<ProbeModelResult[]> {
  return Promise.all(
    input.models.map(async (model): Promise<ProbeModelResult> => {
      const started = deps.now().getTime();
      const result = (ok: boolean, error: string | null): ProbeModelResult => ({
        model: model.name,
        ok,
        latencyMs: Math.max(0, deps.now().getTime() - started),
        error,
      });
      try {
        const res = await deps.vllm.chatCompletion(
          model.port,
          probeRequestBody(model.name, input.prompt, input.maxTokens),
          input.timeoutMs,
        );
        const error = judgeProbeAnswer(res.status, res.body);
        return result(error === null, error);
      } catch (err) {
        return result(false, (err as Error).message);
      }
    }),
  );
}
