import { FailureType } from '../schemas/failures';
import { judgeProbeAnswer, probeRequestBody } from '../schemas/probe-answer';
import { upstreamUrl } from './serving-url';

/** How much of a body that is not JSON a failure quotes. */
const MAX_ERROR_BODY = 300;

/** One model's probe through its servingUrl: where it goes and what it sends. */
export interface ServingUrlProbeRequest {
  url: string;
  /** The JSON body (one greedy, non-streaming chat completion). */
  body: string;
}

/** The request the worker sends to check `model` where the proxy will send its clients. */
export function servingUrlProbeRequest(
  model: { name: string; servingUrl: string },
  probe: { prompt: string; maxTokens: number },
): ServingUrlProbeRequest {
  return {
    url: upstreamUrl(model.servingUrl, 'chat/completions'),
    body: JSON.stringify(probeRequestBody(model.name, probe.prompt, probe.maxTokens)),
  };
}

/** Why an answer through a servingUrl fails the promotion, and as which failure type. */
export interface ServingUrlProbeFailure {
  type: typeof FailureType.ProbeFailed | typeof FailureType.Unauthorized;
  why: string;
}

/**
 * Judges the answer to a servingUrl probe (null: it passes). A 401 is `Unauthorized`: the server behind the
 * URL wants a key the layout's `upstreamAuth` does not give (or gives wrong, `hasUpstreamAuth`). Anything else
 * is judged as the supervisor judges its own probe (schemas/probe-answer.ts) and fails as `ProbeFailed`,
 * quoting the start of a body that is not JSON.
 */
export function judgeServingUrlAnswer(
  answer: { status: number; text: string },
  hasUpstreamAuth: boolean,
): ServingUrlProbeFailure | null {
  if (answer.status === 401) {
    return {
      type: FailureType.Unauthorized,
      why: `HTTP 401: the server behind it wants a key (vLLM's --api-key); set upstreamAuth on the model in the layout${hasUpstreamAuth ? ' (the token it names was refused)' : ''}`,
    };
  }
  let body: unknown = null;
  try {
    body = JSON.parse(answer.text);
  } catch {
    // judged as not a chat completion
  }
  const error = judgeProbeAnswer(answer.status, body);
  if (!error) return null;
  return {
    type: FailureType.ProbeFailed,
    why: body === null ? `${error}: ${answer.text.slice(0, MAX_ERROR_BODY)}` : error,
  };
}
