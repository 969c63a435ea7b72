import { defaultApiConfig } from './config';
import { silentLogger } from '../lib/logger';
import { bindHost } from './main';
import { tokenDigest } from '../lib/bearer-auth';

describe('bindHost', () => {
  it('binds every interface by default when a token is set, or the HOST asked for', () => {
    const quiet = () => {};
    expect(bindHost(defaultApiConfig({ HARU_API_TOKEN: 't' }), silentLogger, quiet)).toBe('0.0.0.0');
    expect(bindHost(defaultApiConfig({ HARU_API_TOKEN: 't', HOST: '10.0.0.5' }), silentLogger, quiet)).toBe('10.0.0.5');
  });

  it('binds every interface with a keys file and no token: the keys guard /v1', () => {
    const apiKeys = [{ name: 'chat', digest: tokenDigest('chat-secret'), scopes: ['inference' as const] }];
    expect(bindHost(defaultApiConfig({ apiKeys }), silentLogger, () => {})).toBe('0.0.0.0');
  });

  it('forces loopback with a loud warning when HARU_API_TOKEN is unset, whatever HOST says', () => {
    const written: string[] = [];
    const warnings: string[] = [];
    const logger = { ...silentLogger, warn: (m: string) => warnings.push(m) };
    expect(bindHost(defaultApiConfig({ HOST: '0.0.0.0' }), logger, (t) => written.push(t))).toBe('127.0.0.1');
    expect(bindHost(defaultApiConfig({ HOST: '::1' }), logger, (t) => written.push(t))).toBe('::1');
    expect(written.join('')).toMatch(/WARNING: HARU_API_TOKEN is not set/);
    expect(warnings).toHaveLength(2);
  });
});
