/**
 * vLLM's chat-template switches for continuing an assistant turn: `add_generation_prompt` (default true) and
 * `continue_final_message` (default false), as ChatCompletionRequest reads them
 * (vllm/entrypoints/openai/protocol.py), and the text a request asks the model to carry on from.
 */

type Body = Record<string, unknown>;
interface Message {
  role?: unknown;
  content?: unknown;
}

/**
 * vLLM's `check_generation_prompt` (protocol.py, a pydantic "before" validator, so it looks at the raw
 * fields: an unset `add_generation_prompt` does not count as true): both true is a 400. Null when valid.
 */
export function generationPromptError(body: Body): string | null {
  if (body.continue_final_message && body.add_generation_prompt) {
    return 'Cannot set both `continue_final_message` and `add_generation_prompt` to True.';
  }
  return null;
}

/**
 * The role of the streamed answer: with `add_generation_prompt` false vLLM answers in the role of the last
 * message (serving_chat.py, `get_chat_request_role`), else as the assistant (`--response-role`).
 */
export function responseRole(body: Body): string {
  if (body.add_generation_prompt !== false) return 'assistant';
  const last = (body.messages as Message[]).at(-1);
  return typeof last?.role === 'string' ? last.role : 'assistant';
}

/**
 * What the model continues: the final message's text when `continue_final_message` (the template leaves that
 * turn open), the prompt for /v1/completions, else nothing (a fresh turn).
 */
export function continuedText(kind: 'chat' | 'completion', body: Body): string {
  if (kind === 'completion') return typeof body.prompt === 'string' ? body.prompt : '';
  if (body.continue_final_message !== true) return '';
  const last = (body.messages as Message[]).at(-1);
  return typeof last?.content === 'string' ? last.content : '';
}

/**
 * How many of `tokens` (one reply, in order) a deterministic model has already produced when `text` ends
 * with them: the longest prefix of the reply that `text` ends with. Greedy decoding carries on from there,
 * which is what makes a continued stream equal an uninterrupted one.
 */
export function tokensAlreadyWritten(tokens: readonly string[], text: string): number {
  let prefix = tokens.join('');
  for (let n = tokens.length; n > 0; n -= 1) {
    if (text.endsWith(prefix)) return n;
    prefix = prefix.slice(0, prefix.length - tokens[n - 1]!.length);
  }
  return 0;
}
