import { ApplicationFailure } from '@temporalio/common';
import { fetch as undiciFetch } from 'undici';
import { upstreamUrl } from '../api/proxy/route-table';
import { describeCause } from '../lib/error-cause';
import { type UpstreamCredentials, upstreamCredentials } from '../lib/secret-ref';
import type { InferenceSlot } from '../schemas/entities';
import { FailureType } from '../schemas/failures';
import { judgeProbeAnswer, probeRequestBody } from '../supervisor/probe';

export interface ServingUrlProbe {
  prompt: string;
  maxTokens: number;
  timeoutMs: number;
}

const MAX_ERROR_BODY = 300;

/**
 * Sends the probe's completion to every model through its layout `servingUrl`, the address the proxy will send
 * clients to, with the bearer token its `upstreamAuth` names, from this worker (as the proxy would reach it,
 * not from the host's loopback). A model that answers on its host but not there fails the promotion before the
 * commit: non-retryable `ProbeFailed` naming the model and the URL, `Unauthorized` for a 401 (the layout's
 * `upstreamAuth` is missing or wrong), `InvalidTarget` for a token this worker cannot read.
 */
export async function probeServingUrls(
  slots: readonly InferenceSlot[],
  input: ServingUrlProbe,
  opts: { fetch?: typeof undiciFetch; credentials?: UpstreamCredentials } = {},
): Promise<void> {
  const doFetch = opts.fetch ?? undiciFetch;
  const credentials = opts.credentials ?? upstreamCredentials;
  const bindings = slots.flatMap((s) => s.models);
  await Promise.all(
    bindings.map(async (binding) => {
      const url = upstreamUrl(binding.servingUrl, 'chat/completions');
      const fail = (why: string, type: FailureType = FailureType.ProbeFailed) =>
        ApplicationFailure.nonRetryable(
          `model ${binding.name} answers on its host but not through its servingUrl ${binding.servingUrl} (where the proxy sends its clients): ${why}`,
          type,
          { model: binding.name, servingUrl: binding.servingUrl },
        );
      let token: string | undefined;
      try {
        token = binding.upstreamAuth ? credentials.token(binding.upstreamAuth) : undefined;
      } catch (err) {
        throw fail((err as Error).message, FailureType.InvalidTarget);
      }
      let status: number;
      let text: string;
      try {
        const res = await doFetch(url, {
          method: 'POST',
          headers: { 'content-type': 'application/json', ...(token ? { authorization: `Bearer ${token}` } : {}) },
          body: JSON.stringify(probeRequestBody(binding.name, input.prompt, input.maxTokens)),
          signal: AbortSignal.timeout(input.timeoutMs),
        });
        status = res.status;
        text = await res.text();
      } catch (err) {
        throw fail(
          (err as Error).name === 'TimeoutError'
            ? `no answer within ${input.timeoutMs} ms`
            : `POST ${url} failed: ${describeCause(err)}`,
        );
      }
      if (status === 401) {
        throw fail(
          `HTTP 401: the server behind it wants a key (vLLM's --api-key); set upstreamAuth on the model in the layout${binding.upstreamAuth ? ' (the token it names was refused)' : ''}`,
          FailureType.Unauthorized,
        );
      }
      let body: unknown = null;
      try {
        body = JSON.parse(text);
      } catch {
        // judged as not a chat completion
      }
      const error = judgeProbeAnswer(status, body);
      if (error) throw fail(body === null ? `${error}: ${text.slice(0, MAX_ERROR_BODY)}` : error);
    }),
  );
}
