import { tokenDigest } from '../../lib/bearer-auth';
import type { Scope } from './scopes';

/** One key the API accepts: who it is (for audit and the access log), what it may do and on which fleets. */
export interface ApiKey {
  name: string;
  /** SHA-256 of the secret: the bearer check compares digests, so the secret itself need not be kept. */
  digest: Buffer;
  scopes: readonly Scope[];
  /** Fleets (slug or UUID) the key is limited to; undefined: every fleet. */
  fleets?: readonly string[];
}

/** The name of the key HARU_API_TOKEN stands for. */
export const DEFAULT_KEY_NAME = 'default';

/**
 * HARU_API_TOKEN as a key: every scope, every fleet, so a deployment with one token works as before (the
 * CLI, the fleet page and OpenAI clients all send it).
 */
export const defaultKey = (token: string): ApiKey => ({
  name: DEFAULT_KEY_NAME,
  digest: tokenDigest(token),
  scopes: ['admin', 'inference'],
});

/**
 * Every key the API accepts: the keys file's, plus HARU_API_TOKEN's `default` key when the token is set.
 * Both may be set (a deployment moves its clients to scoped keys, then drops the token). Throws `fail(message)`
 * when the file already names a key `default` or holds the token's secret: which one a request meant would be
 * a guess.
 */
export function apiKeyRing(
  fileKeys: readonly ApiKey[],
  token: string | undefined,
  fail: (message: string) => Error,
): ApiKey[] {
  if (token === undefined) return [...fileKeys];
  const key = defaultKey(token);
  const clash = fileKeys.find((k) => k.name === key.name || k.digest.equals(key.digest));
  if (clash) {
    throw fail(
      clash.name === key.name
        ? `HARU_API_KEYS_FILE names a key "${key.name}", the name HARU_API_TOKEN's key has: rename it`
        : `HARU_API_KEYS_FILE: key "${clash.name}" has the secret of HARU_API_TOKEN: give it its own`,
    );
  }
  return [...fileKeys, key];
}
