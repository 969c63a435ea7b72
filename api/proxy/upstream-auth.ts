import type { DomainSnapshot } from '../../schemas/entities';
import { HaruError } from '../../schemas/errors';
import { type UpstreamCredentials, upstreamCredentials } from '../../lib/secret-ref';

/**
 * `headers` with `Authorization: Bearer <token>` when the layout gives `model` on `domain` an `upstreamAuth`
 * (a vLLM started with `--api-key` behind its servingUrl); the same object, untouched, otherwise. The client's
 * own `Authorization` is for Haru and never goes upstream (headers.ts). A token this process cannot read is a
 * 500 naming the reference, never a request sent without it.
 */
export function withUpstreamAuth(
  headers: Record<string, string>,
  domain: DomainSnapshot,
  model: string,
  credentials: UpstreamCredentials = upstreamCredentials,
): Record<string, string> {
  let ref;
  for (const slot of domain.slots) {
    if (slot.kind !== 'inference') continue;
    const binding = slot.models.find((m) => m.name === model);
    if (binding) {
      ref = binding.upstreamAuth;
      break;
    }
  }
  if (!ref) return headers;
  try {
    return { ...headers, authorization: `Bearer ${credentials.token(ref)}` };
  } catch (err) {
    throw new HaruError('internal_error', `model "${model}" on domain ${domain.slug}: ${(err as Error).message}`);
  }
}
