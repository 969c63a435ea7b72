import { chmodSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { ConfigError } from '../schemas/env';
import { loadSupervisorConfig, loadSupervisorEnv, resolveListenHost, resolveSupervisorToken } from './config';

const valid = {
  inference: [{ gpuIndex: 0, models: [{ name: 'small-a', port: 8001 }], sleepLevel: 1 }],
  training: [{ gpuIndex: 0, command: ['python', 'train.py'], checkpointDir: '/data/ckpt' }],
};
const noFile = (file: string): string => {
  throw new Error(`ENOENT: ${file}`);
};

describe('supervisor config', () => {
  it('reads inline JSON and a file path', () => {
    expect(loadSupervisorConfig(JSON.stringify(valid), noFile).inference[0]!.models[0]!.name).toBe('small-a');
    const fromFile = loadSupervisorConfig('/etc/haru/supervisor.json', (file) => {
      expect(file).toBe('/etc/haru/supervisor.json');
      return JSON.stringify({ inference: [{ gpuIndex: 1, models: [{ name: 'big', port: 8002 }] }] });
    });
    expect(fromFile).toEqual({
      inference: [{ gpuIndex: 1, models: [{ name: 'big', port: 8002 }], sleepLevel: 1 }],
      training: [],
    });
  });

  it('lists every problem of a bad config at once', () => {
    const bad = {
      inference: [
        { gpuIndex: 0, models: [{ name: 'dup', port: 8001 }], sleepLevel: 3 },
        { gpuIndex: 0, models: [{ name: 'dup', port: 8001 }] },
      ],
      training: [
        { gpuIndex: 1, command: [], checkpointDir: '/c' },
        { gpuIndex: 1, command: ['x'], checkpointDir: '/c', extra: true },
      ],
    };
    let error: unknown;
    try {
      loadSupervisorConfig(JSON.stringify(bad), noFile);
    } catch (err) {
      error = err;
    }
    expect(error).toBeInstanceOf(ConfigError);
    const message = (error as Error).message;
    for (const expected of ['inference.0.sleepLevel', 'training.0.command', 'training.1: Unrecognized key: "extra"']) {
      expect(message).toContain(expected);
    }
  });

  it('reports duplicate model names, ports and (gpu, kind) pairs', () => {
    const dup = {
      inference: [
        { gpuIndex: 0, models: [{ name: 'a', port: 8001 }] },
        { gpuIndex: 0, models: [{ name: 'a', port: 8001 }] },
      ],
      training: [
        { gpuIndex: 2, command: ['x'], checkpointDir: '/c' },
        { gpuIndex: 2, command: ['y'], checkpointDir: '/d' },
      ],
    };
    expect(() => loadSupervisorConfig(JSON.stringify(dup), noFile)).toThrow(
      /GPU 0 already has an inference slot[\s\S]*duplicate model name "a"[\s\S]*port 8001 is used twice[\s\S]*GPU 2 already has a training slot/,
    );
  });

  it('names the source of unreadable or non-JSON config', () => {
    expect(() => loadSupervisorConfig('/missing.json', noFile)).toThrow(/cannot read supervisor config \/missing.json/);
    expect(() => loadSupervisorConfig('{ nope', noFile)).toThrow(/inline JSON\) is not valid JSON/);
  });

  it('parses the environment with defaults and lists bad variables', () => {
    const env = loadSupervisorEnv({ HARU_SUPERVISOR_CONFIG: '{}', HARU_SUPERVISOR_TOKEN: '' });
    expect(env).toMatchObject({ PORT: 8701, HARU_GPU_VENDOR: 'nvidia' });
    expect(env.HARU_SUPERVISOR_TOKEN).toBeUndefined(); // blank counts as unset
    expect(() => loadSupervisorEnv({ PORT: 'x', HARU_GPU_VENDOR: 'intel' })).toThrow(
      /HARU_SUPERVISOR_CONFIG: is required[\s\S]*PORT[\s\S]*HARU_GPU_VENDOR/,
    );
  });

  it('listens on loopback only without a token and refuses a public host then', () => {
    expect(resolveListenHost({ HARU_SUPERVISOR_TOKEN: undefined, HARU_SUPERVISOR_HOST: undefined })).toBe('127.0.0.1');
    expect(resolveListenHost({ HARU_SUPERVISOR_TOKEN: 't', HARU_SUPERVISOR_HOST: undefined })).toBe('0.0.0.0');
    expect(resolveListenHost({ HARU_SUPERVISOR_TOKEN: undefined, HARU_SUPERVISOR_HOST: '::1' })).toBe('::1');
    expect(() => resolveListenHost({ HARU_SUPERVISOR_TOKEN: undefined, HARU_SUPERVISOR_HOST: '0.0.0.0' })).toThrow(
      ConfigError,
    );
  });
});

describe('supervisor token file', () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'haru-token-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));
  const file = (name: string, content: string, mode: number) => {
    const p = path.join(dir, name);
    writeFileSync(p, content);
    chmodSync(p, mode);
    return p;
  };

  it('reads the token from HARU_SUPERVISOR_TOKEN_FILE, trimmed', () => {
    expect(resolveSupervisorToken({ HARU_SUPERVISOR_TOKEN_FILE: file('t', '  s3cret\n', 0o600) })).toBe('s3cret');
    expect(resolveSupervisorToken({ HARU_SUPERVISOR_TOKEN: 'inline' })).toBe('inline');
    expect(resolveSupervisorToken({})).toBeUndefined();
  });

  it('refuses both at once, an empty or unreadable file, and one others may read', () => {
    const ok = file('ok', 'x', 0o600);
    expect(() => resolveSupervisorToken({ HARU_SUPERVISOR_TOKEN: 'a', HARU_SUPERVISOR_TOKEN_FILE: ok })).toThrow(
      /HARU_SUPERVISOR_TOKEN and HARU_SUPERVISOR_TOKEN_FILE exclude each other/,
    );
    expect(() => resolveSupervisorToken({ HARU_SUPERVISOR_TOKEN_FILE: file('e', ' \n', 0o600) })).toThrow(
      /HARU_SUPERVISOR_TOKEN_FILE: .* is empty/,
    );
    expect(() => resolveSupervisorToken({ HARU_SUPERVISOR_TOKEN_FILE: path.join(dir, 'missing') })).toThrow(
      /HARU_SUPERVISOR_TOKEN_FILE: cannot read .*missing \(ENOENT\)/,
    );
    expect(() => resolveSupervisorToken({ HARU_SUPERVISOR_TOKEN_FILE: file('w', 'x', 0o644) })).toThrow(
      /HARU_SUPERVISOR_TOKEN_FILE: .* is readable by others \(mode 0644\); chmod 600 it/,
    );
  });
});
