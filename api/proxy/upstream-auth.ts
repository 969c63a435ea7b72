import type { DomainSnapshot } from '../../schemas/entities';
import { HaruError } from '../../schemas/errors';
import { type UpstreamCredentials, upstreamCredentials } from '../../lib/secret-ref';
import type { ModelBinding } from './route-table';

/**
 * `headers` with `Authorization: Bearer <token>` when the route's model binding has an `upstreamAuth` (a vLLM
 * started with `--api-key` behind its servingUrl; `routeModel` hands it over); the same object, untouched,
 * otherwise. The client's own `Authorization` is for Haru and never goes upstream (headers.ts). A token this
 * process cannot read is a 500 naming the reference, never a request sent without it.
 */
export function withUpstreamAuth(
  headers: Record<string, string>,
  target: { domain: DomainSnapshot; upstreamAuth: ModelBinding['upstreamAuth'] },
  model: string,
  credentials: UpstreamCredentials = upstreamCredentials,
): Record<string, string> {
  const ref = target.upstreamAuth;
  if (!ref) return headers;
  try {
    return { ...headers, authorization: `Bearer ${credentials.token(ref)}` };
  } catch (err) {
    throw new HaruError(
      'internal_error',
      `model "${model}" on domain ${target.domain.slug}: ${(err as Error).message}`,
    );
  }
}
