import { z } from 'zod';
import type { FingerprintResult, ScoreResult } from '../schemas/fingerprint';
import { describeVllmStatus } from '../schemas/probe-answer';
import type { VllmClient } from './vllm';

/**
 * The part of a `/v1/completions` answer a fingerprint reads: the text and vLLM's `CompletionLogProbs`
 * (vllm/entrypoints/openai/completion/protocol.py: `tokens`, `token_logprobs`, the first prompt token's null).
 */
const completionSchema = z.object({
  choices: z
    .array(
      z.object({
        text: z.string(),
        logprobs: z.object({ tokens: z.array(z.string()), token_logprobs: z.array(z.number().nullable()) }).nullable(),
      }),
    )
    .min(1),
});

interface Served {
  name: string;
  port: number;
}

type Call = { ok: true; choice: z.infer<typeof completionSchema>['choices'][number] } | { ok: false; error: string };

async function complete(vllm: VllmClient, model: Served, body: Record<string, unknown>, timeoutMs: number) {
  try {
    const res = await vllm.completion(
      model.port,
      { model: model.name, temperature: 0, stream: false, ...body },
      timeoutMs,
    );
    if (res.status < 200 || res.status >= 300)
      return { ok: false, error: describeVllmStatus(res.status, res.body) } as Call;
    const parsed = completionSchema.safeParse(res.body);
    if (!parsed.success || !parsed.data.choices[0]!.logprobs) {
      return { ok: false, error: 'answer is not a completion with logprobs' } as Call;
    }
    return { ok: true, choice: parsed.data.choices[0]! } as Call;
  } catch (err) {
    return { ok: false, error: (err as Error).message } as Call;
  }
}

/**
 * Asks every model for its greedy answer (temperature 0) to `prompt` with the logprob of each token, in
 * parallel. A model that errors is reported with the reason, never thrown. `serverPid` is left null for the
 * caller, which knows the host's processes, to fill in.
 */
export async function takeFingerprints(
  input: { models: Served[]; prompt: string; maxTokens: number; timeoutMs: number },
  deps: { vllm: VllmClient },
): Promise<FingerprintResult[]> {
  return Promise.all(
    input.models.map(async (model): Promise<FingerprintResult> => {
      const body = { prompt: input.prompt, max_tokens: input.maxTokens, logprobs: 1 };
      const res = await complete(deps.vllm, model, body, input.timeoutMs);
      if (!res.ok) {
        return {
          model: model.name,
          ok: false,
          error: res.error,
          text: null,
          tokens: [],
          tokenLogprobs: [],
          serverPid: null,
        };
      }
      const { tokens, token_logprobs: logprobs } = res.choice.logprobs!;
      if (tokens.length === 0 || logprobs.some((x) => x === null)) {
        return {
          model: model.name,
          ok: false,
          error: 'empty answer',
          text: res.choice.text,
          tokens: [],
          tokenLogprobs: [],
          serverPid: null,
        };
      }
      return {
        model: model.name,
        ok: true,
        error: null,
        text: res.choice.text,
        tokens,
        tokenLogprobs: logprobs as number[],
        serverPid: null,
      };
    }),
  );
}

/**
 * Has every model score a stored answer: `prompt + text` sent with `echo: true`, `max_tokens: 0` and
 * `logprobs`, which vLLM answers with the prompt's own token logprobs and no generation
 * (vllm/entrypoints/openai/completion/protocol.py `echo_without_generation`, completion/serving.py "only return
 * the prompt"). The last `tokenCount` of them are the answer's.
 */
export async function scoreAnswers(
  input: { answers: (Served & { text: string; tokenCount: number })[]; prompt: string; timeoutMs: number },
  deps: { vllm: VllmClient },
): Promise<ScoreResult[]> {
  return Promise.all(
    input.answers.map(async (answer): Promise<ScoreResult> => {
      const body = { prompt: input.prompt + answer.text, max_tokens: 0, echo: true, logprobs: 1 };
      const res = await complete(deps.vllm, answer, body, input.timeoutMs);
      if (!res.ok) return { model: answer.name, ok: false, error: res.error, tokenLogprobs: [] };
      const tail = res.choice.logprobs!.token_logprobs.slice(-answer.tokenCount);
      if (tail.length < answer.tokenCount || tail.some((x) => x === null)) {
        return { model: answer.name, ok: false, error: `echo scored ${tail.length} answer tokens`, tokenLogprobs: [] };
      }
      return { model: answer.name, ok: true, error: null, tokenLogprobs: tail as number[] };
    }),
  );
}
