/**
 * Token logprobs of the fake engine, in the shapes of vLLM's `/v1/completions` (vllm/entrypoints/openai/
 * completion/protocol.py `CompletionLogProbs`: `text_offset`, `token_logprobs`, `tokens`, `top_logprobs`) and
 * with its echo rules (completion/serving.py: `echo` prepends the prompt's own tokens and their prompt
 * logprobs, the first of which is null; `echo` with `max_tokens: 0` returns only the prompt, no generation).
 *
 * The simulated model: a token scores high when it follows its predecessor in the engine's preferred sequence
 * (or starts it), low otherwise, plus a deterministic jitter. The score of a token depends only on it and its
 * predecessor, so an answer scored while generated and scored again by echo gets the same figures, as greedy
 * decoding and prompt logprobs do on one set of weights; other weights (garbage after wake) score it low.
 */
import { tokenize } from './engine';

function jitter(prev: string, token: string): number {
  let h = 2166136261;
  for (const c of `${prev}\u0000${token}`) h = Math.imul(h ^ c.charCodeAt(0), 16777619);
  return (h >>> 0) / 0xffffffff;
}

/** Logprob of `token` after `prev` under weights preferring `preferred` (natural log, rounded as vLLM's floats). */
export function tokenLogprob(preferred: readonly string[], prev: string | null, token: string): number {
  // Words compare without their leading whitespace: " This" continuing a prompt is the sentence's "This".
  const words = preferred.map((t) => t.trim());
  const [word, before] = [token.trim(), prev?.trim() ?? ''];
  const at = words.indexOf(word);
  const follows = at === 0 || (at > 0 && words[at - 1] === before);
  const value = follows ? -(0.02 + 0.3 * jitter(before, word)) : -(4 + 6 * jitter(before, word));
  return Math.round(value * 1e4) / 1e4;
}

export interface CompletionLogprobs {
  text_offset: number[];
  token_logprobs: (number | null)[];
  tokens: string[];
  top_logprobs: (Record<string, number> | null)[];
}

/** The logprobs block of `tokens` (prompt tokens get a null first logprob when `isPrompt`), `prev` before them. */
export function logprobsOf(
  preferred: readonly string[],
  tokens: readonly string[],
  prev: string | null,
  isPrompt: boolean,
  offset = 0,
): CompletionLogprobs {
  const out: CompletionLogprobs = { text_offset: [], token_logprobs: [], tokens: [], top_logprobs: [] };
  let before = prev;
  let at = offset;
  tokens.forEach((token, i) => {
    const lp = isPrompt && i === 0 ? null : tokenLogprob(preferred, before, token);
    out.text_offset.push(at);
    out.tokens.push(token);
    out.token_logprobs.push(lp);
    out.top_logprobs.push(lp === null ? null : { [token]: lp });
    at += token.length;
    before = token;
  });
  return out;
}

/** Concatenates two logprob blocks (echo: the prompt's, then the generated tokens'). */
export const joinLogprobs = (a: CompletionLogprobs, b: CompletionLogprobs): CompletionLogprobs => ({
  text_offset: [...a.text_offset, ...b.text_offset],
  token_logprobs: [...a.token_logprobs, ...b.token_logprobs],
  tokens: [...a.tokens, ...b.tokens],
  top_logprobs: [...a.top_logprobs, ...b.top_logprobs],
});

export { tokenize };
