import { chmodSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { tokenDigest } from '../../lib/bearer-auth';
import { ConfigError } from '../../schemas/env';
import { loadApiConfig } from '../config';
import { apiKeyRing } from './api-key';
import { loadApiKeysFile, parseApiKeys } from './keys-file';
import { grants } from './scopes';

const fail = (message: string) => new ConfigError(message);
const parse = (doc: unknown) => parseApiKeys(JSON.stringify(doc), 'keys.json', fail);
const SECRET = 'chat-secret-0123456789';
const DIGEST = tokenDigest('ops-secret-0123456789').toString('hex');

/** The message `parse` throws for `doc`. */
function refusal(doc: unknown): string {
  try {
    parse(doc);
  } catch (err) {
    expect(err).toBeInstanceOf(ConfigError);
    return (err as Error).message;
  }
  throw new Error('the keys file was accepted');
}

describe('parseApiKeys', () => {
  it('reads each key with its name, digest, scopes and fleets', () => {
    const keys = parse({
      keys: [
        { name: 'chat', secret: SECRET, scopes: ['inference'], fleets: ['prod', 'prod'] },
        { name: 'ops.team', sha256: DIGEST.toUpperCase(), scopes: ['operate', 'read'] },
      ],
    });
    expect(keys).toEqual([
      { name: 'chat', digest: tokenDigest(SECRET), scopes: ['inference'], fleets: ['prod'] },
      { name: 'ops.team', digest: Buffer.from(DIGEST, 'hex'), scopes: ['operate', 'read'] },
    ]);
  });

  it.each([
    ['an unknown scope', { keys: [{ name: 'a', secret: SECRET, scopes: ['root'] }] }, '$.keys[0].scopes[0]'],
    ['no scope', { keys: [{ name: 'a', secret: SECRET, scopes: [] }] }, '$.keys[0].scopes'],
    ['a bad name', { keys: [{ name: 'A B', secret: SECRET, scopes: ['read'] }] }, '$.keys[0].name'],
    ['a short secret', { keys: [{ name: 'a', secret: 'short', scopes: ['read'] }] }, '$.keys[0].secret'],
    ['a digest that is not hex', { keys: [{ name: 'a', sha256: 'zz', scopes: ['read'] }] }, '$.keys[0].sha256'],
    [
      'both secret and digest',
      { keys: [{ name: 'a', secret: SECRET, sha256: DIGEST, scopes: ['read'] }] },
      '$.keys[0]:',
    ],
    ['neither secret nor digest', { keys: [{ name: 'a', scopes: ['read'] }] }, '$.keys[0]:'],
    ['an unknown field', { keys: [{ name: 'a', secret: SECRET, scopes: ['read'], scope: 'x' }] }, '$.keys[0].scope'],
    [
      'an empty fleet list',
      { keys: [{ name: 'a', secret: SECRET, scopes: ['read'], fleets: [] }] },
      '$.keys[0].fleets',
    ],
    ['no keys', { keys: [] }, '$.keys'],
  ])('refuses %s at its JSON path', (_what, doc, at) => {
    const message = refusal(doc);
    expect(message).toContain('HARU_API_KEYS_FILE: keys.json');
    expect(message).toContain(at);
  });

  it('refuses two keys with one name, or one secret, naming both', () => {
    expect(
      refusal({
        keys: [
          { name: 'a', secret: SECRET, scopes: ['read'] },
          { name: 'a', secret: `${SECRET}x`, scopes: ['read'] },
        ],
      }),
    ).toContain('$.keys[1].name: repeats the name of $.keys[0]');
    expect(
      refusal({
        keys: [
          { name: 'a', sha256: tokenDigest(SECRET).toString('hex'), scopes: ['read'] },
          { name: 'b', secret: SECRET, scopes: ['operate'] },
        ],
      }),
    ).toContain('$.keys[1].secret: has the same secret as $.keys[0]');
  });

  it('refuses a file that is not JSON, saying so', () => {
    expect(() => parseApiKeys('keys: []', 'keys.yaml', fail)).toThrow(/HARU_API_KEYS_FILE: keys.yaml is not JSON/);
  });
});

describe('loadApiKeysFile', () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'haru-api-keys-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));
  const write = (name: string, doc: unknown, mode: number) => {
    const file = path.join(dir, name);
    writeFileSync(file, JSON.stringify(doc));
    chmodSync(file, mode);
    return file;
  };
  const doc = { keys: [{ name: 'chat', secret: SECRET, scopes: ['inference'] }] };

  it('reads an owner-only file', () => {
    expect(loadApiKeysFile(write('ok.json', doc, 0o600), fail).map((k) => k.name)).toEqual(['chat']);
  });

  it.each(['640', '604'])('refuses a file group or others may read (mode %s)', (mode) => {
    const file = write(`open-${mode}.json`, doc, parseInt(mode, 8));
    expect(() => loadApiKeysFile(file, fail)).toThrow(
      new RegExp(`HARU_API_KEYS_FILE: ${file} .*mode 0${mode}.*chmod 600`),
    );
  });

  it('is read at start by loadApiConfig, which stops on a bad file or a clash with HARU_API_TOKEN', () => {
    const file = write('env.json', doc, 0o600);
    expect(loadApiConfig({ HARU_API_KEYS_FILE: file }).apiKeys?.map((k) => k.name)).toEqual(['chat']);
    expect(() => loadApiConfig({ HARU_API_KEYS_FILE: write('bad.json', { keys: [{}] }, 0o600) })).toThrow(
      /\$\.keys\[0\]\.name/,
    );
    expect(() => loadApiConfig({ HARU_API_KEYS_FILE: file, HARU_API_TOKEN: SECRET })).toThrow(
      /key "chat" has the secret of HARU_API_TOKEN/,
    );
    const named = write('named.json', { keys: [{ name: 'default', secret: SECRET, scopes: ['read'] }] }, 0o600);
    expect(() => loadApiConfig({ HARU_API_KEYS_FILE: named, HARU_API_TOKEN: 'another-token' })).toThrow(
      /names a key "default"/,
    );
  });
});

describe('apiKeyRing', () => {
  it("adds HARU_API_TOKEN as the key `default`, holding every scope on every fleet, beside the file's keys", () => {
    const ring = apiKeyRing(parse({ keys: [{ name: 'chat', secret: SECRET, scopes: ['inference'] }] }), 'tok', fail);
    const key = ring.find((k) => k.name === 'default')!;
    expect(key).toEqual({ name: 'default', digest: tokenDigest('tok'), scopes: ['admin', 'inference'] });
    for (const scope of ['inference', 'read', 'operate', 'admin'] as const)
      expect(grants(key.scopes, scope)).toBe(true);
    expect(ring.map((k) => k.name)).toEqual(['chat', 'default']);
    expect(apiKeyRing([], undefined, fail)).toEqual([]);
  });
});

describe('grants', () => {
  it('admin grants operate grants read; inference stands apart', () => {
    expect(grants(['admin'], 'operate')).toBe(true);
    expect(grants(['admin'], 'read')).toBe(true);
    expect(grants(['operate'], 'read')).toBe(true);
    expect(grants(['operate'], 'admin')).toBe(false);
    expect(grants(['read'], 'operate')).toBe(false);
    expect(grants(['admin'], 'inference')).toBe(false);
    expect(grants(['inference'], 'read')).toBe(false);
    expect(grants(['inference', 'read'], 'read')).toBe(true);
  });
});
