import type { IncomingMessage } from 'node:http';
import type { ApiKey } from './api-key';

// Keyed by the request itself: the lean proxy path has no Express request to decorate, and a WeakMap entry
// goes away with its request.
const principals = new WeakMap<IncomingMessage, ApiKey>();

/** Records which key a request authenticated with (the bearer check, api/auth/authorize.ts). */
export const setPrincipal = (req: IncomingMessage, key: ApiKey): void => {
  principals.set(req, key);
};

/** The key a request authenticated with; undefined on an API without keys (loopback only) or an open route. */
export const principalOf = (req: IncomingMessage): ApiKey | undefined => principals.get(req);

/** The key's name for the access log; null when the request carried none. */
export const keyNameOf = (req: IncomingMessage): string | null => principals.get(req)?.name ?? null;

/**
 * Who asked, as operations, workflow memos and events record it: `api:<key name>`, or `api` on an API
 * without keys. The prefix keeps a key named like an internal requester (`monitor`) from passing for it.
 */
export const requestedBy = (req: IncomingMessage): string => {
  const key = principals.get(req);
  return key ? `api:${key.name}` : 'api';
};
