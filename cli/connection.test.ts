import { chmodSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { HaruConfig, LoadedConfig } from './config-file';
import { DEFAULT_SERVER, resolveConnection } from './connection';

let dir: string;
beforeAll(() => {
  dir = mkdtempSync(path.join(os.tmpdir(), 'haru-connection-'));
  writeFileSync(path.join(dir, 'staging.token'), 'from-file\n', { mode: 0o600 });
  writeFileSync(path.join(dir, 'shared.token'), 'shared\n');
  chmodSync(path.join(dir, 'shared.token'), 0o644);
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const FILE = () => path.join(dir, 'config.json');
const config = (c: HaruConfig) => (): LoadedConfig => ({ file: FILE(), config: c });
const CONTEXTS: HaruConfig = {
  currentContext: 'prod',
  contexts: {
    prod: { server: 'https://prod.example', token: 'from-config' },
    staging: { server: 'https://staging.example', tokenFile: 'staging.token' },
    shared: { server: 'https://shared.example', tokenFile: 'shared.token' },
    lab: { server: 'http://lab.internal:8700', token: 'lab', insecureHttp: true },
  },
};
const noConfig = () => {
  throw new Error('the config file was read');
};

describe('resolveConnection', () => {
  it('takes a flag over the environment over the config file', () => {
    const flags = { server: 'https://flag.example', token: 'from-flag' };
    const env = { HARU_URL: 'https://env.example', HARU_API_TOKEN: 'from-env' };
    expect(resolveConnection(flags, env, config(CONTEXTS))).toEqual({
      server: 'https://flag.example',
      serverFrom: '--server',
      token: 'from-flag',
      tokenFrom: '--token',
    });
    expect(resolveConnection({}, env, config(CONTEXTS))).toMatchObject({
      server: 'https://env.example',
      token: 'from-env',
    });
    expect(resolveConnection({}, {}, config(CONTEXTS))).toMatchObject({
      server: 'https://prod.example',
      serverFrom: `context prod in ${FILE()}`,
      token: 'from-config',
    });
    expect(resolveConnection({ server: 'https://flag.example' }, {}, config(CONTEXTS))).toMatchObject({
      server: 'https://flag.example',
      token: 'from-config',
    });
  });

  it('reads no config file when flags and variables say everything, unless --context names one', () => {
    expect(resolveConnection({}, { HARU_URL: 'https://e.example', HARU_API_TOKEN: 't' }, noConfig).server).toBe(
      'https://e.example',
    );
    expect(() =>
      resolveConnection({ context: 'prod' }, { HARU_URL: 'https://e.example', HARU_API_TOKEN: 't' }, noConfig),
    ).toThrow('the config file was read');
  });

  it('uses the context --context names, its token file read relative to the config file and trimmed', () => {
    expect(resolveConnection({ context: 'staging' }, {}, config(CONTEXTS))).toMatchObject({
      server: 'https://staging.example',
      token: 'from-file',
    });
  });

  it('refuses a token file that group or others may read, naming the context and the file', () => {
    expect(() => resolveConnection({ context: 'shared' }, {}, config(CONTEXTS))).toThrow(
      expect.objectContaining({
        name: 'ConfigError',
        message: `context shared in ${FILE()}: tokenFile: ${path.join(dir, 'shared.token')} is open to group or others (mode 0644); chmod 600 it`,
      }),
    );
  });

  it('refuses a context the file does not have, as bad input', () => {
    expect(() => resolveConnection({ context: 'nope' }, {}, config(CONTEXTS))).toThrow(
      expect.objectContaining({ name: 'BadInputError', message: `no context nope in ${FILE()}` }),
    );
  });

  it('falls back to the local default with no flag, variable or context, and sends no token', () => {
    expect(resolveConnection({}, {}, config({ contexts: {} }))).toEqual({
      server: DEFAULT_SERVER,
      serverFrom: 'the default',
    });
  });

  it('refuses a bad --server or HARU_URL as bad input, naming it', () => {
    expect(() => resolveConnection({ server: 'haru.example' }, {}, noConfig)).toThrow(
      expect.objectContaining({ name: 'BadInputError', message: '--server must be an http(s) URL' }),
    );
    expect(() => resolveConnection({}, { HARU_URL: 'ftp://x' }, noConfig)).toThrow(
      expect.objectContaining({ name: 'ConfigError', message: expect.stringContaining('HARU_URL') }),
    );
  });

  describe('a token over plain http://', () => {
    const refusal =
      /^refusing to send the API token \(--token\) over plain http:\/\/ to haru\.internal:8700 \(--server\): use https:\/\/, or pass --insecure-http/;

    it('is refused to a host off loopback', () => {
      expect(() => resolveConnection({ server: 'http://haru.internal:8700', token: 't' }, {}, noConfig)).toThrow(
        expect.objectContaining({ name: 'BadInputError', message: expect.stringMatching(refusal) }),
      );
    });

    it('is sent with --insecure-http, or from a context that allows it', () => {
      expect(
        resolveConnection({ server: 'http://haru.internal:8700', token: 't', insecureHttp: true }, {}, noConfig).token,
      ).toBe('t');
      expect(resolveConnection({ context: 'lab' }, {}, config(CONTEXTS)).token).toBe('lab');
    });

    it('is sent to loopback, and nothing is refused without a token or over https', () => {
      for (const server of ['http://127.0.0.1:8700', 'http://localhost:8700', 'http://[::1]:8700']) {
        expect(resolveConnection({ server, token: 't' }, {}, noConfig).token).toBe('t');
      }
      expect(resolveConnection({ server: 'http://haru.internal:8700' }, {}, config({ contexts: {} })).token).toBe(
        undefined,
      );
      expect(resolveConnection({ server: 'https://haru.internal', token: 't' }, {}, noConfig).token).toBe('t');
    });
  });
});
