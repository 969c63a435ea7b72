import { ApplicationFailure } from '@temporalio/common';
import { fetch as undiciFetch } from 'undici';
import { judgeServingUrlAnswer, servingUrlProbeRequest } from '../core/serving-url-probe';
import { describeCause } from '../lib/error-cause';
import { type UpstreamCredentials, upstreamCredentials } from '../lib/secret-ref';
import type { InferenceSlot } from '../schemas/entities';
import { FailureType } from '../schemas/failures';
import { secretRefProblem } from '../schemas/secret-ref';

export interface ServingUrlProbe {
  prompt: string;
  maxTokens: number;
  timeoutMs: number;
}

/**
 * Sends the probe's completion to every model through its layout `servingUrl`, the address the proxy will send
 * clients to, with the bearer token its `upstreamAuth` names, from this worker (as the proxy would reach it,
 * not from the host's loopback). A model that answers on its host but not there fails the promotion before the
 * commit: non-retryable `ProbeFailed` naming the model and the URL, `Unauthorized` for a 401 (the layout's
 * `upstreamAuth` is missing or wrong), `InvalidTarget` for a token this worker cannot read or a reference outside
 * the layout's allow-list (schemas/secret-ref.ts).
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
      const { url, body } = servingUrlProbeRequest(binding, input);
      const fail = (why: string, type: FailureType = FailureType.ProbeFailed) =>
        ApplicationFailure.nonRetryable(
          `model ${binding.name} answers on its host but not through its servingUrl ${binding.servingUrl} (where the proxy sends its clients): ${why}`,
          type,
          { model: binding.name, servingUrl: binding.servingUrl },
        );
      let token: string | undefined;
      // A layout stored before its references were checked: its token is not read, let alone sent.
      const refused = binding.upstreamAuth && secretRefProblem(binding.upstreamAuth);
      if (refused) throw fail(refused, FailureType.InvalidTarget);
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
          body,
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
      const failure = judgeServingUrlAnswer({ status, text }, !!binding.upstreamAuth);
      if (failure) throw fail(failure.why, failure.type);
    }),
  );
}
