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
