import type { ResendRefusal, Transcript } from './sse-splice';

/** The endpoints whose streams can continue on another domain. */
export type ContinuableEndpoint = 'chat/completions' | 'completions';

type Json = Record<string, unknown>;

/** Why the request itself (not what was relayed) cannot continue; null when it can. */
export function requestRefusal(endpoint: ContinuableEndpoint, body: Json): ResendRefusal | null {
  if (typeof body.n === 'number' && body.n > 1) return 'n';
  if (typeof body.best_of === 'number' && body.best_of > 1) return 'n';
  if (body.logprobs === true || (typeof body.logprobs === 'number' && body.logprobs > 0)) return 'logprobs';
  if (typeof body.top_logprobs === 'number' && body.top_logprobs > 0) return 'logprobs';
  if (endpoint === 'completions') {
    if (body.echo === true) return 'echo';
    if (typeof body.prompt !== 'string') return 'prompt';
  } else if (!Array.isArray(body.messages)) return 'body';
  return null;
}

/** `max_tokens` / `max_completion_tokens` less the tokens already relayed (at least 1; absent stays absent). */
function reduceLimits(body: Json, relayed: number): Json {
  const out: Json = { ...body };
  for (const key of ['max_tokens', 'max_completion_tokens']) {
    const limit = body[key];
    if (typeof limit === 'number') out[key] = Math.max(1, limit - relayed);
  }
  return out;
}

/**
 * The request that continues an interrupted stream on another domain, built from the client's body and
 * what was relayed (`t.text`, `t.tokens`). Chat: the relayed text becomes a final assistant message (or
 * extends one the client was already continuing) with vLLM's `continue_final_message: true` and
 * `add_generation_prompt: false`, so the template leaves the turn open and the model carries on from the
 * last token (vllm/entrypoints/openai/protocol.py, ChatCompletionRequest). Completions: the relayed text
 * is appended to the prompt. Nothing relayed yet: the original body as it was.
 */
export function continuationBody(endpoint: ContinuableEndpoint, body: Json, t: Transcript): Json {
  if (t.text === '') return body;
  const out = reduceLimits(body, t.tokens);
  if (endpoint === 'completions') {
    out.prompt = `${body.prompt as string}${t.text}`;
    return out;
  }
  const messages = [...(body.messages as Json[])];
  const last = messages.at(-1);
  if (body.continue_final_message === true && last?.role === 'assistant' && typeof last.content === 'string') {
    messages[messages.length - 1] = { ...last, content: `${last.content}${t.text}` };
  } else {
    messages.push({ role: 'assistant', content: t.text });
  }
  return { ...out, messages, continue_final_message: true, add_generation_prompt: false };
}
