import type { Routing } from './routing-cache';

/** Headers Haru adds to every proxied answer: which domain served, at which revision, and staleness. */
export function routingHeaders(routing: Routing, domainSlug?: string): Record<string, string> {
  const headers: Record<string, string> = {
    'x-haru-fleet': routing.snapshot.slug,
    'x-haru-route-revision': String(routing.snapshot.routeRevision),
  };
  if (domainSlug) headers['x-haru-domain'] = domainSlug;
  if (routing.stale) headers['x-haru-routing'] = 'stale';
  return headers;
}

/**
 * `routingHeaders` for a routed request, built once per snapshot, domain and staleness (a snapshot is
 * replaced, never changed, when routing moves) and shared read-only by every request routed from it.
 */
const routedHeaders = new WeakMap<object, Map<string, Readonly<Record<string, string>>>>();
export function routedHeadersFor(routing: Routing, domainSlug: string): Readonly<Record<string, string>> {
  let bySlug = routedHeaders.get(routing.snapshot);
  if (!bySlug) routedHeaders.set(routing.snapshot, (bySlug = new Map()));
  const key = `${routing.stale ? 1 : 0}${domainSlug}`;
  let headers = bySlug.get(key);
  if (!headers) bySlug.set(key, (headers = Object.freeze(routingHeaders(routing, domainSlug))));
  return headers;
}
