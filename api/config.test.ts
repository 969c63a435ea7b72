import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { ConfigError } from '../schemas/env';
import { loadApiConfig } from './config';

describe('API config', () => {
  it('fills every default, and a blank variable counts as unset', () => {
    const config = loadApiConfig({ PORT: '', HARU_API_TOKEN: '  ', HARU_CHAT_HOLD_MS: '' });
    expect(config.PORT).toBe(8700);
    expect(config.HARU_API_TOKEN).toBeUndefined();
    expect(config.HARU_CHAT_MAX_BODY_BYTES).toBe(32 * 1024 * 1024);
    expect(config.temporal.address).toBe('localhost:7233');
    expect(config.HARU_TASK_QUEUE).toBe('haru');
    expect(config.HARU_CHAT_HOLD_MS).toBe(60_000);
  });

  it('parses numbers and names every bad variable', () => {
    expect(loadApiConfig({ HARU_CHAT_HOLD_MAX: '7', PORT: '0' })).toMatchObject({ HARU_CHAT_HOLD_MAX: 7, PORT: 0 });
    let error: unknown;
    try {
      loadApiConfig({ PORT: 'eighty', HARU_CHAT_HOLD_MS: '-1', DATABASE_URL: 'mysql://x' });
    } catch (err) {
      error = err;
    }
    expect(error).toBeInstanceOf(ConfigError);
    const message = (error as Error).message;
    expect(message).toMatch(/PORT/);
    expect(message).toMatch(/HARU_CHAT_HOLD_MS/);
    expect(message).toMatch(/DATABASE_URL/);
  });
});

describe('API token', () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'haru-api-token-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));
  const file = (name: string, content: string) => {
    const p = path.join(dir, name);
    writeFileSync(p, content, { mode: 0o600 });
    return p;
  };

  it('trims surrounding whitespace from HARU_API_TOKEN', () => {
    expect(loadApiConfig({ HARU_API_TOKEN: '  s3cret\n' }).HARU_API_TOKEN).toBe('s3cret');
  });

  it('reads HARU_API_TOKEN_FILE once, trimmed (a secret file ends in a newline)', () => {
    expect(loadApiConfig({ HARU_API_TOKEN_FILE: file('token', 's3cret\r\n') }).HARU_API_TOKEN).toBe('s3cret');
  });

  it.each([
    ['both variables set', () => ({ HARU_API_TOKEN: 'a', HARU_API_TOKEN_FILE: file('both', 'b') }), /both set/],
    ['a missing file', () => ({ HARU_API_TOKEN_FILE: path.join(dir, 'absent') }), /cannot read .*ENOENT/],
    ['an empty file', () => ({ HARU_API_TOKEN_FILE: file('empty', ' \n') }), /is empty/],
  ])('refuses %s with a ConfigError naming HARU_API_TOKEN_FILE', (_what, env, message) => {
    expect(() => loadApiConfig(env())).toThrow(ConfigError);
    expect(() => loadApiConfig(env())).toThrow(message);
    expect(() => loadApiConfig(env())).toThrow(/HARU_API_TOKEN_FILE/);
  });
});
