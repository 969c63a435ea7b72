import { z } from 'zod';
import { tokenDigest } from '../../lib/bearer-auth';
import { readOwnerOnlyFile } from '../../lib/secret-file';
import { inputProblems, formatProblems, jsonPath } from '../../schemas/issues';
import { slugSchema } from '../../schemas/layout';
import type { ApiKey } from './api-key';
import { scopeSchema } from './scopes';

const keyNameSchema = z
  .string()
  .regex(
    /^[a-z0-9](?:[a-z0-9._-]{0,62}[a-z0-9])?$/,
    'must be a key name: lowercase letters, digits and inner `.`, `_`, `-` (1-64)',
  );

/** One key of the file: exactly one of `secret` (the bearer token itself) and `sha256` (its hex digest). */
const keyEntrySchema = z
  .strictObject({
    name: keyNameSchema,
    secret: z.string().trim().min(16, 'must be at least 16 characters').optional(),
    sha256: z
      .string()
      .regex(
        /^[0-9a-fA-F]{64}$/,
        'must be the SHA-256 of the secret in hex (64 digits: `printf %s "$SECRET" | sha256sum`)',
      )
      .optional(),
    scopes: z.array(scopeSchema).min(1, 'must name at least one scope'),
    /** Limits the key to these fleets (slug or UUID); absent: every fleet. */
    fleets: z.array(slugSchema).min(1, 'must name at least one fleet (leave it out for every fleet)').optional(),
  })
  .superRefine((key, ctx) => {
    if ((key.secret === undefined) === (key.sha256 === undefined)) {
      ctx.addIssue({ code: 'custom', message: 'must have exactly one of `secret` and `sha256`', path: [] });
    }
  });

const digestOf = (key: z.infer<typeof keyEntrySchema>): Buffer =>
  key.secret !== undefined ? tokenDigest(key.secret) : Buffer.from(key.sha256!, 'hex');

/**
 * The keys file (`HARU_API_KEYS_FILE`): `{ "keys": [ { name, secret | sha256, scopes, fleets? } ] }`. Names
 * and secrets are unique: a request's key must say who sent it.
 */
export const apiKeysFileSchema = z.strictObject({ keys: z.array(keyEntrySchema).min(1) }).superRefine((file, ctx) => {
  const names = new Map<string, number>();
  const digests = new Map<string, number>();
  file.keys.forEach((key, i) => {
    const sameName = names.get(key.name);
    if (sameName !== undefined) {
      ctx.addIssue({
        code: 'custom',
        message: `repeats the name of ${jsonPath(['keys', sameName])}`,
        path: ['keys', i, 'name'],
      });
    }
    names.set(key.name, i);
    if (key.secret === undefined && key.sha256 === undefined) return;
    const digest = digestOf(key).toString('hex');
    const sameSecret = digests.get(digest);
    if (sameSecret !== undefined) {
      ctx.addIssue({
        code: 'custom',
        message: `has the same secret as ${jsonPath(['keys', sameSecret])}`,
        path: ['keys', i, key.secret !== undefined ? 'secret' : 'sha256'],
      });
    }
    digests.set(digest, i);
  });
});

/**
 * The keys in `text`, the content of `file`. Throws `fail(message)` naming `HARU_API_KEYS_FILE`, the file and,
 * for each problem, its JSON path (`$.keys[1].scopes[0]: …`).
 */
export function parseApiKeys(text: string, file: string, fail: (message: string) => Error): ApiKey[] {
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (err) {
    throw fail(`HARU_API_KEYS_FILE: ${file} is not JSON (${(err as Error).message})`);
  }
  const parsed = apiKeysFileSchema.safeParse(json);
  if (!parsed.success) {
    throw fail(`HARU_API_KEYS_FILE: ${file} is not a valid keys file:\n${formatProblems(inputProblems(parsed.error))}`);
  }
  return parsed.data.keys.map((key) => ({
    name: key.name,
    digest: digestOf(key),
    scopes: [...new Set(key.scopes)],
    ...(key.fleets ? { fleets: [...new Set(key.fleets)] } : {}),
  }));
}

/**
 * Reads and parses the keys file once at start. It holds secrets (or digests that let a guess be checked
 * offline), so like a private key it must be its owner's alone: a file group or others may read is refused.
 */
export function loadApiKeysFile(file: string, fail: (message: string) => Error): ApiKey[] {
  return parseApiKeys(readOwnerOnlyFile(file, 'HARU_API_KEYS_FILE', fail).toString('utf8'), file, fail);
}
