import type { IncomingMessage, ServerResponse } from 'node:http';
import type { RequestHandler } from 'express';
import { logRequestError, toHaruError } from '../errors';
import { ClientResponse } from './client-response';
import { readInferenceBody } from './inference-body';
import type { ProxyDeps } from './proxy-deps';
import { proxyOnce } from './proxy-once';
import { proxyWithResend } from './resend/resend';
import type { InferenceEndpoint } from './route-table';

export type { ProxyDeps } from './proxy-deps';
export { requestFleet } from './proxy-once';
export { routingHeaders } from './routing-headers';

/**
 * One inference request whose body was read (a raw Buffer, or undefined when there was none): proxies it
 * (proxyOnce, sent again by proxyWithResend where its upstream died) and answers errors through the one
 * writer of its response (ClientResponse: the envelope, or a final SSE event once a stream started). Plain
 * Node objects, so both the lean entry (api/proxy/lean.ts) and the Express route use it.
 */
export async function handleInference(
  deps: ProxyDeps,
  endpoint: InferenceEndpoint,
  req: IncomingMessage,
  res: ServerResponse,
  rawBody: unknown,
): Promise<void> {
  const started = process.hrtime.bigint();
  const client = new ClientResponse(res);
  let outcome = 'ok';
  try {
    const body = readInferenceBody(rawBody);
    outcome = await proxyWithResend(deps, endpoint, req.headers, client, rawBody as Buffer, body, (raw, attempt) =>
      proxyOnce(deps, endpoint, req, client, raw, body, attempt),
    );
  } catch (err) {
    const error = toHaruError(err);
    outcome = error.code;
    logRequestError(deps.logger, error, err, { endpoint });
    client.fail(error);
  } finally {
    const seconds = Number(process.hrtime.bigint() - started) / 1e9;
    deps.metrics.proxyDuration.observe({ endpoint, outcome }, seconds);
  }
}

/** Express handler for one inference endpoint. The body arrives as a raw Buffer (inferenceBodyReader). */
export function inferenceHandler(deps: ProxyDeps, endpoint: InferenceEndpoint): RequestHandler {
  return (req, res) => handleInference(deps, endpoint, req, res, req.body);
}
