import type { IncomingHttpHeaders } from 'node:http';

// Hop-by-hop headers (RFC 9110 §7.6.1) and headers the proxy sets itself.
const HOP_BY_HOP = new Set([
  'connection',
  'keep-alive',
  'proxy-authenticate',
  'proxy-authorization',
  'proxy-connection',
  'te',
  'trailer',
  'transfer-encoding',
  'upgrade',
]);
// Never sent upstream: the client's credentials are for Haru, not for vLLM (`x-api-key` is how Azure- and
// Anthropic-style clients send theirs); the body length is recomputed; `forwarded` and `x-forwarded-*` are the client's word about where the
// request came from, which vLLM and a gateway in front of it would believe.
const NOT_UPSTREAM = new Set([
  'host',
  'authorization',
  'x-api-key',
  'cookie',
  'content-length',
  'expect',
  'accept-encoding',
  'forwarded',
  'x-forwarded-for',
  'x-forwarded-host',
  'x-forwarded-proto',
  'x-forwarded-port',
  'x-forwarded-prefix',
  'x-real-ip',
]);
// Never passed back: an upstream must not set cookies on Haru's origin.
const NOT_TO_CLIENT = new Set(['set-cookie', 'set-cookie2']);
// One lookup per header on the hot path.
const DROP_UPSTREAM: ReadonlySet<string> = new Set([...HOP_BY_HOP, ...NOT_UPSTREAM]);
const DROP_CLIENT: ReadonlySet<string> = new Set([...HOP_BY_HOP, ...NOT_TO_CLIENT]);

const NONE_LISTED: ReadonlySet<string> = new Set();
const connectionListed = (headers: IncomingHttpHeaders): ReadonlySet<string> =>
  headers.connection === undefined
    ? NONE_LISTED
    : new Set(
        String(headers.connection)
          .split(',')
          .map((h) => h.trim().toLowerCase())
          .filter(Boolean),
      );

/**
 * Headers forwarded to the upstream: the client's, minus hop-by-hop ones, `Authorization` and `X-Api-Key`,
 * cookies, the client's forwarding claims (`Forwarded`, `X-Forwarded-*`, `X-Real-IP`), `X-Haru-*` and the
 * length (undici sets it from the byte-identical body).
 */
export function upstreamRequestHeaders(client: IncomingHttpHeaders): Record<string, string> {
  const listed = connectionListed(client);
  const out: Record<string, string> = {};
  for (const name in client) {
    const value = client[name];
    const key = name.toLowerCase();
    if (value === undefined || DROP_UPSTREAM.has(key) || listed.has(key) || key.startsWith('x-haru-')) continue;
    out[key] = Array.isArray(value) ? value.join(', ') : value;
  }
  return out;
}

/**
 * Headers passed back to the client: the upstream's, minus hop-by-hop ones, cookies and any
 * `X-Haru-*` (only Haru says which fleet, domain and revision served), then `extra` (Haru's own).
 */
export function clientResponseHeaders(
  upstream: IncomingHttpHeaders,
  extra: Record<string, string> = {},
): Record<string, string | string[]> {
  const listed = connectionListed(upstream);
  const out: Record<string, string | string[]> = {};
  for (const name in upstream) {
    const value = upstream[name];
    const key = name.toLowerCase();
    if (value === undefined || DROP_CLIENT.has(key) || listed.has(key) || key.startsWith('x-haru-')) continue;
    out[key] = value;
  }
  for (const key in extra) out[key] = extra[key]!;
  return out;
}
