/** The proxied OpenAI endpoints. Only these paths are ever built toward an upstream. */
export const INFERENCE_ENDPOINTS = ['chat/completions', 'completions', 'embeddings'] as const;
export type InferenceEndpoint = (typeof INFERENCE_ENDPOINTS)[number];

const UPSTREAM_URL_CACHE_MAX = 1024;
// A memo of a pure function (the same answer for the same input), kept for the proxy's hot path: this file is
// never imported by workflow code, where module state is forbidden.
const upstreamUrls = new Map<string, string>();

/**
 * Builds the upstream URL for an inference endpoint from a model's servingUrl, as both the proxy (its clients'
 * requests) and the promotion's serving-URL probe use it. A servingUrl that already ends in `/v1` gets the
 * endpoint appended; any other gets `/v1/<endpoint>`. The client's path and query are never used, so admin
 * endpoints (`/sleep`, `/wake_up`, …) cannot be reached through the proxy. Throws TypeError for a servingUrl
 * that is not a URL (the layout schema refuses one).
 */
export function upstreamUrl(servingUrl: string, endpoint: InferenceEndpoint): string {
  const key = `${endpoint} ${servingUrl}`;
  const cached = upstreamUrls.get(key);
  if (cached !== undefined) return cached;
  const url = new URL(servingUrl);
  const base = url.pathname.replace(/\/+$/, '');
  url.pathname = `${base.endsWith('/v1') ? base : `${base}/v1`}/${endpoint}`;
  url.search = '';
  url.hash = '';
  // Bounded: serving URLs change only with the layout; a full map just starts over.
  if (upstreamUrls.size >= UPSTREAM_URL_CACHE_MAX) upstreamUrls.clear();
  const built = url.toString();
  upstreamUrls.set(key, built);
  return built;
}
