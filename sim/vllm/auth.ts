import { createHash, timingSafeEqual } from 'node:crypto';

/**
 * What `vllm serve --api-key` guards, as vLLM's `AuthenticationMiddleware` does it
 * (vllm/entrypoints/serve/middleware/authenticate.py; earlier vllm/entrypoints/openai/server_utils.py guarded
 * `/v1` alone): a path starting with one of these prefixes (a plain string prefix, so `/v1beta` too), after
 * percent-decoding as Starlette's `scope["path"]` is. Everything else (`/health`, `/metrics`, `/version`, the
 * dev-mode `/sleep`, `/wake_up`, `/is_sleeping`, `/collective_rpc`, `/reset_prefix_cache`) stays open.
 */
export const GUARDED_PREFIXES = ['/v1', '/v2', '/inference', '/cohere'] as const;

const digest = (s: string) => createHash('sha256').update(s, 'utf8').digest();

/**
 * Whether a request passes the guard: no keys configured, an OPTIONS request (CORS preflight), an unguarded
 * path, or an `Authorization` header whose scheme is `bearer` in any case, split at its first space, with the
 * rest equal to one of the keys (no trimming: `Bearer  key` fails). vLLM compares SHA-256 digests in constant
 * time against every key; so does this. A refused request gets `401 {"error": "Unauthorized"}`.
 */
export function passesApiKeyGuard(
  req: { method?: string; pathname: string; authorization?: string },
  keys: readonly string[],
): boolean {
  if (keys.length === 0 || req.method === 'OPTIONS') return true;
  let path = req.pathname;
  try {
    path = decodeURIComponent(path);
  } catch {
    // not valid percent-encoding: Starlette would have refused it earlier; compare it as it is
  }
  if (!GUARDED_PREFIXES.some((prefix) => path.startsWith(prefix))) return true;
  const header = req.authorization;
  if (!header) return false;
  const space = header.indexOf(' ');
  const scheme = space === -1 ? header : header.slice(0, space);
  const param = space === -1 ? '' : header.slice(space + 1);
  if (scheme.toLowerCase() !== 'bearer') return false;
  const given = digest(param);
  let match = false;
  for (const key of keys) match = timingSafeEqual(given, digest(key)) || match;
  return match;
}
